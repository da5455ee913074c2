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
        #: What to undo if the open write transaction does not commit (:meth:`on_rollback`).
        self._undo: list[Callable[[], None]] | None = None

    def write(self, ctx: Context, commit: bool, what: str, body: Callable[[Any], T]) -> T:
        undo: list[Callable[[], None]] = []
        try:
            with self._transaction(ctx, commit) as conn:
                self._undo = undo
                try:
                    result = body(conn)
                finally:
                    self._undo = None
        except BaseException:
            _undo(undo)
            raise
        if not commit:
            _undo(undo)
        return result

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Call ``undo`` if the write transaction the caller runs in (the ``body`` of a
        :meth:`write`) does not commit: how something kept outside the database joins
        the transaction (the simulation's fused memory stage,
        :class:`~remora.sim.jobs.simulation.FusedMemoryTarget`)."""
        if self._undo is None:
            raise RuntimeError("on_rollback outside a write transaction")
        self._undo.append(undo)

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


def _undo(undo: list[Callable[[], None]]) -> None:
    for fn in reversed(undo):
        fn()


__all__ = ["SqliteJobsBackend"]
