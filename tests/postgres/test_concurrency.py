"""Many lifetimes in threads churning ownership of a few partitions on the real server.

Eight threads each run a sequence of lifetimes for a bounded time: assign a random subset
of the partitions, seek, process a few records from their own fetch cursors, then revoke
(and maybe reuse the lifetime) or stop.  Lifetimes overlap freely, so stale owners keep
trying to write; they must be fenced.  A monitor thread snapshots the store meanwhile and
checks every snapshot against the oracle (and the history: frontiers and epochs never go
back).  At the end a fresh lifetime drains the source and the oracle must hold exactly:
outbox ``seq`` contiguous, every visible record accounted for once, frontiers at the end.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

from remora.domain import SourceRecord
from remora.errors import RemoraError
from remora.sim.checker import Checker
from remora.source import MemorySourceLog
from remora.store import StateStore
from remora.store.postgres import PostgresStore
from remora.worker import Lifecycle
from tests.common.workload import generate
from tests.postgres.locks import NoFence

pytestmark = pytest.mark.services

PARTITIONS = 4
THREADS = 8
CHURN_SECONDS = 2.5
BOUND = 60.0


def churn(
    store: StateStore,
    records: list[SourceRecord],
    seconds: float,
    seed: int,
    stop_on_violation: bool = False,
) -> tuple[list[str], Counter[str]]:
    """Run the churn; returns (problems, outcome counts)."""
    log = MemorySourceLog(records, range(PARTITIONS))
    deadline = time.monotonic() + seconds
    counts: Counter[str] = Counter()
    counts_lock = threading.Lock()
    problems: list[str] = []
    halt = threading.Event()

    def count(what: str) -> None:
        with counts_lock:
            counts[what] += 1

    def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        life: Lifecycle | None = None
        generation = 0
        while time.monotonic() < deadline and not halt.is_set():
            if life is None or not life.live:
                generation += 1
                life = Lifecycle(store, log, name=f"t{index}.{generation}")
            parts = rng.sample(range(PARTITIONS), rng.randint(1, 2))
            try:
                life.assign(parts)
                count("assign")
                cursors = {p: life.seek(p) for p in parts}
                for _ in range(rng.randint(1, 12)):
                    p = rng.choice(parts)
                    record = log.next_visible(p, cursors[p])
                    if record is None:
                        continue
                    cursors[p] = record.offset + 1  # a fetch cursor: advances even on failure
                    life.process(p, record)
                    count("process")
            except RemoraError as exc:
                count(type(exc).__name__)
                continue  # the lifetime retired: the next round starts a new one
            if rng.random() < 0.5:
                life.revoke()
            else:
                life.stop()
            time.sleep(rng.random() * 0.01)  # let other owners get some work done

    def monitor() -> None:
        checker = Checker(records, range(PARTITIONS))  # one history for the whole churn
        while any(t.is_alive() for t in threads) and not halt.is_set():
            found = checker.check_store(store.backend)
            if found:
                problems.extend(f"during the churn: {v.kind}: {v.message}" for v in found)
                if stop_on_violation:
                    halt.set()
                return
            time.sleep(0.05)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    watcher = threading.Thread(target=monitor, daemon=True)
    watcher.start()
    for t in threads:
        t.join(BOUND)
    watcher.join(BOUND)
    assert not any(t.is_alive() for t in [*threads, watcher]), "a churn thread hung"
    if problems and stop_on_violation:
        return problems, counts

    # Drain: one fresh lifetime finishes every partition from its durable frontier.
    drain = Lifecycle(store, log, name="drain")
    try:
        drain.assign(range(PARTITIONS))
        for p in range(PARTITIONS):
            frontier = drain.seek(p)
            for record in log.records(p):
                if record.visible and record.offset >= frontier:
                    drain.process(p, record)
    except RemoraError as exc:
        problems.append(f"drain failed: {exc!r}")
    problems += Checker(records, range(PARTITIONS)).final_problems(store.snapshot())
    return problems, counts


def test_eight_lifetimes_churning_keep_exactly_once(remora_scratch_database: str) -> None:
    records = generate(5, PARTITIONS, 150)
    store = PostgresStore(remora_scratch_database)
    try:
        problems, counts = churn(store, records, CHURN_SECONDS, seed=5)
        assert problems == []
        snap = store.snapshot()
        # Ownership really churned: every partition went through several epochs.
        assert all(row.epoch >= 2 for row in snap.partitions), snap.partitions
        assert counts["assign"] >= THREADS and counts["process"] > 0, counts
        print(f"churn outcomes: {dict(counts)}; epochs {[r.epoch for r in snap.partitions]}")
    finally:
        store.close()


def test_planted_missing_fence_is_caught_by_the_churn(remora_scratch_database: str) -> None:
    records = generate(6, PARTITIONS, 150)
    store = StateStore(NoFence(remora_scratch_database))
    try:
        problems, _counts = churn(store, records, CHURN_SECONDS, seed=6, stop_on_violation=True)
        assert problems, "eight churning lifetimes without a fence went unnoticed"
    finally:
        store.close()
