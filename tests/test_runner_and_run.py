"""The callback runner and ``remora run``."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from remora.cli import main
from remora.clock import LogicalClock
from remora.errors import LifetimeRetired
from remora.faults import Operation
from remora.source import MemorySourceLog
from remora.store import MemoryStore, SqliteStore
from remora.testing.clients import LogClient
from remora.worker import Lifecycle
from remora.worker.runner import Runner
from tests.support import Harness, amendment, decision, records

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


def test_run_cli_example_then_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "state.sqlite3"
    assert main(["run", str(EXAMPLES), "--db", str(db), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["processed"] == 11
    assert [
        (p["partition"], p["frontier"], p["outbox"], p["quarantine"]) for p in first["partitions"]
    ] == [
        (0, 9, 5, 0),
        (1, 7, 2, 4),
    ]
    assert main(["run", str(EXAMPLES), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "processed 0 records" in out and "partition  epoch  frontier" in out
    store = SqliteStore(db)
    assert len(store.snapshot().outbox) == 7  # nothing duplicated by the second run
    store.close()


def test_run_cli_rejects_bad_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES, src)
    with (src / "partition-0.jsonl").open("a") as f:
        f.write("{broken\n")
    assert main(["run", str(src), "--db", str(tmp_path / "db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "partition-0.jsonl:7: not JSON" in err
    assert not (tmp_path / "db").exists()


def test_run_cli_rejects_corrupt_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    db.write_bytes(b"this is not sqlite" * 100)
    assert main(["run", str(EXAMPLES), "--db", str(db)]) == 2
    assert "not a usable Remora database" in capsys.readouterr().err


def test_sqlite_schema_newer_version_rejected(tmp_path: Path) -> None:
    from remora.errors import InvalidInput

    db = tmp_path / "db"
    SqliteStore(db).close()
    SqliteStore(db).close()  # migration is idempotent
    conn = sqlite3.connect(db)
    conn.execute("UPDATE remora_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidInput, match="schema version 99"):
        SqliteStore(db)
