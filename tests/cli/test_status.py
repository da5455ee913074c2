"""``remora status``: per-partition epoch, frontier, outbox and quarantine counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "source"


def test_status_after_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "state.sqlite3"
    assert main(["run", str(EXAMPLES), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["status", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == str(db)
    assert lines[1].split() == [
        "partition",
        "epoch",
        "frontier",
        "next_seq",
        "outbox",
        "quarantine",
    ]
    assert [line.split() for line in lines[2:]] == [
        ["0", "1", "9", "6", "5", "0"],
        ["1", "1", "7", "3", "2", "4"],
    ]
    assert main(["status", "--db", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partitions"][1] == {
        "partition": 1,
        "epoch": 1,
        "frontier": 7,
        "next_seq": 3,
        "outbox": 2,
        "quarantine": 4,
    }


def test_status_of_an_empty_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from remora.store import SqliteStore

    db = tmp_path / "state.sqlite3"
    SqliteStore(db).close()
    assert main(["status", "--db", str(db)]) == 0
    assert "no partition has been claimed yet" in capsys.readouterr().out


def test_status_never_creates_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "missing.sqlite3"
    assert main(["status", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such database file" in err
    assert not db.exists()


def test_status_rejects_a_corrupt_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "db"
    db.write_bytes(b"not sqlite at all" * 100)
    assert main(["status", "--db", str(db)]) == 2
    assert "not a usable Remora database" in capsys.readouterr().err


def test_status_bad_dsn(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--dsn", "nope"]) == 2
    assert "bad PostgreSQL DSN" in capsys.readouterr().err


def test_status_refuses_a_foreign_sqlite_file_without_touching_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    db = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE unrelated (x)")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    assert main(["status", "--db", str(db)]) == 2
    assert "no Remora schema" in capsys.readouterr().err
    assert db.read_bytes() == before
