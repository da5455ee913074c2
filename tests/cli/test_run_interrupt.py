"""Safe interruption of ``remora run``: Ctrl-C (SIGINT) or SIGTERM mid-run, then a restart,
loses and duplicates nothing — on SQLite here, on PostgreSQL in ``tests/postgres``."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

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
