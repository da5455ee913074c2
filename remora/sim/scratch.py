"""Throw-away PostgreSQL databases, for tests and for replays on PostgreSQL."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from remora.errors import Unavailable
from remora.store.postgres import describe_dsn, one_line, parse_dsn


@contextmanager
def scratch_database(dsn: str, prefix: str = "remora_scratch") -> Iterator[str]:
    """Create an empty database named ``<prefix>_<random>`` on the server ``dsn`` points at
    (its user needs CREATEDB), yield its DSN, and drop it on exit."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    parse_dsn(dsn)
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise Unavailable(
            f"cannot create a scratch database on {describe_dsn(dsn)}: {one_line(exc)}"
        ) from None
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


__all__ = [
    "scratch_database",
]
