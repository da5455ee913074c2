"""The observer-read checks (:mod:`remora.testing.read_checks`) shown catching planted bugs.

Each planted bug is a test-only backend subclass with one wrong read; the real backends
pass the same checks on the same state, and the many-partitions machine (which mixes in
:class:`~remora.testing.read_checks.ObserverReadsAgree`) fails on the planted store.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import OutboxEntry, SourceRecord
from remora.errors import Fenced
from remora.sim.trace import SimConfig
from remora.store import StateStore, Token
from remora.store.base import Backend, PartitionRow, PartitionState, PartitionSummary
from remora.store.memory import MemoryBackend
from remora.store.sqlite import SqliteBackend
from remora.testing.machines import ScheduleFailure
from remora.testing.read_checks import (
    REJECTIONS,
    canonical_problems,
    change_problems,
    read_problems,
    rejected_write,
)
from tests.common.planted import SOURCE
from tests.stateful.machines import ManyPartitionsAndLifetimes

# -- planted bugs: one wrong observer read each ----------------------------------------------


class OutboxAfterInclusive(MemoryBackend):
    """The relay's read includes the entry at ``seq`` (an off-by-one slice)."""

    def outbox_after(self, partition: int, seq: int, limit: int) -> list[OutboxEntry]:
        return super().outbox_after(partition, max(seq - 1, 0), limit)


class SummariesCountQuarantineAsOutbox(SqliteBackend):
    """The summaries count the quarantine into the outbox column."""

    def partition_summaries(self) -> list[PartitionSummary]:
        return [
            PartitionSummary(s.partition, s.epoch, s.frontier, s.next_seq, s.outbox + 1, 0)
            for s in super().partition_summaries()
        ]


class UnclaimedRowAtSeqZero(SqliteBackend):
    """An unclaimed partition's row says next_seq 0 (the default says 1)."""

    def partition_row(self, partition: int) -> PartitionRow:
        row = super().partition_row(partition)
        return PartitionRow(partition, 0, 0, 0) if row.epoch == 0 else row


class StateDropsIntents(MemoryBackend):
    """partition_state forgets the committed intents."""

    def partition_state(self, partition: int) -> PartitionState:
        s = super().partition_state(partition)
        return PartitionState(s.row, s.outbox, s.quarantine, ())


class CountsOnlyClaims(MemoryBackend):
    """change_count misses process writes (an observer would skip a changed partition)."""

    def change_count(self, partition: int) -> int:
        return sum(1 for w in self.write_log if w.partition == partition and w.operation == "claim")


def _filled(backend: Backend) -> Backend:
    """Claim partition 0 and process the planted source (outbox entries and an intent)."""
    ctx = Context(LogicalClock())
    token = backend.claim(0, ctx, True)
    for record in SOURCE:
        token = backend.process(0, token, record, ctx, True)
    backend.claim(1, ctx, True)
    return backend


REAL: list[Callable[[], Backend]] = [MemoryBackend, SqliteBackend]
PLANTED: list[tuple[Callable[[], Backend], str]] = [
    (OutboxAfterInclusive, "outbox_after(0, 1, 1) = [1]"),
    (SummariesCountQuarantineAsOutbox, "partition_summaries() = [(0, 1, 3, 4, 4, 0)"),
    (UnclaimedRowAtSeqZero, "partition_row(2) = PartitionRow(partition=2, epoch=0"),
    (StateDropsIntents, "partition_state(0) ="),
]


@pytest.mark.parametrize("make", REAL, ids=lambda m: m.__name__)
def test_the_real_backends_pass(make: Callable[[], Backend]) -> None:
    assert read_problems(_filled(make()), range(2)) == []


@pytest.mark.parametrize(("make", "found"), PLANTED, ids=lambda p: getattr(p, "__name__", ""))
def test_a_wrong_read_is_reported(make: Callable[[], Backend], found: str) -> None:
    problems = read_problems(_filled(make()), range(2))
    assert any(found in p for p in problems), problems


def test_a_snapshot_out_of_order_is_not_canonical() -> None:
    snap = _filled(MemoryBackend()).snapshot()
    import attrs

    shuffled = attrs.evolve(snap, outbox=tuple(reversed(snap.outbox)))
    assert canonical_problems(snap) == []
    assert "outbox not in (partition, seq) order" in canonical_problems(shuffled)


def _machine_on(backend: type[Backend]) -> type[ManyPartitionsAndLifetimes]:
    def factory(config: SimConfig) -> StateStore:
        return StateStore(backend())

    class Planted(ManyPartitionsAndLifetimes):
        store_factory = factory

    return Planted


@pytest.mark.parametrize(
    "backend", [SummariesCountQuarantineAsOutbox, UnclaimedRowAtSeqZero], ids=lambda b: b.__name__
)
def test_the_machine_fails_on_a_wrong_read(backend: type[Backend]) -> None:
    """The mixin is wired into the suite's many-partitions machine: a wrong read fails it
    (and the real memory store, the same machine, passes: ``test_worker_machines``)."""
    with pytest.raises(ScheduleFailure, match="observer-reads"):
        run_state_machine_as_test(
            _machine_on(backend),
            settings=settings(
                max_examples=60,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
                deadline=None,
                phases=[Phase.generate],  # the failure is the point, not its shrinking
            ),
        )


@pytest.mark.parametrize(
    ("make", "found"), [(MemoryBackend, None), (CountsOnlyClaims, "1 -> 1, the state changed")]
)
def test_a_change_count_that_misses_writes_is_reported(
    make: Callable[[], Backend], found: str | None
) -> None:
    backend = make()
    ctx = Context(LogicalClock())
    seen: dict[int, tuple[int, PartitionState]] = {}
    token = backend.claim(0, ctx, True)
    assert change_problems(backend, range(1), seen) == []
    backend.process(0, token, SOURCE[0], ctx, True)
    problems = change_problems(backend, range(1), seen)
    if found is None:
        assert problems == []
    else:
        assert any(found in p for p in problems), problems


def test_the_planted_source_reaches_an_intent() -> None:
    """The filled state has what the reads must agree on (else the planted tests prove
    nothing): outbox entries and an intent on partition 0, a bare claim on partition 1."""
    state = _filled(MemoryBackend()).partition_state(0)
    assert len(state.outbox) >= 2 and state.row.epoch == 1
    assert Token(1, state.row.frontier) == Token(1, 3)
    assert isinstance(SOURCE[0], SourceRecord)


# -- the fence's refusals (RejectedWrites) --------------------------------------------------


class FenceIgnoresFrontier(MemoryBackend):
    """The fence forgets the frontier compare: a token with a wrong frontier writes."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        installed = self.partition_row(partition)
        if token.epoch == installed.epoch and installed.epoch > 0:
            token = Token(token.epoch, installed.frontier)
        return super().process(partition, token, record, ctx, commit)


class InvisibleIsFenced(SqliteBackend):
    """An invisible record is refused as a fence (the wrong typed error: a caller would
    retire the lifetime instead of reporting bad input)."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        if not record.visible:
            raise Fenced("invisible")
        return super().process(partition, token, record, ctx, commit)


@pytest.mark.parametrize("make", REAL, ids=lambda m: m.__name__)
@pytest.mark.parametrize("kind", REJECTIONS)
def test_every_rejection_is_refused_with_its_error(make: Callable[[], Backend], kind: str) -> None:
    backend = _filled(make())
    ctx = Context(LogicalClock())
    for p in (0, 1, 2):  # written, claimed only, never claimed
        token, record, error = rejected_write(backend, SOURCE, p, kind)
        before = backend.snapshot()
        with pytest.raises(error):
            backend.process(p, token, record, ctx, True)
        assert backend.snapshot() == before


@pytest.mark.parametrize(
    "backend", [FenceIgnoresFrontier, InvisibleIsFenced], ids=lambda b: b.__name__
)
def test_the_machine_fails_on_a_wrong_fence(backend: type[Backend]) -> None:
    with pytest.raises(ScheduleFailure, match="store-contract"):
        run_state_machine_as_test(
            _machine_on(backend),
            settings=settings(
                max_examples=60,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
                deadline=None,
                phases=[Phase.generate],
            ),
        )
