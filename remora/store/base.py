"""The state-store protocol and the controlled front every backend sits behind.

Semantics shared by all backends (memory, SQLite, PostgreSQL):

* a partition starts at epoch 0, frontier 0;
* ``claim(p)`` installs epoch+1 and returns the new (epoch, frontier);
* ``observe(p)`` reads (epoch, frontier) without changing anything;
* ``process(p, token, record)`` is one atomic write: it checks the fence (``token.epoch`` is
  the installed epoch and ``token.frontier`` the durable frontier), applies the amendment
  fold, appends the outbox entry or the quarantine row, and sets frontier = offset+1.

Every call goes through :func:`remora.faults.controlled_call`, so the same fault hook
drives memory, SQLite and PostgreSQL alike.

Observers (the simulation's checker, the relay, ``remora run`` and ``remora status``) read a
backend only through the :class:`Backend` interface: its required methods, and optional
reads whose defaults are built from :meth:`Backend.snapshot` — so every store has the same
observation path, and a store overrides a read only to answer it more cheaply.
"""

from __future__ import annotations

import abc
from typing import Protocol

import attrs

from remora.context import Context
from remora.domain import Intent, OutboxEntry, QuarantineEntry, SourceRecord, SubjectState
from remora.errors import Fenced, InvalidInput
from remora.faults import NO_FAULTS, IOCall, IOHook, Operation, controlled_call
from remora.store.identity import SourceIdentity


@attrs.frozen
class Token:
    """Ownership token: the fencing epoch and the frontier the owner believes durable."""

    epoch: int
    frontier: int


@attrs.frozen
class PartitionRow:
    partition: int
    epoch: int
    frontier: int
    next_seq: int


@attrs.frozen
class StoreSnapshot:
    """Everything durable, in a canonical order (for oracles, reports and ``status``)."""

    partitions: tuple[PartitionRow, ...]
    outbox: tuple[OutboxEntry, ...]
    quarantine: tuple[QuarantineEntry, ...]
    intents: tuple[Intent, ...]
    subjects: tuple[tuple[int, SubjectState], ...]

    def partition(self, partition: int) -> PartitionRow:
        for row in self.partitions:
            if row.partition == partition:
                return row
        return PartitionRow(partition, 0, 0, 1)

    def partition_state(self, partition: int) -> PartitionState:
        """One partition's part of the snapshot."""
        return PartitionState(
            self.partition(partition),
            tuple(e for e in self.outbox if e.partition == partition),
            tuple(q for q in self.quarantine if q.partition == partition),
            tuple(i for i in self.intents if i.partition == partition),
        )

    def outbox_after(self, partition: int, seq: int, limit: int) -> list[OutboxEntry]:
        """Entries of ``partition`` with seq > ``seq``, in seq order, at most ``limit``."""
        return [e for e in self.partition_state(partition).outbox if e.seq > seq][:limit]

    def summaries(self) -> list[PartitionSummary]:
        """The counters of every claimed partition."""
        outbox: dict[int, int] = {}
        quarantine: dict[int, int] = {}
        for e in self.outbox:
            outbox[e.partition] = outbox.get(e.partition, 0) + 1
        for q in self.quarantine:
            quarantine[q.partition] = quarantine.get(q.partition, 0) + 1
        return [
            PartitionSummary(
                r.partition,
                r.epoch,
                r.frontier,
                r.next_seq,
                outbox.get(r.partition, 0),
                quarantine.get(r.partition, 0),
            )
            for r in self.partitions
        ]


@attrs.frozen
class PartitionState:
    """One partition's durable state: its row, outbox (seq order), quarantine (offset order)
    and committed intents (commit order)."""

    row: PartitionRow
    outbox: tuple[OutboxEntry, ...]
    quarantine: tuple[QuarantineEntry, ...]
    intents: tuple[Intent, ...]


@attrs.frozen
class PartitionTail:
    """What one partition holds past a mark: its row, the outbox entries, quarantine rows and
    intents at positions ``since`` and after (each in :class:`PartitionState`'s order), and
    how many of each it holds in all.  An observer that has checked the rows before the mark
    reads only what was appended since (:meth:`Backend.partition_tail`)."""

    row: PartitionRow
    since: tuple[int, int, int]  # positions in (outbox, quarantine, intents)
    outbox: tuple[OutboxEntry, ...]
    quarantine: tuple[QuarantineEntry, ...]
    intents: tuple[Intent, ...]
    counts: tuple[int, int, int]  # totals of (outbox, quarantine, intents)

    @classmethod
    def of(cls, state: PartitionState, since: tuple[int, int, int]) -> PartitionTail:
        """The tail of a whole partition state."""
        o, q, i = since
        return cls(
            state.row,
            since,
            state.outbox[o:],
            state.quarantine[q:],
            state.intents[i:],
            (len(state.outbox), len(state.quarantine), len(state.intents)),
        )


@attrs.frozen
class PartitionSummary:
    """One claimed partition's counters, as ``remora run`` and ``remora status`` show them."""

    partition: int
    epoch: int
    frontier: int
    next_seq: int
    outbox: int
    quarantine: int


class OwnershipStore(Protocol):
    """What :class:`remora.worker.Lifecycle` needs from a store."""

    def claim(self, partition: int, ctx: Context) -> Token: ...

    def observe(self, partition: int, ctx: Context) -> Token: ...

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context
    ) -> Token: ...


class Backend(abc.ABC):
    """One storage engine.  ``commit=False`` runs the write and rolls it back.

    Required: :meth:`claim`, :meth:`observe`, :meth:`process`, :meth:`snapshot` and
    :meth:`close`.  The observer reads — :meth:`partition_row`, :meth:`partition_state`,
    :meth:`partition_tail`, :meth:`change_count`, :meth:`outbox_after` and
    :meth:`partition_summaries` — are optional: their defaults are built from
    :meth:`snapshot` and are correct for any backend (the way Hypothesis's
    ``ExampleDatabase`` builds ``move`` from ``save`` and ``delete``); a backend overrides
    one only to answer it without reading everything, and the store conformance tests hold
    every override equal to its default.  Observer reads are not modeled I/O: no fault hook
    sees them.
    """

    @abc.abstractmethod
    def claim(self, partition: int, ctx: Context, commit: bool) -> Token: ...

    @abc.abstractmethod
    def observe(self, partition: int, ctx: Context) -> Token: ...

    @abc.abstractmethod
    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token: ...

    @abc.abstractmethod
    def snapshot(self) -> StoreSnapshot:
        """Everything durable, in the canonical order of :class:`StoreSnapshot`."""

    @abc.abstractmethod
    def close(self) -> None: ...

    # -- optional observer reads (defaults built from snapshot()) -------------------------
    def partition_row(self, partition: int) -> PartitionRow:
        """The partition's installed epoch, durable frontier and next outbox seq (epoch 0,
        frontier 0, seq 1 before its first claim)."""
        return self.snapshot().partition(partition)

    def partition_state(self, partition: int) -> PartitionState:
        """Everything durable of one partition."""
        return self.snapshot().partition_state(partition)

    def partition_tail(self, partition: int, since: tuple[int, int, int]) -> PartitionTail:
        """The partition's row and the outbox entries, quarantine rows and intents from the
        positions ``since`` on, with the totals (one consistent read).  An observer that
        checked everything before ``since`` reads only what is new, so following a growing
        partition costs what it appended, not its whole history."""
        return PartitionTail.of(self.partition_state(partition), since)

    def change_count(self, partition: int) -> int | None:
        """How many writes have committed on ``partition`` so far, if this backend counts
        them: an observer that saw the same count before knows nothing changed since, and
        need not read the state again.  None (the default): the backend does not count."""
        return None

    def outbox_after(self, partition: int, seq: int, limit: int) -> list[OutboxEntry]:
        """Entries of ``partition`` with seq > ``seq``, in seq order, at most ``limit`` (the
        relay's read)."""
        return self.snapshot().outbox_after(partition, seq, limit)

    def partition_summaries(self) -> list[PartitionSummary]:
        """The counters of every claimed partition, in partition order."""
        return self.snapshot().summaries()

    # -- the source this store processed (remora.store.identity) ---------------------------
    def source_identities(self) -> dict[int, SourceIdentity]:
        """The recorded identity of every partition's source, by partition."""
        raise NotImplementedError(f"{type(self).__name__} does not record source identities")

    def record_source_identity(self, identity: SourceIdentity) -> None:
        """Record (replace) one partition's source identity."""
        raise NotImplementedError(f"{type(self).__name__} does not record source identities")


def check_fence(partition: int, installed: Token, token: Token, record: SourceRecord) -> None:
    """The fence every backend applies inside its atomic write, before any effect."""
    if record.partition != partition:
        raise InvalidInput(f"record of partition {record.partition} submitted to {partition}")
    if not record.visible:
        raise InvalidInput(f"record at offset {record.offset} is invisible")
    if installed.epoch == 0 or token.epoch != installed.epoch:
        raise Fenced(
            f"partition {partition}: epoch {token.epoch} is not the installed epoch "
            f"{installed.epoch}"
        )
    if token.frontier != installed.frontier:
        raise Fenced(
            f"partition {partition}: frontier {token.frontier} is not the durable frontier "
            f"{installed.frontier}"
        )
    if record.offset < installed.frontier:
        raise InvalidInput(
            f"partition {partition}: offset {record.offset} is behind the frontier "
            f"{installed.frontier}"
        )


class StateStore:
    """A backend behind the controlled-I/O seam; this is what the lifecycle talks to."""

    def __init__(self, backend: Backend, hook: IOHook = NO_FAULTS) -> None:
        self.backend = backend
        self.hook = hook

    def claim(self, partition: int, ctx: Context) -> Token:
        return controlled_call(
            self.hook,
            IOCall(Operation.CLAIM, partition),
            ctx,
            lambda commit: self.backend.claim(partition, ctx, commit),
        )

    def observe(self, partition: int, ctx: Context) -> Token:
        return controlled_call(
            self.hook,
            IOCall(Operation.OBSERVE, partition),
            ctx,
            lambda commit: self.backend.observe(partition, ctx),
        )

    def process(self, partition: int, token: Token, record: SourceRecord, ctx: Context) -> Token:
        return controlled_call(
            self.hook,
            IOCall(Operation.PROCESS, partition),
            ctx,
            lambda commit: self.backend.process(partition, token, record, ctx, commit),
        )

    def snapshot(self) -> StoreSnapshot:
        """Read all durable state directly (an observer's read, not a modeled call; the
        narrower observer reads are on :attr:`backend`)."""
        return self.backend.snapshot()

    def close(self) -> None:
        self.backend.close()


__all__ = [
    "Token",
    "PartitionRow",
    "StoreSnapshot",
    "PartitionState",
    "PartitionTail",
    "PartitionSummary",
    "OwnershipStore",
    "Backend",
    "check_fence",
    "StateStore",
]
