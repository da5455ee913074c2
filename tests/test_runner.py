"""The callback runner and ``remora run``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from remora.clock import LogicalClock
from remora.errors import LifetimeRetired
from remora.faults import Operation
from remora.source import MemorySourceLog
from remora.store import MemoryStore
from remora.testing.clients import LogClient
from remora.worker import Lifecycle
from remora.worker.runner import Runner
from tests.common.support import Harness, amendment, decision, records

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "source"


def two_partitions() -> MemorySourceLog:
    return MemorySourceLog(
        records(0, amendment("a", "submit", 1), amendment("a", "correct", 2))
        + records(1, amendment("b", "submit", 1), "garbage", start=3)
    )


def test_runner_processes_everything_once_and_closes_client() -> None:
    log = two_partitions()
    store = MemoryStore()
    client = LogClient(log)
    stats = Runner(Lifecycle(store, log), client).run()
    assert stats.error is None and stats.processed == 4
    snap = store.snapshot()
    assert [(r.partition, r.epoch, r.frontier) for r in snap.partitions] == [(0, 1, 2), (1, 1, 5)]
    assert len(snap.outbox) == 3 and len(snap.quarantine) == 1
    assert client.cursors.position(0) is None  # closed: revoked and cleared
    # A second runner over the same store resumes at the frontier and does nothing more.
    stats = Runner(Lifecycle(store, log), LogClient(log)).run()
    assert stats.processed == 0 and len(store.snapshot().outbox) == 3


def test_runner_reports_lifecycle_error() -> None:
    h = Harness(records(0, amendment("a", "submit", 1)))
    for n in (1, 2, 3):
        h.hook.script[(Operation.CLAIM, n)] = decision("abort")
    stats = Runner(h.lifecycle, LogClient(h.log)).run()
    assert stats.error is not None and stats.processed == 0
    with pytest.raises(LifetimeRetired):
        h.lifecycle.assign([0])


def test_runner_stop_from_another_thread() -> None:
    log = MemorySourceLog(records(0, *[amendment(f"s{i}", "submit", 1) for i in range(50)]))
    store = MemoryStore()
    lifecycle = Lifecycle(store, log, clock=LogicalClock())
    runner = Runner(lifecycle, LogClient(log))
    seen: list[int] = []

    def progress(stats: object) -> None:
        seen.append(1)
        threading.Thread(target=runner.stop).start()

    stats = runner.run(until_idle=False, max_records=5, progress=progress)
    assert lifecycle.stopped
    assert stats.processed == len(store.snapshot().outbox) <= 50
