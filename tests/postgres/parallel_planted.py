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
from remora.store.sql import decision_writes

__all__ = ["PG_PLANTED", "PgSplitProcess", "PgUnlockedRead"]


class PgUnlockedRead(PostgresBackend):
    """The locked read without its row lock."""

    lock_sql = LOCK_PARTITION_SQL.replace("FOR UPDATE OF p", "")


class PgSplitProcess(PostgresBackend):
    """Fence check and writes in two transactions: the row lock ends with the first."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        subject = self.processing.key(record)

        def check(cur: psycopg.Cursor[Any]) -> tuple[int, int, int, SubjectState | None]:
            cur.execute(self.lock_sql, (subject, partition))
            row = cur.fetchone()
            if row is None:
                epoch, frontier, next_seq, current = 0, 0, 1, None
            else:
                epoch, frontier, next_seq = int(row[0]), int(row[1]), int(row[2])
                current = None
                if row[3] is not None and subject is not None:
                    current = SubjectState(subject, row[3], row[4], row[5], row[6])
            self._fence(partition, Token(epoch, frontier), token, record)
            return epoch, frontier, next_seq, current

        epoch, _, next_seq, current = self._write(ctx, True, "process", check)
        decision = self.processing.apply(record, current, next_seq)

        def write(cur: psycopg.Cursor[Any]) -> None:
            for statement, params in decision_writes(
                partition, record, decision, next_seq, placeholder="%s", intent_offset=True
            ):
                cur.execute(statement, params)

        self._write(ctx, commit, "process", write)
        return Token(epoch, record.offset + 1)


PG_PLANTED = ("PgUnlockedRead", "PgSplitProcess")
