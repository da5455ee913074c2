"""``remora run --workers N``: lifetimes in threads with eager assign/revoke churn."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from remora.faults import Operation
from remora.sim.checker import Checker
from remora.source import MemorySourceLog
from remora.store import MemoryStore, SqliteStore
from remora.testing.faults import ScriptedFaults
from remora.worker import Lifecycle
from remora.worker.group import WorkerGroup
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


def test_member_failure_stops_the_group_and_a_restart_finishes() -> None:
    log = source()
    store = MemoryStore()
    hook = ScriptedFaults()
    for n in range(1, 10):  # every member's claims all fail: retries exhausted
        hook.script[(Operation.CLAIM, n)] = decision("abort")
    store.hook = hook
    stats = WorkerGroup(store, log, 3, rebalance_every=5, batch=3).run()
    assert len(stats.errors) == 1 and not stats.done
    assert "claim: gave up after 3 calls" in str(stats.errors[0])
    store.hook = ScriptedFaults()
    stats = WorkerGroup(store, log, 3, rebalance_every=5, batch=3).run()
    assert stats.errors == [] and stats.done
    assert Checker(log.all_records(), log.partitions).final_problems(store.snapshot()) == []


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
