"""The job runtime's durable store on SQLite (a file, or ``:memory:`` for simulation).

It reuses the partition store's :class:`~remora.store.sqlite.SqliteBackend` (one connection,
the interruptible ``BEGIN IMMEDIATE`` write lock, storage errors said in one line) with the
jobs schema (:data:`remora.jobs.sql.SCHEMA`), created or upgraded by the shared migration
helper (:func:`remora.store.dialect.migrate`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from remora.context import Context
from remora.errors import Unavailable
from remora.jobs.sql import SCHEMA
from remora.store.dialect import SQLITE
from remora.store.sqlite import SqliteBackend

T = TypeVar("T")


class SqliteJobsBackend(SqliteBackend):
    """SQLite (a file, or ``:memory:`` for simulation)."""

    dialect = SQLITE
    schema = SCHEMA

    def __init__(self, path: str | Path = ":memory:", lock_timeout: float = 5.0) -> None:
        super().__init__(path, lock_timeout)
        self.where = str(path)

    def write(self, ctx: Context, commit: bool, what: str, body: Callable[[Any], T]) -> T:
        with self._transaction(ctx, commit) as conn:
            result = body(conn)
        return result

    def read(self, what: str, body: Callable[[Any], T]) -> T:
        with self._lock:
            try:
                return body(self._conn)
            except sqlite3.OperationalError as exc:
                raise Unavailable(f"sqlite {what}: {exc}") from exc

    def read_one(self, what: str, sql: str, params: Any) -> Any:
        return self.read(what, lambda cur: cur.execute(sql, params).fetchone())

    def read_all(self, what: str, sql: str, params: Any) -> list[Any]:
        return list(self.read(what, lambda cur: cur.execute(sql, params).fetchall()))


__all__ = ["SqliteJobsBackend"]
