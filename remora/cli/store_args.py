"""Choosing the state store on the command line: ``--db FILE`` (SQLite) or ``--dsn DSN``."""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from remora.errors import InvalidInput
from remora.store import SqliteStore, StateStore
from remora.store.sqlite import connect_read_only

DEFAULT_DB = "remora-state.sqlite3"


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--db",
        metavar="FILE",
        help=f"SQLite database file (the default store; default {DEFAULT_DB})",
    )
    where.add_argument(
        "--dsn",
        metavar="DSN",
        help="PostgreSQL connection string (libpq DSN or URI) instead of SQLite",
    )


def describe(args: argparse.Namespace) -> str:
    """Where the store lives, for output (a DSN without its password)."""
    if args.dsn is not None:
        from remora.store.postgres import describe_dsn

        return f"PostgreSQL {describe_dsn(args.dsn)}"
    return str(args.db or DEFAULT_DB)


def open_store(args: argparse.Namespace, *, existing: bool = False) -> StateStore:
    """Open the chosen store.  ``existing``: refuse to create a new database or schema.

    Raises :class:`InvalidInput` for a bad DSN or a missing/unusable database and
    :class:`~remora.errors.Unavailable` when PostgreSQL cannot be reached."""
    if args.dsn is not None:
        try:
            from remora.store.postgres import PostgresBackend
        except ImportError:
            raise InvalidInput("--dsn needs psycopg: pip install 'remora[postgres]'") from None
        return StateStore(PostgresBackend(args.dsn, migrate=not existing))
    path = Path(args.db or DEFAULT_DB)
    if path.is_dir():
        raise InvalidInput(f"{path}: is a directory; --db names an SQLite database file")
    if not path.parent.is_dir():
        raise InvalidInput(f"{path}: the folder {path.parent} does not exist")
    if existing:  # read only (URI mode=ro): works on a read-only filesystem too
        _require_sqlite_schema(path)
        return SqliteStore(path, read_only=True)
    return SqliteStore(path)


def _require_sqlite_schema(path: Path) -> None:
    """Refuse (without writing anything) a file that is not a Remora SQLite database."""
    if not path.is_file():
        raise InvalidInput(f"{path}: no such database file")
    try:
        conn = connect_read_only(path)
        try:
            row = conn.execute(
                "SELECT value FROM remora_meta WHERE key = 'schema_version'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise InvalidInput(f"{path}: no Remora schema in this database") from None
        raise InvalidInput(f"{path}: not a usable Remora database ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise InvalidInput(f"{path}: not a usable Remora database ({exc})") from None
    if row is None:
        raise InvalidInput(f"{path}: no Remora schema in this database")


__all__ = [
    "DEFAULT_DB",
    "add_store_arguments",
    "describe",
    "open_store",
]
