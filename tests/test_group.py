"""``remora run --workers N``: lifetimes in threads with eager assign/revoke churn."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from remora.domain import AMENDMENTS, Decision, Processing
from remora.errors import InvalidInput
from remora.faults import Operation
from remora.sim.checker import Checker
from remora.source import MemorySourceLog
from remora.store import MemoryStore, SqliteStore
from remora.testing.faults import ScriptedFaults
from remora.worker import Lifecycle
from remora.worker.group import Coordinator, WorkerGroup
from tests.common.support import decision
from tests.common.workload import generate


def source(partitions: int = 4, per_partition: int = 60, seed: int = 2) -> MemorySourceLog:
    return MemorySourceLog(generate(seed, partitions, per_partition), range(partitions))


@pytest.mark.parametrize(("workers", "rebalance_every"), [(1, 0), (3, 7), (4, 1), (6, 10)])
def test_group_processes_everything_exactly_once(workers: int, rebalance_every: int) -> None:
    log = source()
    store = MemoryStore()
    group = WorkerGroup(store, log, workers, rebalance_every=rebalance_every, batch=5)
    stats = group.run()
    assert stats.errors == [] and stats.done and not stats.stopped
    assert stats.processed == sum(1 for r in log.all_records() if r.visible)
    assert Checker(log.all_records(), log.partitions).final_problems(store.snapshot()) == []
    if rebalance_every:
        assert stats.rebalances > 0
        # Every rebalance re-claims: epochs show the partitions really moved.
        assert max(r.epoch for r in store.snapshot().partitions) > 1


def test_group_rebalances_move_partitions_between_lifetimes() -> None:
    log = source(partitions=2, per_partition=40)
    store = MemoryStore()
    owners: dict[int, set[str]] = {0: set(), 1: set()}
    lock = threading.Lock()

    class Recording(Lifecycle):
        def assign(self, partitions):  # type: ignore[no-untyped-def]
            tokens = super().assign(partitions)
            with lock:
                for p in partitions:
                    owners[p].add(self.name)
            return tokens

    group = WorkerGroup(
        store,
        log,
        3,
        rebalance_every=4,
        batch=2,
        lifecycle=lambda i: Recording(store, log, name=f"w{i}"),
    )
    stats = group.run()
    assert stats.errors == [] and stats.done
    assert all(len(names) >= 2 for names in owners.values()), owners


def test_a_failing_partition_stops_alone_and_a_restart_finishes() -> None:
    """Claims that keep failing stop the partitions they struck, each named; the group goes
    on with the rest, and a later run finishes the stopped ones."""
    log = source()
    store = MemoryStore()
    hook = ScriptedFaults()
    for n in range(1, 4):  # the first claim's calls all fail: retries exhausted
        hook.script[(Operation.CLAIM, n)] = decision("abort")
    store.hook = hook
    stats = WorkerGroup(store, log, 1, rebalance_every=5, batch=3).run()
    assert stats.errors == [] and stats.done
    assert len(stats.failures) == 1 and stats.failures[0].offset is None
    assert "claim: gave up after 3 calls" in str(stats.failures[0].error)
    stopped = stats.failures[0].partition
    frontiers = {r.partition: r.frontier for r in store.snapshot().partitions}
    ends = {p: log.end(p) for p in log.partitions}
    assert [p for p in log.partitions if frontiers.get(p, 0) != ends[p]] == [stopped]
    store.hook = ScriptedFaults()
    stats = WorkerGroup(store, log, 3, rebalance_every=5, batch=3).run()
    assert stats.errors == [] and stats.failures == [] and stats.done
    assert Checker(log.all_records(), log.partitions).final_problems(store.snapshot()) == []


POISON = (1, 8)  # partition, offset: a record the store's write cannot take


def poison_decide(*args: Any) -> Decision:
    record = args[0]
    if (record.partition, record.offset) == POISON:
        raise InvalidInput(f"cannot store offset {record.offset}")
    return AMENDMENTS.decide(*args)


@pytest.mark.parametrize(("workers", "rebalance_every"), [(1, 0), (2, 5), (3, 1)])
def test_a_poison_record_stops_its_partition_only(workers: int, rebalance_every: int) -> None:
    log = source(partitions=3, per_partition=40)
    assert any(r.offset == POISON[1] for r in log.records(POISON[0]) if r.visible)
    store = MemoryStore(processing=Processing(AMENDMENTS.key, poison_decide))
    stats = WorkerGroup(store, log, workers, rebalance_every=rebalance_every, batch=4).run()
    assert stats.errors == [] and stats.done
    assert [(f.partition, f.offset) for f in stats.failures] == [POISON]
    assert "cannot store offset 8" in stats.failures[0].describe()
    frontiers = {r.partition: r.frontier for r in store.snapshot().partitions}
    assert frontiers[POISON[0]] <= POISON[1]  # stopped there…
    for p in (0, 2):  # …while the others were processed to the end
        assert frontiers[p] == log.end(p)


def test_stop_from_another_thread_is_clean_and_resumable(tmp_path: Path) -> None:
    log = source(per_partition=400)
    store = SqliteStore(tmp_path / "state.sqlite3")
    group = WorkerGroup(store, log, 4, rebalance_every=50, batch=8)
    seen = threading.Event()

    def progress(_p: object) -> None:
        if group.processed() > 50 and not seen.is_set():
            seen.set()
            threading.Thread(target=group.stop).start()

    stats = group.run(progress=progress, interval=0.01)
    assert stats.errors == [] and stats.stopped and not stats.done
    checker = Checker(log.all_records(), log.partitions)
    snap = store.snapshot()
    assert checker.final_problems(snap) != []  # incomplete…
    assert checker.problems(snap) == []  # …but safe
    stats = WorkerGroup(store, log, 2, rebalance_every=50).run()
    assert stats.done and checker.final_problems(store.snapshot()) == []
    store.close()


def test_group_rejects_zero_workers() -> None:
    with pytest.raises(ValueError):
        WorkerGroup(MemoryStore(), source(), 0)


def test_idle_after_close_does_not_mark_the_source_done() -> None:
    """Regression (found by the group machine's ``vanished`` rule): a member that went idle
    after a group-wide error or a stop closed the coordinator made ``done`` true, so the
    group reported its source finished (and a stop as not ``stopped``)."""
    coordinator = Coordinator([0, 1], 2, 0)
    coordinator.leave(1)  # the failing member leaves after the group was closed
    coordinator.close()
    coordinator.idle(0, 1)
    assert not coordinator.done
