"""``remora run --workers N`` on the command line: churning workers, flags, DSNs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import main
from remora.sim.checker import Checker
from remora.store import SqliteStore
from tests.common.workload import generate, write_source_dir


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
