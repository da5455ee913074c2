"""The suite's worker-schedule state machines (imported by the tests and the campaign)."""

from __future__ import annotations

from hypothesis.stateful import MultipleResults, precondition, rule

from remora.sim.trace import SimConfig
from remora.store import StateStore
from remora.store.sqlite import SqliteStore
from remora.testing.machines import Handle, WorkerScheduleMachine
from remora.testing.read_checks import ObserverReadsAgree, RejectedWrites
from remora.testing.strategies import SelectorDraft, selector_drafts


class SinglePartitionHeavyFaults(WorkerScheduleMachine):
    """One partition, several lifetimes competing for it, and faults on most I/O: extra
    rules carry two or three selectors each."""

    partitions = 1

    @precondition(WorkerScheduleMachine.has_current_reader)
    @rule(
        target=WorkerScheduleMachine.readers,
        handle=WorkerScheduleMachine.readers,
        faults=selector_drafts("process", min_size=2, max_size=3),
    )
    def process_with_heavy_faults(
        self, handle: Handle, faults: list[SelectorDraft]
    ) -> MultipleResults[Handle]:
        handle = self.pick(handle, "readers", Handle.current_reader)
        _, started = self._faulted("process", handle, faults)
        return self._if_ok(_, handle, started)

    @precondition(WorkerScheduleMachine.has_live_lifetime)
    @rule(
        target=WorkerScheduleMachine.owners,
        handle=WorkerScheduleMachine.lifetimes,
        faults=selector_drafts("assign", min_size=2, max_size=3),
    )
    def assign_with_heavy_faults(
        self, handle: Handle, faults: list[SelectorDraft]
    ) -> MultipleResults[Handle]:
        handle = self.pick(handle, "lifetimes", Handle.live)
        attempt, started = self._faulted("assign", handle, faults)
        return self._if_ok(attempt, handle, started)


class ManyPartitionsAndLifetimes(ObserverReadsAgree, RejectedWrites, WorkerScheduleMachine):
    """Three partitions and many lifetimes: assignment churn, replacements, stops; every
    observer read agrees with the snapshot (:class:`ObserverReadsAgree`)."""

    partitions = 3


def sqlite_store(config: SimConfig) -> StateStore:
    """A fresh in-memory SQLite database per run: real transactions, rollbacks and SQL."""
    return SqliteStore(":memory:")


class ManyPartitionsOnSqlite(ManyPartitionsAndLifetimes):
    """The many-partitions machine over SQLite (``store_factory``), so SQL-only bugs are in
    the machines' reach."""

    store_factory = sqlite_store
    store_kind = "sqlite"


class CombinationSweep(WorkerScheduleMachine):
    """Every (operation, outcome, boundary, stop/replacement) combination and race pattern,
    four per ``combination`` step, between plain processing, stops and late callbacks: the
    dedicated rules do the assigning and seeking, so the bundle-drawing rules that would
    dilute them are left out."""

    partitions = 2
    min_records = 10
    sweep_width = 4
    assign = seek = None  # type: ignore[assignment]
    assign_with_faults = seek_with_faults = process_with_faults = None  # type: ignore[assignment]


MACHINES: tuple[type[WorkerScheduleMachine], ...] = (
    SinglePartitionHeavyFaults,
    ManyPartitionsAndLifetimes,
    CombinationSweep,
    ManyPartitionsOnSqlite,
)
