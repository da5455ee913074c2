"""Fixtures of the PostgreSQL evidence tests: each test gets its own fresh database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.services import fresh_database


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A DSN of a fresh, empty database of its own (dropped after the test)."""
    with fresh_database() as dsn:
        yield dsn
