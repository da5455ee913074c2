"""Reaching the real PostgreSQL and Redis servers the service tests run against.

* PostgreSQL: ``REMORA_PG_DSN`` (a libpq DSN or URI of a *maintenance* database, default
  ``postgresql://postgres@127.0.0.1:5432/postgres``).  Each test gets its own fresh database,
  ``remora_test_<random>``, created through it and dropped afterwards.
* Redis: ``REMORA_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); tests use their own
  random key prefix and delete their keys.

When a server is unreachable the test is skipped with the reason — or fails, when
``REMORA_REQUIRE_SERVICES=1`` (``.ci/run`` sets it), so CI cannot pass by skipping.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import NoReturn
from urllib.parse import urlparse

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def pg_maintenance_dsn() -> str:
    return os.environ.get("REMORA_PG_DSN") or DEFAULT_PG_DSN


def redis_url() -> str:
    return os.environ.get("REMORA_REDIS_URL") or DEFAULT_REDIS_URL


def services_required() -> bool:
    return os.environ.get("REMORA_REQUIRE_SERVICES") == "1"


def unavailable(service: str, reason: str) -> NoReturn:
    """Skip the current test — or fail it under ``REMORA_REQUIRE_SERVICES=1``."""
    message = f"{service} unreachable: {reason}"
    if services_required():
        pytest.fail(f"{message} (REMORA_REQUIRE_SERVICES=1, so this fails instead of skipping)")
    pytest.skip(message)


def probe_postgres(dsn: str) -> str | None:
    """None if ``dsn`` accepts a connection, else why not (one line)."""
    try:
        with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return " ".join(str(exc).split())
    return None


def probe_tcp(host: str, port: int) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=3):
            return None
    except OSError as exc:
        return f"{host}:{port}: {exc}"


@cache
def _postgres_problem() -> str | None:
    return probe_postgres(pg_maintenance_dsn())


def require_postgres() -> str:
    """The maintenance DSN, or skip/fail the test when the server is unreachable."""
    problem = _postgres_problem()
    if problem is not None:
        unavailable("PostgreSQL", problem)
    return pg_maintenance_dsn()


def require_redis() -> str:
    url = urlparse(redis_url())
    problem = probe_tcp(url.hostname or "127.0.0.1", url.port or 6379)
    if problem is not None:
        unavailable("Redis", problem)
    return redis_url()


def dsn_for(dbname: str, base: str | None = None) -> str:
    return make_conninfo(base or pg_maintenance_dsn(), dbname=dbname)


def create_database(maintenance: str) -> str:
    name = f"remora_test_{secrets.token_hex(6)}"
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name


def drop_database(maintenance: str, name: str) -> None:
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextmanager
def fresh_database() -> Iterator[str]:
    """A DSN of a brand-new, empty database, dropped on exit."""
    maintenance = require_postgres()
    name = create_database(maintenance)
    try:
        yield dsn_for(name, maintenance)
    finally:
        drop_database(maintenance, name)


def database_name(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])
