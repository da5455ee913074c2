"""Safe interruption of ``remora run``: Ctrl-C (SIGINT) or SIGTERM mid-run, then a restart,
loses and duplicates nothing — on SQLite here, on PostgreSQL in ``tests/postgres``."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

import remora.cli.run
from remora.cli import main
from remora.context import Context
from remora.faults import COMMIT, At, FaultDecision, IOCall, IOReport, Operation
from remora.sim.checker import Checker
from remora.store import SqliteStore
from tests.common.processes import finish, interrupt, remora_run, sqlite_progress
from tests.common.workload import generate, write_source_dir

PARTITIONS = 4


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_interrupt_then_restart_on_sqlite(tmp_path: Path, sig: signal.Signals) -> None:
    records = generate(21, PARTITIONS, 2500)
    src = write_source_dir(tmp_path / "src", records, PARTITIONS)
    db = tmp_path / "state.sqlite3"
    store_args = ["--db", str(db), "--workers", "4", "--rebalance-every", "300"]

    code, out, err = interrupt(remora_run(src, store_args), sqlite_progress(db), 300, sig)
    assert code == 1, (out, err)
    assert err.count("\n") == 1 and f"interrupted ({sig.name})" in err, err
    assert "partition  epoch  frontier" in out  # the summary still printed
    checker = Checker(records, range(PARTITIONS))
    store = SqliteStore(db)
    middle = store.snapshot()
    store.close()
    assert checker.problems(middle) == []  # whatever was in flight: consistent
    assert checker.final_problems(middle) != [], "the run was not interrupted mid-way"

    code, out, err = finish(remora_run(src, store_args))
    assert (code, err) == (0, ""), out
    store = SqliteStore(db)
    assert checker.final_problems(store.snapshot()) == []
    store.close()


class _SigintAfterCommit:
    """An IOHook: right after the Nth process call's effect (committed), a SIGINT — and
    wait until the stop reached the call's context, so the call reports Canceled although
    its commit landed (the window a real Ctrl-C can hit)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        return COMMIT

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None:
        if call.operation is not Operation.PROCESS or at is not At.AFTER:
            return
        self.calls += 1
        if self.calls == self.n:
            os.kill(os.getpid(), signal.SIGINT)
            give_up = time.monotonic() + 60
            while not ctx.canceled and time.monotonic() < give_up:
                time.sleep(0.001)

    def returned(self, call: IOCall, report: IOReport) -> None:
        return None


def test_interrupted_count_equals_committed_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``processed 29`` while 30 rows were committed (the record whose commit the
    stop cut short of its reply was not counted)."""
    records = generate(4, 2, 100)
    src = write_source_dir(tmp_path / "src", records, 2)
    db = tmp_path / "state.sqlite3"
    monkeypatch.setattr(
        remora.cli.run, "open_store", lambda args, **kw: SqliteStore(db, _SigintAfterCommit(30))
    )
    code = main(["run", str(src), "--db", str(db), "--json"])
    out, err = capsys.readouterr()
    assert code == 1 and "interrupted (SIGINT)" in err, err
    committed = sqlite_progress(db)()
    assert committed == 30, committed
    assert json.loads(out)["processed"] == committed
