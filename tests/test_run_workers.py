"""``remora run --workers N``: lifetimes in threads with eager assign/revoke churn."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from remora.cli import main
from remora.faults import Operation
from remora.sim.checker import Checker
from remora.source import MemorySourceLog
from remora.store import MemoryStore, SqliteStore
from remora.testing.faults import ScriptedFaults
from remora.worker import Lifecycle
from remora.worker.group import WorkerGroup
from tests.postgres.workload import generate, write_source_dir
from tests.support import decision


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


def test_run_cli_with_workers_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = generate(4, 4, 150)
    src = write_source_dir(tmp_path / "src", records, 4)
    db = tmp_path / "state.sqlite3"
    args = ["run", str(src), "--db", str(db), "--workers", "4", "--rebalance-every", "40"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workers"] == 4 and doc["rebalances"] > 0 and not doc["interrupted"]
    assert all(p["complete"] for p in doc["partitions"])
    store = SqliteStore(db)
    assert Checker(records, range(4)).final_problems(store.snapshot()) == []
    store.close()
    assert main(args) == 0  # a second run resumes at the frontiers: nothing more to do
    assert "processed 0 records" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", "0"], "--workers: must be at least 1"),
        (["--workers", "x"], "--workers: not an integer"),
        (["--rebalance-every", "-1"], "--rebalance-every: must be at least 0"),
        (["--db", "a", "--dsn", "b"], "not allowed with argument"),
    ],
)
def test_run_cli_rejects_bad_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", str(tmp_path), *flags])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_run_cli_rejects_bad_dsn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_source_dir(tmp_path / "src", generate(1, 1, 3), 1)
    assert main(["run", str(src), "--dsn", "definitely not a dsn"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad PostgreSQL DSN" in err


def test_run_cli_unreachable_server_is_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_source_dir(tmp_path / "src", generate(1, 1, 3), 1)
    dsn = "host=127.0.0.1 port=1 user=postgres connect_timeout=2"
    assert main(["run", str(src), "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot connect to PostgreSQL" in err


def test_group_rejects_zero_workers() -> None:
    with pytest.raises(ValueError):
        WorkerGroup(MemoryStore(), source(), 0)
