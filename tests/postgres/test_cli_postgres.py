"""``remora run --dsn`` and ``remora status --dsn`` against the real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import main
from remora.store import SqliteStore
from remora.store.postgres import PostgresStore
from tests.common.workload import generate, write_source_dir

pytestmark = pytest.mark.services

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "source"


def test_run_example_on_postgres_then_status(
    remora_scratch_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(EXAMPLES), "--dsn", remora_scratch_database, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["processed"] == 11
    assert [
        (p["partition"], p["frontier"], p["outbox"], p["quarantine"]) for p in doc["partitions"]
    ] == [(0, 9, 5, 0), (1, 7, 2, 4)]
    assert main(["run", str(EXAMPLES), "--dsn", remora_scratch_database]) == 0
    out = capsys.readouterr().out
    assert "processed 0 records into PostgreSQL host=" in out
    assert main(["status", "--dsn", remora_scratch_database]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PostgreSQL host=")
    assert [line.split() for line in lines[2:]] == [
        ["0", "2", "9", "6", "5", "0"],
        ["1", "2", "7", "3", "2", "4"],
    ]


def test_postgres_and_sqlite_runs_end_in_equal_snapshots(
    remora_scratch_database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same source through both stores (4 churning workers on PostgreSQL, one on
    SQLite): the durable outputs are identical; only the epochs differ."""
    records = generate(41, 3, 200)
    src = write_source_dir(tmp_path / "src", records, 3)
    db = tmp_path / "state.sqlite3"
    assert main(["run", str(src), "--db", str(db), "--rebalance-every", "0"]) == 0
    assert (
        main(
            [
                "run",
                str(src),
                "--dsn",
                remora_scratch_database,
                "--workers",
                "4",
                "--rebalance-every",
                "30",
            ]
        )
        == 0
    )
    capsys.readouterr()
    sqlite, postgres = SqliteStore(db), PostgresStore(remora_scratch_database)
    try:
        a, b = sqlite.snapshot(), postgres.snapshot()
        assert (a.outbox, a.quarantine, a.intents, a.subjects) == (
            b.outbox,
            b.quarantine,
            b.intents,
            b.subjects,
        )
        assert [(r.partition, r.frontier, r.next_seq) for r in a.partitions] == [
            (r.partition, r.frontier, r.next_seq) for r in b.partitions
        ]
        assert all(r.epoch > 1 for r in b.partitions)
    finally:
        sqlite.close()
        postgres.close()


def test_status_of_a_database_without_schema(
    remora_scratch_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--dsn", remora_scratch_database]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Remora schema" in err
