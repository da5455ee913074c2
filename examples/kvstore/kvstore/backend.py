"""The project's store: partitions kept in a dict of rows behind one lock, one object shared
by every thread of the process — its own :class:`remora.store.Backend`.

``KvBackend`` is right: the fence check and the write happen under the same hold of the
lock.  ``HastyKvBackend`` is the bug this project's tests plant: to keep the lock short it
checks the fence under the lock, lets the lock go while the processing decides, and takes
it again to write — a claim that lands in between is never seen, so a fenced owner's write
commits.  One thread at a time cannot tell the two apart."""

from __future__ import annotations

import threading

import attrs

from remora.context import Context
from remora.domain import (
    AMENDMENTS,
    Applied,
    Intent,
    OutboxEntry,
    QuarantineEntry,
    SourceRecord,
    SubjectState,
)
from remora.store import Backend, PartitionRow, StoreSnapshot, Token
from remora.store.base import check_fence


@attrs.define
class Row:
    epoch: int = 0
    frontier: int = 0
    outbox: list[OutboxEntry] = attrs.field(factory=list)
    quarantine: list[QuarantineEntry] = attrs.field(factory=list)
    intents: list[Intent] = attrs.field(factory=list)
    subjects: dict[str, SubjectState] = attrs.field(factory=dict)


class KvBackend(Backend):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[int, Row] = {}

    def _row(self, partition: int) -> Row:
        return self.rows.setdefault(partition, Row())

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        with self.lock:
            row = self._row(partition)
            token = Token(row.epoch + 1, row.frontier)
            if commit:
                row.epoch = token.epoch
            return token

    def observe(self, partition: int, ctx: Context) -> Token:
        with self.lock:
            row = self.rows.get(partition, Row())
            return Token(row.epoch, row.frontier)

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        with self.lock:
            row = self._row(partition)
            check_fence(partition, Token(row.epoch, row.frontier), token, record)
            return self._write(row, record, commit)

    def _write(self, row: Row, record: SourceRecord, commit: bool) -> Token:
        subject = AMENDMENTS.key(record)
        current = row.subjects.get(subject) if subject is not None else None
        decision = AMENDMENTS.apply(record, current, len(row.outbox) + 1)
        done = Token(row.epoch, record.offset + 1)
        if not commit:
            return done
        if isinstance(decision, Applied):
            row.outbox.append(decision.entry)
            row.subjects[decision.subject.subject] = decision.subject
            if decision.intent is not None:
                row.intents.append(decision.intent)
        else:
            row.quarantine.append(decision.entry)
            if decision.subject is not None:
                row.subjects[decision.subject.subject] = decision.subject
        row.frontier = done.frontier
        return done

    def snapshot(self) -> StoreSnapshot:
        with self.lock:
            claimed = sorted(p for p, row in self.rows.items() if row.epoch > 0)
            rows = [(p, self.rows[p]) for p in claimed]
            return StoreSnapshot(
                partitions=tuple(
                    PartitionRow(p, r.epoch, r.frontier, len(r.outbox) + 1) for p, r in rows
                ),
                outbox=tuple(e for _, r in rows for e in r.outbox),
                quarantine=tuple(q for _, r in rows for q in r.quarantine),
                intents=tuple(i for _, r in rows for i in r.intents),
                subjects=tuple((p, r.subjects[s]) for p, r in rows for s in sorted(r.subjects)),
            )

    def close(self) -> None:
        return None


class HastyKvBackend(KvBackend):
    """The planted bug (module docstring)."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        with self.lock:
            row = self._row(partition)
            check_fence(partition, Token(row.epoch, row.frontier), token, record)
        with self.lock:  # taken again: a claim in between goes unseen
            return self._write(row, record, commit)
