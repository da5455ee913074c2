"""Planted concurrency bugs on the worker side: each a test-only subclass of a real store or
of the lifecycle, wrong only when two threads or connections race.

One connection or one thread at a time never tells them from the real code: the
sequential machines — whose interleaves fall at the fault seam, before or after a store's
whole atomic effect — do not kill them (``tests/parallel/campaign.py`` shows it in the same
budget); the parallel machines must (``tests/parallel/test_planted.py``).

=========================  ===========================================================
bug                        what is wrong
=========================  ===========================================================
``SqliteReadOutside``      SQLite: process reads the partition row before ``BEGIN
                           IMMEDIATE`` (a read moved outside its transaction)
``SqliteSplitClaim``       SQLite: claim reads the epoch in one transaction and writes
                           epoch + 1 in another (a transaction split in two)
``SqliteDirtyCache``       SQLite: a process-wide cache of partition rows that ``observe``
                           answers from, updated before the ``COMMIT`` (undone on rollback)
``MemoryLockGap``          memory: the fence is checked under the lock, which is released
                           and taken again for the write (a lock released before commit)
``StaleSavedToken``        lifecycle: process reads its saved token before it takes the
                           lifetime's mutex (a read moved outside its critical section)
=========================  ===========================================================

The PostgreSQL ones (``PgUnlockedRead``, ``PgSplitProcess``) live in
``tests/postgres/parallel_planted.py``: this module imports no psycopg.  Every class is at
the top level of its module, so an exported example records it by ``module:qualname`` and
``remora sim-worker --replay`` runs it again.
"""

from __future__ import annotations

import threading

from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import Fenced, InvalidInput
from remora.store import Token
from remora.store.base import check_fence
from remora.store.memory import MemoryBackend
from remora.store.sqlite import SqliteBackend
from remora.worker import Lifecycle

__all__ = [
    "PLANTED",
    "MemoryLockGap",
    "SqliteDirtyCache",
    "SqliteReadOutside",
    "SqliteSplitClaim",
    "StaleSavedToken",
]


class SqliteReadOutside(SqliteBackend):
    """Process checks the fence against a row read before its transaction began."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        with self._lock:
            epoch, frontier, next_seq = self._installed(self._conn, partition)
        check_fence(partition, Token(epoch, frontier), token, record)
        with self._transaction(ctx, commit) as conn:
            for statement, params in self._decision(conn, partition, record, next_seq):
                conn.execute(statement, params)
        return Token(epoch, record.offset + 1)


class SqliteSplitClaim(SqliteBackend):
    """Claim reads the installed epoch in one transaction and writes the next in another."""

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        with self._transaction(ctx, True) as conn:
            epoch, frontier, _ = self._installed(conn, partition)
        with self._transaction(ctx, commit) as conn:
            conn.execute(
                "INSERT INTO remora_partition(partition, epoch, frontier, next_seq) "
                "VALUES (?, ?, 0, 1) ON CONFLICT(partition) DO UPDATE SET epoch = excluded.epoch",
                (partition, epoch + 1),
            )
        return Token(epoch + 1, frontier)


_CACHE: dict[tuple[str, int], Token] = {}
_CACHE_LOCK = threading.Lock()


class SqliteDirtyCache(SqliteBackend):
    """Partition rows cached for the whole process (every connection to a file shares
    them), ``observe`` answered from the cache; process writes its new row into the cache
    before its ``COMMIT`` (and puts the old one back if the transaction rolls back)."""

    def _key(self, partition: int) -> tuple[str, int]:
        where = self.path if self.path != ":memory:" else f":memory:{id(self)}"
        return (where, partition)

    def observe(self, partition: int, ctx: Context) -> Token:
        key = self._key(partition)
        with _CACHE_LOCK:
            cached = _CACHE.get(key)
        if cached is not None:
            ctx.check()
            return cached
        seen = super().observe(partition, ctx)
        with _CACHE_LOCK:
            _CACHE.setdefault(key, seen)
        return seen

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        token = super().claim(partition, ctx, commit)
        if commit:
            with _CACHE_LOCK:
                _CACHE[self._key(partition)] = token
        return token

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        key = self._key(partition)
        with _CACHE_LOCK:
            before = _CACHE.get(key)
        committed = False
        try:
            with self._transaction(ctx, commit) as conn:
                epoch, frontier, next_seq = self._installed(conn, partition)
                check_fence(partition, Token(epoch, frontier), token, record)
                for statement, params in self._decision(conn, partition, record, next_seq):
                    conn.execute(statement, params)
                result = Token(epoch, record.offset + 1)
                with _CACHE_LOCK:
                    _CACHE[key] = result  # before the COMMIT
            committed = commit
            return result
        finally:
            if not committed:
                with _CACHE_LOCK:
                    if before is None:
                        _CACHE.pop(key, None)
                    else:
                        _CACHE[key] = before


class MemoryLockGap(MemoryBackend):
    """Process checks the fence under the lock, lets it go, and writes under it again."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        with self._lock:
            part = self._get(partition)
            check_fence(partition, Token(part.epoch, part.frontier), token, record)
            decision = self._decide(part, record)
            result = Token(part.epoch, record.offset + 1)
        if commit:
            with self._lock:  # taken again: whatever happened meanwhile is not looked at
                self._commit(partition, part, decision, result, record)
        return result


class StaleSavedToken(Lifecycle):
    """Process reads the saved token before waiting for the mutex."""

    def process(self, partition: int, record: SourceRecord) -> Token:
        early = self._owned.get(partition)  # outside the mutex

        def run(ctx: Context) -> Token:
            if early is None:
                raise Fenced(f"partition {partition}: process without a saved owner")
            if record.offset < early.frontier:
                raise InvalidInput(
                    f"partition {partition}: offset {record.offset} is behind the local "
                    f"frontier {early.frontier}"
                )
            done = self._process(ctx, partition, early, record)
            self._owned[partition] = done
            return done

        return self._guarded("process", run)


PLANTED = (
    "SqliteReadOutside",
    "SqliteSplitClaim",
    "SqliteDirtyCache",
    "MemoryLockGap",
    "StaleSavedToken",
)
