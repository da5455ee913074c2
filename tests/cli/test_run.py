"""``remora run``: the example source, resuming, rejected sources and databases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from remora.cli import main
from remora.store import SqliteStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "source"


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
