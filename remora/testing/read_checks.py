"""Observer reads checked against each other, as a state-machine mixin.

Every backend answers the observer reads (``partition_row``, ``partition_state``,
``partition_tail``, ``outbox_after``, ``partition_summaries``, ``change_count``) either with
the :class:`~remora.store.base.Backend` defaults built from :meth:`~Backend.snapshot` or with
its own cheaper override.  The oracle reads through some of them only (the checker follows
``change_count`` and ``partition_tail``), so a wrong override — an off-by-one ``LIMIT``, a
summary that counts the wrong table, an unclaimed partition answered with the wrong row — or
a wrong default would go unseen by the machines.

:class:`ObserverReadsAgree` adds an invariant to a
:class:`~remora.testing.machines.WorkerScheduleMachine`: every few steps (and once more after
the drain) every read of every partition, plus one partition nobody claimed, must equal both
the default built from the snapshot and the snapshot's own canonical form; the snapshot
itself must be canonical (ordered, contiguous outbox sequence numbers below ``next_seq``,
every frontier past the offsets it decided); and ``change_count``, where a backend counts,
must grow exactly when the partition's durable state changed.  It is independent of the
store: the same checks hold memory, SQLite and PostgreSQL to one contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import Fenced, InvalidInput
from remora.store.base import Backend, PartitionState, PartitionTail, StoreSnapshot, Token


class ReadMismatch(AssertionError):
    """Two observer reads of the same durable state disagree (a read path is wrong)."""


def _positions(n: int) -> tuple[int, ...]:
    return tuple(sorted({0, 1, n // 2, max(n - 1, 0), n, n + 1}))


def canonical_problems(snap: StoreSnapshot) -> list[str]:
    """What is not canonical in ``snap`` (empty when it is)."""
    problems: list[str] = []
    parts = [r.partition for r in snap.partitions]
    if parts != sorted(set(parts)):
        problems.append(f"partition rows not in partition order: {parts}")
    for row in snap.partitions:
        if row.epoch <= 0:
            problems.append(f"partition {row.partition}: row with epoch {row.epoch}")
        state = snap.partition_state(row.partition)
        seqs = [e.seq for e in state.outbox]
        if seqs != list(range(1, row.next_seq)):
            problems.append(
                f"partition {row.partition}: outbox seqs {seqs}, next_seq {row.next_seq}"
            )
        decided = [e.offset for e in state.outbox] + [q.offset for q in state.quarantine]
        if decided and max(decided) >= row.frontier:
            problems.append(
                f"partition {row.partition}: decided offset {max(decided)} not behind the "
                f"frontier {row.frontier}"
            )
        if len(set(decided)) != len(decided):
            problems.append(f"partition {row.partition}: an offset decided twice")
        offsets = [q.offset for q in state.quarantine]
        if offsets != sorted(offsets):
            problems.append(f"partition {row.partition}: quarantine not in offset order")
    outbox = [(e.partition, e.seq) for e in snap.outbox]
    if outbox != sorted(outbox):
        problems.append("outbox not in (partition, seq) order")
    subjects = [(p, s.subject) for p, s in snap.subjects]
    if subjects != sorted(subjects):
        problems.append("subjects not in (partition, subject) order")
    return problems


class _FromSnapshot(Backend):
    """A backend that answers from one snapshot already read: every observer read is the
    :class:`Backend` default, computed without touching the real store again."""

    def __init__(self, snap: StoreSnapshot) -> None:
        self._snap = snap

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        raise NotImplementedError

    def observe(self, partition: int, ctx: Context) -> Token:
        raise NotImplementedError

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        raise NotImplementedError

    def snapshot(self) -> StoreSnapshot:
        return self._snap

    def close(self) -> None:
        return None


def read_problems(backend: Backend, partitions: range) -> list[str]:
    """Every observer read of ``backend`` compared with the :class:`Backend` default (built
    from one snapshot) and the snapshot's canonical form, for ``partitions`` and one
    unclaimed partition past them."""
    snap = backend.snapshot()
    default = _FromSnapshot(snap)
    problems = canonical_problems(snap)
    for p in [*partitions, partitions.stop]:
        state = snap.partition_state(p)
        for reader, name in ((backend, ""), (default, "default ")):
            if (row := reader.partition_row(p)) != state.row:
                problems.append(f"{name}partition_row({p}) = {row}, the snapshot holds {state.row}")
            if (got := reader.partition_state(p)) != state:
                problems.append(f"{name}partition_state({p}) = {got}, the snapshot holds {state}")
        sizes = (len(state.outbox), len(state.quarantine), len(state.intents))
        for k, since in enumerate(
            [(0, 0, 0), tuple(n // 2 for n in sizes), sizes, tuple(n + 1 for n in sizes)]
        ):
            want = PartitionTail.of(state, since)  # type: ignore[arg-type]
            readers = (
                (default,)
                if k % 2 and type(backend).partition_tail is Backend.partition_tail
                else (backend, default)
            )
            for reader in readers:
                tail = reader.partition_tail(p, since)  # type: ignore[arg-type]
                if tail != want:
                    name = "default " if reader is default else ""
                    problems.append(f"{name}partition_tail({p}, {since}) = {tail}, not {want}")
        n = len(state.outbox)
        for seq in (-1, 0, 1, n // 2, n):
            for limit in (1, n + 1):
                want_entries = [e for e in state.outbox if e.seq > seq][:limit]
                for reader, name in ((backend, ""), (default, "default ")):
                    entries = reader.outbox_after(p, seq, limit)
                    if list(entries) != want_entries:
                        problems.append(
                            f"{name}outbox_after({p}, {seq}, {limit}) = "
                            f"{[e.seq for e in entries]}, not {[e.seq for e in want_entries]}"
                        )
    want_summaries = []
    for r in snap.partitions:
        state = snap.partition_state(r.partition)
        want_summaries.append(
            (r.partition, r.epoch, r.frontier, r.next_seq, len(state.outbox), len(state.quarantine))
        )
    for reader, name in ((backend, ""), (default, "default ")):
        got_summaries = [
            (s.partition, s.epoch, s.frontier, s.next_seq, s.outbox, s.quarantine)
            for s in reader.partition_summaries()
        ]
        if got_summaries != want_summaries:
            problems.append(f"{name}partition_summaries() = {got_summaries}, not {want_summaries}")
    if default.change_count(0) is not None:
        problems.append("the default change_count counts")
    return problems


def change_problems(
    backend: Backend, partitions: range, seen: dict[int, tuple[int, PartitionState]]
) -> list[str]:
    """Where the backend counts writes: the count never goes back, and it moved since the
    last look (``seen``, updated here) exactly when the partition's durable state did."""
    problems: list[str] = []
    for p in partitions:
        count = backend.change_count(p)
        if count is None:
            continue
        state = backend.partition_state(p)
        before = seen.get(p)
        if before is not None:
            old_count, old_state = before
            if count < old_count:
                problems.append(f"change_count({p}) went back from {old_count} to {count}")
            elif (count == old_count) != (state == old_state):
                problems.append(
                    f"partition {p}: change_count {old_count} -> {count}, the state "
                    f"{'stayed' if state == old_state else 'changed'}"
                )
        seen[p] = (count, state)
    return problems


class ObserverReadsAgree:
    """Mixin for a :class:`~remora.testing.machines.WorkerScheduleMachine` (module
    docstring): list it before the machine class, e.g.
    ``class M(ObserverReadsAgree, ManyPartitionsOnSqlite)``."""

    read_check_every: ClassVar[int] = 3
    """Check at every this-many steps (the reads cost a snapshot and a few dozen queries)."""

    def _read_state(self) -> None:
        sim = self.sim  # type: ignore[attr-defined]
        if sim is None or self.failed:  # type: ignore[attr-defined]
            return
        backend = sim.store.backend
        partitions = range(self.partitions)  # type: ignore[attr-defined]
        problems = read_problems(backend, partitions)
        seen: dict[int, tuple[int, PartitionState]] = getattr(self, "_read_counts", {})
        problems += change_problems(backend, partitions, seen)
        self._read_counts = seen
        if problems:
            self.fail("ERROR observer-reads", "; ".join(problems[:3]))  # type: ignore[attr-defined]

    @invariant()
    def observer_reads_agree(self) -> None:
        steps = len(self.steps)  # type: ignore[attr-defined]
        if steps % type(self).read_check_every == 0:
            self._read_state()

    def _judge(self) -> None:
        self._read_state()  # before the drain: the state the steps left
        super()._judge()  # type: ignore[misc]
        self._read_state()  # the drained state: every partition at its end


REJECTIONS = ("foreign", "invisible", "epoch", "frontier", "behind")
"""The writes every store's fence refuses (:func:`~remora.store.base.check_fence`): a record
of another partition, an invisible record, a token of another epoch, a token whose frontier
is not the durable one, a record behind the durable frontier."""


def rejected_write(
    backend: Backend, source: Sequence[SourceRecord], partition: int, kind: str
) -> tuple[Token, SourceRecord, type[Exception]]:
    """A write ``backend`` must refuse (``kind`` of :data:`REJECTIONS`) on ``partition`` as it
    stands, and the typed error it must refuse it with."""
    row = backend.partition_row(partition)
    installed = Token(row.epoch, row.frontier)
    ahead = [r for r in source if r.partition == partition and r.visible]
    ahead = [r for r in ahead if r.offset >= row.frontier] or ahead
    record = ahead[0] if ahead else SourceRecord(partition, row.frontier, True, None, b"{}")
    if record.offset < row.frontier and kind != "behind":
        record = attrs.evolve(record, offset=row.frontier)
    if kind == "foreign":
        return installed, attrs.evolve(record, partition=partition + 1), InvalidInput
    if kind == "invisible":
        return installed, attrs.evolve(record, visible=False), InvalidInput
    if kind == "epoch" or row.epoch == 0:
        return Token(row.epoch + 1, row.frontier), record, Fenced
    if kind == "frontier":
        return Token(row.epoch, row.frontier + 1), record, Fenced
    if row.frontier == 0:  # nothing behind yet: the same record under a stale epoch
        return Token(row.epoch - 1, 0), record, Fenced
    return installed, attrs.evolve(record, offset=row.frontier - 1), InvalidInput


class RejectedWrites:
    """Mixin rule for a :class:`~remora.testing.machines.WorkerScheduleMachine`: between the
    lifecycle's steps, a write the fence must refuse is sent straight to the backend (as a
    buggy or stale client would); it must fail with the fence's typed error and leave the
    durable state, and the write count, exactly as they were."""

    @rule(partition=st.integers(0, 7), kind=st.sampled_from(REJECTIONS))
    def rejected_write(self, partition: int, kind: str) -> None:
        sim = self.sim  # type: ignore[attr-defined]
        assert sim is not None
        p = partition % self.partitions  # type: ignore[attr-defined]
        backend: Backend = sim.store.backend
        token, record, error = rejected_write(backend, sim.source, p, kind)
        before = (backend.snapshot(), backend.change_count(p))
        try:
            backend.process(p, token, record, Context(LogicalClock()), True)
        except (Fenced, InvalidInput) as exc:
            got: type[Exception] | None = type(exc)
        else:
            got = None
        after = (backend.snapshot(), backend.change_count(p))
        if got is not error or after != before:
            self.fail(  # type: ignore[attr-defined]
                "ERROR store-contract",
                f"a {kind} write to partition {p} (token {token}, offset {record.offset}) "
                f"raised {got and got.__name__}, not {error.__name__}"
                + ("" if after == before else "; it changed the durable state"),
            )


__all__ = [
    "ReadMismatch",
    "canonical_problems",
    "read_problems",
    "change_problems",
    "ObserverReadsAgree",
    "REJECTIONS",
    "rejected_write",
    "RejectedWrites",
]
