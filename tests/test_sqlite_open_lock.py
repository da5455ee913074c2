"""Another process holding the SQLite file's lock while a store opens it: retried within
the lock budget, then a transient failure (``Unavailable``, exit 1) — never "not a usable
Remora database" (exit 2, bad input), as on main."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from remora.cli import main
from remora.errors import Unavailable
from remora.store import SqliteBackend
from tests.common.workload import generate, write_source_dir


@contextmanager
def locked(db: Path, release_after: float | None = None) -> Iterator[None]:
    """An exclusive lock on ``db`` (a rollback-journal file, as a fresh file is until a
    store switches it to WAL), released after ``release_after`` seconds or at the end."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE IF NOT EXISTS other (x)")
    conn.execute("BEGIN EXCLUSIVE")
    timer = None
    if release_after is not None:
        timer = threading.Timer(release_after, lambda: conn.execute("COMMIT"))
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.join()
        if conn.in_transaction:
            conn.execute("COMMIT")
        conn.close()


def test_a_lock_released_within_the_budget_is_waited_for(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite3"
    with locked(db, release_after=0.3):
        backend = SqliteBackend(db, lock_timeout=5.0)
    assert backend.partition_summaries() == []
    backend.close()


def test_a_lock_held_past_the_budget_is_unavailable_not_bad_input(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite3"
    with locked(db), pytest.raises(Unavailable, match="locked by another connection"):
        SqliteBackend(db, lock_timeout=0.3)


def test_remora_run_on_a_locked_database_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_source_dir(tmp_path / "src", generate(1, 1, 5), 1)
    db = tmp_path / "state.sqlite3"
    with locked(db):
        code = main(["run", str(src), "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "database is locked" in err and "not a usable" not in err
    assert main(["run", str(src), "--db", str(db)]) == 0  # and once it is free, it runs
