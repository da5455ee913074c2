"""The in-memory backend: controlled, fast, and faithful to the SQL backends' semantics.

It is the store the simulator runs against.  Writes are computed first and applied only on
commit, so ``commit=False`` (an ``unknown-aborted`` outcome) leaves no trace.  A lock makes
each call atomic with respect to other threads.
"""

from __future__ import annotations

import threading

import attrs

from remora.context import Context
from remora.domain import (
    AMENDMENTS,
    Applied,
    Decision,
    Intent,
    OutboxEntry,
    Processing,
    QuarantineEntry,
    SourceRecord,
    SubjectState,
)
from remora.faults import NO_FAULTS, IOHook
from remora.store.base import (
    Backend,
    PartitionRow,
    PartitionState,
    PartitionSummary,
    PartitionTail,
    StateStore,
    StoreSnapshot,
    Token,
    check_fence,
)
from remora.store.identity import SourceIdentity


@attrs.define
class _Partition:
    epoch: int = 0
    frontier: int = 0
    next_seq: int = 1
    writes: int = 0  # committed writes so far: a cheap change marker for observers
    subjects: dict[str, SubjectState] = attrs.field(factory=dict)
    outbox: list[OutboxEntry] = attrs.field(factory=list)
    quarantine: list[QuarantineEntry] = attrs.field(factory=list)
    intents: list[Intent] = attrs.field(factory=list)


@attrs.frozen
class Write:
    """One committed write, as the memory store made it (its write log)."""

    partition: int
    operation: str  # "claim" | "process"
    epoch: int  # the epoch installed (claim) or written under (process)
    frontier: int  # the frontier after the write
    offset: int | None = None  # the record a process write decided


class MemoryBackend(Backend):
    """Partitions held in dicts and lists (see the module docstring).

    ``write_log`` lists every committed write in order — the store's own record of what it
    actually wrote, which the simulation's per-attempt postconditions
    (:mod:`remora.sim.rules`) compare with what each fault *reported* as applied."""

    def __init__(self, processing: Processing = AMENDMENTS) -> None:
        self.processing = processing
        self._lock = threading.Lock()
        self._partitions: dict[int, _Partition] = {}
        self._sources: dict[int, SourceIdentity] = {}
        self.write_log: list[Write] = []

    def _get(self, partition: int) -> _Partition:
        part = self._partitions.get(partition)
        if part is None:
            part = self._partitions[partition] = _Partition()
        return part

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        with self._lock:
            part = self._get(partition)
            token = Token(part.epoch + 1, part.frontier)
            if commit:
                part.epoch = token.epoch
                part.writes += 1
                self.write_log.append(Write(partition, "claim", token.epoch, token.frontier))
            return token

    def observe(self, partition: int, ctx: Context) -> Token:
        with self._lock:
            part = self._partitions.get(partition)
            return Token(0, 0) if part is None else Token(part.epoch, part.frontier)

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        with self._lock:
            part = self._get(partition)
            check_fence(partition, Token(part.epoch, part.frontier), token, record)
            decision = self._decide(part, record)
            result = Token(part.epoch, record.offset + 1)
            if commit:
                self._commit(partition, part, decision, result, record)
            return result

    def _decide(self, part: _Partition, record: SourceRecord) -> Decision:
        """The fold's decision for ``record`` on ``part`` as it stands (the lock held)."""
        subject = self.processing.key(record)
        current = part.subjects.get(subject) if subject is not None else None
        return self.processing.apply(record, current, part.next_seq)

    def _commit(
        self,
        partition: int,
        part: _Partition,
        decision: Decision,
        result: Token,
        record: SourceRecord,
    ) -> None:
        """Apply ``decision`` and move the frontier to ``result`` (the lock held)."""
        if isinstance(decision, Applied):
            part.outbox.append(decision.entry)
            part.next_seq += 1
            part.subjects[decision.subject.subject] = decision.subject
            if decision.intent is not None:
                part.intents.append(decision.intent)
        else:
            part.quarantine.append(decision.entry)
            if decision.subject is not None:
                part.subjects[decision.subject.subject] = decision.subject
        part.frontier = result.frontier
        part.writes += 1
        self.write_log.append(
            Write(partition, "process", result.epoch, result.frontier, record.offset)
        )

    # -- observer reads (not modeled I/O): cheap overrides of the Backend defaults ----------
    def partition_row(self, partition: int) -> PartitionRow:
        part = self._partitions.get(partition)
        if part is None:
            return PartitionRow(partition, 0, 0, 1)
        return PartitionRow(partition, part.epoch, part.frontier, part.next_seq)

    def partition_state(self, partition: int) -> PartitionState:
        with self._lock:
            part = self._partitions.get(partition)
            if part is None:
                return PartitionState(PartitionRow(partition, 0, 0, 1), (), (), ())
            return PartitionState(
                PartitionRow(partition, part.epoch, part.frontier, part.next_seq),
                tuple(part.outbox),
                tuple(part.quarantine),
                tuple(part.intents),
            )

    def partition_tail(self, partition: int, since: tuple[int, int, int]) -> PartitionTail:
        """Slices of the lists past ``since``: the cost of what was appended."""
        o, q, i = since
        with self._lock:
            part = self._partitions.get(partition)
            if part is None:
                return PartitionTail(PartitionRow(partition, 0, 0, 1), since, (), (), (), (0, 0, 0))
            return PartitionTail(
                PartitionRow(partition, part.epoch, part.frontier, part.next_seq),
                since,
                tuple(part.outbox[o:]),
                tuple(part.quarantine[q:]),
                tuple(part.intents[i:]),
                (len(part.outbox), len(part.quarantine), len(part.intents)),
            )

    def change_count(self, partition: int) -> int:
        part = self._partitions.get(partition)
        return 0 if part is None else part.writes

    def outbox_after(self, partition: int, seq: int, limit: int) -> list[OutboxEntry]:
        with self._lock:
            part = self._partitions.get(partition)
            if part is None:
                return []
            return part.outbox[max(seq, 0) : max(seq, 0) + limit]  # seq n sits at index n - 1

    def partition_summaries(self) -> list[PartitionSummary]:
        with self._lock:
            return [
                PartitionSummary(
                    p,
                    part.epoch,
                    part.frontier,
                    part.next_seq,
                    len(part.outbox),
                    len(part.quarantine),
                )
                for p, part in sorted(self._partitions.items())
                if part.epoch > 0
            ]

    def snapshot(self) -> StoreSnapshot:
        with self._lock:
            keys = sorted(p for p, part in self._partitions.items() if part.epoch > 0)
            parts = [self._partitions[p] for p in keys]
            return StoreSnapshot(
                partitions=tuple(
                    PartitionRow(p, part.epoch, part.frontier, part.next_seq)
                    for p, part in zip(keys, parts, strict=True)
                ),
                outbox=tuple(e for part in parts for e in part.outbox),
                quarantine=tuple(q for part in parts for q in part.quarantine),
                intents=tuple(i for part in parts for i in part.intents),
                subjects=tuple(
                    (p, part.subjects[s])
                    for p, part in zip(keys, parts, strict=True)
                    for s in sorted(part.subjects)
                ),
            )

    def close(self) -> None:
        return None

    # -- source identity (remora.store.identity) --------------------------------------------
    def source_identities(self) -> dict[int, SourceIdentity]:
        with self._lock:
            return dict(self._sources)

    def record_source_identity(self, identity: SourceIdentity) -> None:
        with self._lock:
            self._sources[identity.partition] = identity


class MemoryStore(StateStore):
    """A :class:`StateStore` over a fresh :class:`MemoryBackend`."""

    backend: MemoryBackend

    def __init__(self, hook: IOHook = NO_FAULTS, processing: Processing = AMENDMENTS) -> None:
        super().__init__(MemoryBackend(processing), hook)


__all__ = [
    "Write",
    "MemoryBackend",
    "MemoryStore",
]
