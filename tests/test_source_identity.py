"""Issue 11, item 2: the store knows its source.  A state store reused with another source
is refused (exit 2, naming partition and offset) unless ``--accept-source-change``; source
file names are unambiguous (ASCII digits only, one file per partition, no stray
``partition-*`` entries)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from remora.cli import main
from remora.domain import SourceRecord
from remora.errors import InvalidInput
from remora.sim.stores import BackendFactory
from remora.source import MemorySourceLog, load_source_dir
from remora.store import MemoryStore, SqliteStore, StateStore
from remora.worker.group import WorkerGroup
from remora.worker.source_identity import SourceMismatch, check_source, record_source

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "source"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def store_args(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    if request.param == "sqlite":
        yield ["--db", str(tmp_path / "state.sqlite3")]
    else:
        from tests.postgres.services import fresh_database

        with fresh_database() as dsn:
            yield ["--dsn", dsn]


def copy_examples(where: Path) -> Path:
    shutil.copytree(EXAMPLES, where)
    return where


def summary(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_another_source_is_refused_then_accepted_on_request(
    tmp_path: Path, store_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the second run reported every partition complete (exit 0) and processed
    nothing of the new source below the old frontiers."""
    assert main(["run", str(EXAMPLES), *store_args, "--json"]) == 0
    first = summary(capsys)
    other = copy_examples(tmp_path / "mine")
    lines = (other / "partition-1.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace("order-", "mine-")
    (other / "partition-1.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["run", str(other), *store_args, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "remora run: partition 1: this is not the source the store processed" in err
    assert "at offset 0, differs" in err and "--accept-source-change" in err
    assert main(["status", *store_args, "--json"]) == 0
    assert [p["frontier"] for p in summary(capsys)["partitions"]] == [  # type: ignore[index]
        p["frontier"]
        for p in first["partitions"]  # type: ignore[index]
    ]
    assert main(["run", str(other), *store_args, "--accept-source-change"]) == 0
    assert "partition 1: source changed" in capsys.readouterr().err
    assert main(["run", str(other), *store_args]) == 0  # the new source is the store's now
    assert capsys.readouterr().err == ""


def test_a_source_cut_below_the_frontier_is_refused_and_a_grown_one_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = copy_examples(tmp_path / "src")
    db = ["--db", str(tmp_path / "db")]
    assert main(["run", str(src), *db]) == 0
    part0 = src / "partition-0.jsonl"
    full = part0.read_text().splitlines()
    part0.write_text("\n".join(full[:-1]) + "\n")  # the last processed record is gone
    assert main(["run", str(src), *db]) == 2
    assert "the last record it processed, at offset 8, is not in it" in capsys.readouterr().err
    grown = [
        *full,
        json.dumps(
            {"offset": 20, "value": {"subject": "new", "op": "submit", "revision": 1, "body": {}}}
        ),
    ]
    part0.write_text("\n".join(grown) + "\n")
    assert main(["run", str(src), *db, "--json"]) == 0
    assert summary(capsys)["processed"] == 1


def test_a_state_file_from_before_source_identities_is_upgraded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "old.sqlite3"
    assert main(["run", str(EXAMPLES), "--db", str(db)]) == 0
    with sqlite3.connect(db) as conn:  # as Remora left it before: schema version 1
        conn.execute("DROP TABLE remora_source")
        conn.execute("UPDATE remora_meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    capsys.readouterr()
    assert main(["run", str(EXAMPLES), "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert "partition 0: this store (frontier 9) has no record of its source" in err
    other = copy_examples(tmp_path / "other")
    (other / "partition-0.jsonl").write_text('{"offset": 8, "value": 1}\n')
    assert main(["run", str(other), "--db", str(db)]) == 2  # recorded now, so checked


def test_every_store_keeps_the_identity(remora_store_factory: BackendFactory) -> None:
    def log(tag: str) -> MemorySourceLog:
        return MemorySourceLog(
            [SourceRecord(0, i, True, None, f"{tag}{i}".encode()) for i in range(4)], [0]
        )

    store: StateStore = StateStore(remora_store_factory())
    mine = log("a")
    check_source(store, mine, accept=False, say=pytest.fail)
    WorkerGroup(store, mine, 1).run()
    record_source(store, mine)
    identity = store.backend.source_identities()[0]
    assert (identity.first.offset, identity.last and identity.last.offset) == (0, 3)
    check_source(store, mine, accept=False, say=pytest.fail)
    with pytest.raises(SourceMismatch, match=r"partition 0: .* at offset 0, differs"):
        check_source(store, log("b"), accept=False, say=pytest.fail)
    said: list[str] = []
    check_source(store, log("b"), accept=True, say=said.append)
    assert said and store.backend.source_identities()[0] != identity


def test_memory_and_sqlite_agree(tmp_path: Path) -> None:
    records = [SourceRecord(0, 5, True, "k", b"v")]
    stores = [MemoryStore(), SqliteStore(tmp_path / "db")]
    for store in stores:
        check_source(store, MemorySourceLog(records), accept=False, say=pytest.fail)
    assert stores[0].backend.source_identities() == stores[1].backend.source_identities()


# -- file names -------------------------------------------------------------------------


def write(folder: Path, *names: str) -> Path:
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text('{"offset": 0, "value": 1}\n')
    return folder


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["partition-1.jsonl", "partition-01.jsonl"],
            "partition-01.jsonl and partition-1.jsonl are both partition 1",
        ),
        (["partition-0.jsonl", "partition-x.jsonl"], "partition-x.jsonl"),
        (["partition-0.jsonl", "partition-1.json"], "partition-1.json"),
        (["partition-0.jsonl", "partition-\u0661.jsonl"], "partition-\u0661.jsonl"),
        (["partition-0.jsonl", "partition-99999999999.jsonl"], "partition-99999999999.jsonl"),
    ],
)
def test_ambiguous_or_stray_partition_files_are_refused(
    tmp_path: Path, names: list[str], message: str
) -> None:
    with pytest.raises(InvalidInput) as exc:
        load_source_dir(write(tmp_path / "src", *names))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_other_files_are_still_ignored(tmp_path: Path) -> None:
    src = write(tmp_path / "src", "partition-00.jsonl", "README.md", "notes.txt")
    assert load_source_dir(src).partitions == (0,)


@pytest.mark.services
def test_a_version_1_postgres_database_is_named_then_upgraded(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import psycopg

    from remora.store.postgres import MIGRATIONS
    from tests.postgres.services import fresh_database

    with fresh_database() as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:  # as Remora left it before
            conn.execute("CREATE TABLE remora_meta (key text PRIMARY KEY, value text NOT NULL)")
            for statement in MIGRATIONS[0]:
                conn.execute(statement)
            conn.execute("INSERT INTO remora_meta VALUES ('schema_version', '1')")
        assert main(["status", "--dsn", dsn]) == 2
        err = capsys.readouterr().err
        assert "schema version 1, this Remora uses 2 (`remora run` upgrades it)" in err
        assert main(["run", str(EXAMPLES), "--dsn", dsn]) == 0
        assert main(["status", "--dsn", dsn, "--json"]) == 0
        capsys.readouterr()


def test_a_record_below_the_first_processed_one_is_refused() -> None:
    """Found by the group machine's source-identity rule: a store that accepted a source
    without its first record, then met the original again, saw its marks unchanged and
    accepted it silently — the restored record 0 below the frontier would never be
    processed, and an edit of it went unnoticed."""
    value = b'{"body": {"n": 0}, "op": "submit", "revision": 1, "subject": "s"}'
    full = [SourceRecord(0, 0, True, "s", value), SourceRecord(0, 1, True, "t", value)]
    store = MemoryStore()
    said: list[str] = []
    WorkerGroup(store, MemorySourceLog(full), workers=1).run()
    check_source(store, MemorySourceLog(full), accept=False, say=said.append)
    record_source(store, MemorySourceLog(full))
    dropped = MemorySourceLog(full[1:])
    check_source(store, dropped, accept=True, say=said.append)
    assert any("source changed" in s for s in said)
    with pytest.raises(SourceMismatch, match="offset 0 precedes the first record"):
        check_source(store, MemorySourceLog(full), accept=False, say=said.append)
