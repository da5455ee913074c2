"""Reaching the real PostgreSQL server the PostgreSQL tests run against.

``REMORA_PG_DSN`` is a libpq DSN or URI of a *maintenance* database (default
``postgresql://postgres@127.0.0.1:5432/postgres``).  Each test gets its own fresh database,
``remora_test_<random>``, created through it and dropped afterwards.

When the server is unreachable the test is skipped with the reason — or fails, when
``REMORA_REQUIRE_SERVICES=1`` (``.ci/run`` sets it), so CI cannot pass by skipping; the
gate itself is :func:`tests.common.services.unavailable`, shared with the Redis tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from remora.sim.scratch import scratch_database
from tests.common.services import DEFAULT_PG_DSN, unavailable


def pg_maintenance_dsn() -> str:
    return os.environ.get("REMORA_PG_DSN") or DEFAULT_PG_DSN


def probe_postgres(dsn: str) -> str | None:
    """None if ``dsn`` accepts a connection, else why not (one line)."""
    try:
        with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return " ".join(str(exc).split())
    return None


@cache
def _postgres_problem() -> str | None:
    return probe_postgres(pg_maintenance_dsn())


def require_postgres() -> str:
    """The maintenance DSN, or skip/fail the test when the server is unreachable."""
    problem = _postgres_problem()
    if problem is not None:
        unavailable("PostgreSQL", problem)
    return pg_maintenance_dsn()


def dsn_for(dbname: str, base: str | None = None) -> str:
    return make_conninfo(base or pg_maintenance_dsn(), dbname=dbname)


@contextmanager
def fresh_database() -> Iterator[str]:
    """A DSN of a brand-new, empty database, dropped on exit."""
    with scratch_database(require_postgres(), prefix="remora_test") as dsn:
        yield dsn


def database_name(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


def pg_progress(dsn: str) -> Callable[[], int]:
    def count() -> int:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM remora_outbox) "
                    "+ (SELECT count(*) FROM remora_quarantine)"
                ).fetchone()
        except psycopg.Error:
            return 0  # not created yet
        return int(row[0]) if row else 0

    return count
