"""``remora run`` and ``remora status`` when the store's storage fails (issue 25).

* A full disk at any write (on a tiny memory-backed tmpfs, and deterministically through
  SQLite's ``PRAGMA max_page_count``): one line naming the file and ``no space left on
  device``, the table of what was committed, exit 1; a rerun after freeing space processes
  every record exactly once.  Before: ``internal error: OperationalError`` without the table
  (or, at open, ``not a usable Remora database``, exit 2).
* A read-only filesystem: ``remora run`` says ``read-only filesystem`` (exit 2); ``remora
  status`` opens the file read-only (URI ``mode=ro``) and prints the rows.  Before: ``not a
  usable Remora database`` from both.  (chmod does not stop root, so a read-only mount.)

The mounts need root and mount(2); where that is impossible the tmpfs tests skip, saying
why — the ``max_page_count`` variant runs everywhere."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import remora.cli.run
from remora.cli import main
from remora.sim.checker import Checker
from remora.store import SqliteStore, StateStore
from tests.cli.docs_lines import assert_documented
from tests.common.processes import REPO
from tests.common.workload import generate, write_source_dir

PARTITIONS = 2


def cli(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "remora", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout, proc.stderr


class Tmpfs:
    def __init__(self, path: Path) -> None:
        self.path = path

    def mount(self, options: str) -> None:
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(self.path)], check=True)

    def remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    where = tmp_path / "tmpfs"
    where.mkdir()
    fs = Tmpfs(where)
    probe = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip() or probe.returncode}")
    subprocess.run(["umount", str(where)], check=True)
    try:
        yield fs
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _check_table(out: str) -> None:
    assert "partition  epoch  frontier  outbox  quarantine  complete" in out, out


def _exactly_once(records: Any, db: Path) -> None:
    store = SqliteStore(db)
    try:
        assert Checker(records, range(PARTITIONS)).final_problems(store.snapshot()) == []
    finally:
        store.close()


@pytest.mark.parametrize("size", ["64k", "128k", "256k"])
def test_disk_full_on_a_tmpfs_then_a_rerun_after_freeing_space(
    tmp_path: Path, tmpfs: Tmpfs, size: str
) -> None:
    records = generate(3, PARTITIONS, 600)
    src = write_source_dir(tmp_path / "src", records, PARTITIONS)
    tmpfs.mount(f"size={size}")
    db = tmpfs.path / "state.sqlite3"

    code, out, err = cli("run", str(src), "--db", str(db), "-q")
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"remora run: {db}: cannot write: no space left on device"), err
    assert "internal error" not in err and "Traceback" not in err
    if "processed" in out:  # the disk filled mid-run (at 64k it may fill at open)
        _check_table(out)

    tmpfs.remount("size=16m")  # space freed
    code, out, err = cli("run", str(src), "--db", str(db), "-q")
    assert (code, err) == (0, ""), out
    _exactly_once(records, db)


def test_disk_full_deterministic_max_page_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same without a mount: SQLite reports SQLITE_FULL past ``max_page_count``."""
    records = generate(3, PARTITIONS, 600)
    src = write_source_dir(tmp_path / "src", records, PARTITIONS)
    db = tmp_path / "state.sqlite3"
    SqliteStore(db).close()  # the schema

    def capped(args: Any, **kwargs: Any) -> StateStore:
        store = SqliteStore(db)
        conn = store.backend._conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 3}")
        return store

    monkeypatch.setattr(remora.cli.run, "open_store", capped)
    code = main(["run", str(src), "--db", str(db), "--workers", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"remora run: {db}: cannot write: no space left on device"), err
    assert_documented("cli.md", "remora run: …/state.sqlite3: cannot write: no", lines[0])
    doc = json.loads(out)
    assert doc["stopped"] == [] and not all(p["complete"] for p in doc["partitions"])
    committed = {p["partition"]: p["frontier"] for p in doc["partitions"]}
    store = SqliteStore(db)
    assert {p: store.backend.partition_row(p).frontier for p in committed} == committed
    store.close()

    monkeypatch.undo()
    code = main(["run", str(src), "--db", str(db)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), out
    _exactly_once(records, db)


def test_read_only_filesystem_run_refused_status_reads(tmp_path: Path, tmpfs: Tmpfs) -> None:
    records = generate(3, PARTITIONS, 40)
    src = write_source_dir(tmp_path / "src", records, PARTITIONS)
    tmpfs.mount("size=16m")
    db = tmpfs.path / "state.sqlite3"
    assert cli("run", str(src), "--db", str(db), "-q")[0] == 0
    tmpfs.remount("ro")

    code, out, err = cli("status", "--db", str(db), "--json")
    assert (code, err) == (0, ""), out
    rows = json.loads(out)["partitions"]
    assert [r["partition"] for r in rows] == list(range(PARTITIONS))

    code, out, err = cli("run", str(src), "--db", str(db), "-q")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"remora run: {db}: cannot write: read-only filesystem"), err
    assert_documented("cli.md", "remora run: …/state.sqlite3: cannot write: read", lines[0])

    fresh = tmpfs.path / "new.sqlite3"
    code, out, err = cli("run", str(src), "--db", str(fresh), "-q")
    assert code == 2, (out, err)
    assert f"remora run: {fresh}: cannot write: read-only filesystem" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_status_on_a_read_only_filesystem_refuses_a_file_whose_wal_holds_commits(
    tmp_path: Path, tmpfs: Tmpfs
) -> None:
    """Opened ``immutable``, such a file would show a stale state: refused instead, exit 2."""
    import shutil
    import sqlite3

    made = tmp_path / "made.sqlite3"
    SqliteStore(made).close()
    conn = sqlite3.connect(made, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("INSERT INTO remora_partition VALUES (7, 1, 3, 1)")  # only in the WAL
    tmpfs.mount("size=16m")
    db = tmpfs.path / "state.sqlite3"
    shutil.copy(made, db)
    shutil.copy(f"{made}-wal", f"{db}-wal")  # as a crash leaves it: a WAL, no -shm
    conn.close()
    tmpfs.remount("ro")
    code, out, err = cli("status", "--db", str(db))
    assert code == 2, (out, err)
    assert "write-ahead log state.sqlite3-wal holds commits" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_a_call_answered_before_the_outage_does_not_say_the_store_is_back() -> None:
    """Two workers: one call was already under way (and answered) when another worker's call
    saw the outage.  Its answer proves nothing about recovery: the run says "waiting" once
    and "back" only after a call begun during the outage succeeds (seen in a clean-clone CI
    run of the 15 s cut: "waiting" twice)."""
    from remora.cli.run import _Watched
    from remora.errors import Unavailable
    from remora.store import Token

    said: list[str] = []
    watched = _Watched(None, "the store", 60.0, said.append)  # type: ignore[arg-type]

    def failing() -> Token:
        raise Unavailable("connection lost")

    def answered_before_the_outage() -> Token:
        with contextlib.suppress(Unavailable):
            watched._call(1, failing)  # another worker sees the outage meanwhile
        return Token(1, 0)

    watched._call(0, answered_before_the_outage)
    assert [s.split(" (")[0] for s in said] == ["waiting for the store"]
    watched._call(0, lambda: Token(1, 1))  # begun during the outage, answered: it is back
    assert len(said) == 2 and said[1].startswith("the store is back after")
