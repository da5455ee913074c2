"""Fixtures of the job runtime tests: a fresh PostgreSQL database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.services import fresh_database


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    with fresh_database() as dsn:
        yield dsn
