"""Fixtures of the job runtime tests: a fresh PostgreSQL database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    # imported here: the SQLite job tests must collect without psycopg (tests/test_layout.py)
    from tests.postgres.services import fresh_database

    with fresh_database() as dsn:
        yield dsn
