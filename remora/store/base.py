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
"""

from __future__ import annotations

from typing import Protocol

import attrs

from remora.context import Context
from remora.domain import Intent, OutboxEntry, QuarantineEntry, SourceRecord, SubjectState
from remora.errors import Fenced, InvalidInput
from remora.faults import NO_FAULTS, IOCall, IOHook, Operation, controlled_call


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


class OwnershipStore(Protocol):
    """What :class:`remora.worker.Lifecycle` needs from a store."""

    def claim(self, partition: int, ctx: Context) -> Token: ...

    def observe(self, partition: int, ctx: Context) -> Token: ...

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context
    ) -> Token: ...


class Backend(Protocol):
    """One storage engine.  ``commit=False`` runs the write and rolls it back."""

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token: ...

    def observe(self, partition: int, ctx: Context) -> Token: ...

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token: ...

    def snapshot(self) -> StoreSnapshot: ...

    def close(self) -> None: ...


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
        """Read all durable state directly (an observer's read, not a modeled call)."""
        return self.backend.snapshot()

    def close(self) -> None:
        self.backend.close()
