"""Planted concurrency bugs of the PostgreSQL store (the others, and the table, are in
``tests/parallel/planted.py``; this module imports psycopg, so it lives with the PostgreSQL
tests):

=========================  ===========================================================
``PgUnlockedRead``         the process transaction reads the partition row without
                           ``FOR UPDATE`` (a row lock dropped from a locked read)
``PgSplitProcess``         the fence is checked under the row lock in one transaction,
                           the writes commit in a second one (the lock is released before
                           the commit: a transaction split in two)
=========================  ===========================================================
"""

from __future__ import annotations

from typing import Any

import psycopg

from remora.context import Context
from remora.domain import SourceRecord, SubjectState
from remora.store import Token
from remora.store.postgres import LOCK_PARTITION_SQL, PostgresBackend

__all__ = ["PG_PLANTED", "PgSplitProcess", "PgUnlockedRead"]


class PgUnlockedRead(PostgresBackend):
    """The locked read without its row lock."""

    lock_sql = LOCK_PARTITION_SQL.replace("FOR UPDATE OF p", "")


class PgSplitProcess(PostgresBackend):
    """Fence check and writes in two transactions: the row lock ends with the first."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        def check(cur: psycopg.Cursor[Any]) -> tuple[int, int, int, SubjectState | None]:
            found = self._locked_read(cur, partition, record)
            self._fence(partition, Token(found[0], found[1]), token, record)
            return found

        epoch, _, next_seq, current = self._write(ctx, True, "process", check)  # lock ends
        decision = self.processing.apply(record, current, next_seq)

        def write(cur: psycopg.Cursor[Any]) -> None:
            self._write_decision(cur, partition, record, decision, next_seq)

        self._write(ctx, commit, "process", write)
        return Token(epoch, record.offset + 1)


PG_PLANTED = ("PgUnlockedRead", "PgSplitProcess")
