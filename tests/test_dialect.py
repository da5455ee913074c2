"""The SQL dialects and the one migration helper (:mod:`remora.store.dialect`): a schema is
created, upgraded from the installed version, given the columns added after its tables'
release, and refused when newer — on SQLite and on PostgreSQL, and through the stream
worker's stores (which add missing columns like the job runtime's durable store)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from remora.errors import InvalidInput
from remora.store import dialect
from remora.store.dialect import POSTGRES, SQLITE, AddedColumn, Dialect, Schema, migrate
from remora.store.sqlite import SqliteBackend

OLD = Schema(
    version=1,
    version_table=("t_meta", "key"),
    create=(
        "CREATE TABLE IF NOT EXISTS t_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS t_item (id INTEGER PRIMARY KEY)",
        "CREATE INDEX IF NOT EXISTS t_item_id ON t_item (id)",
    ),
)
NEW = attrs.evolve(
    OLD,
    version=2,
    upgrades=((), ("CREATE TABLE t_extra (id INTEGER PRIMARY KEY)",)),
    added=(AddedColumn("t_item", "note", "TEXT NOT NULL DEFAULT ''"),),
)


def columns(cur: Any, d: Dialect, table: str) -> set[str]:
    names = {"note", "id"}
    return {n for n in names if d.column_exists(cur, table, n)}


def upgrade_check(cur: Any, d: Dialect, run: Callable[[Schema], None]) -> list[str]:
    """Create ``OLD``, upgrade to ``NEW`` twice, then try an older Remora: what went wrong
    (empty: the helper did its job)."""
    problems = []
    run(OLD)
    cur.execute("INSERT INTO t_item (id) VALUES (1)")
    if "note" in columns(cur, d, "t_item"):
        problems.append("the old schema already has the added column")
    run(NEW)
    run(NEW)  # idempotent
    if "note" not in columns(cur, d, "t_item"):
        problems.append("the added column is missing after the upgrade")
    row = cur.execute("SELECT value FROM t_meta WHERE key = 'schema_version'").fetchone()
    if row is None or row[0] != "2":
        problems.append(f"the version row is {row}")
    if cur.execute("SELECT count(*) FROM t_extra").fetchone()[0] != 0:
        problems.append("the upgrade's table is not empty")
    with pytest.raises(InvalidInput, match="schema version 2 is newer than this Remora"):
        run(OLD)
    return problems


def test_sqlite_creates_upgrades_adds_and_refuses() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    assert upgrade_check(conn, SQLITE, lambda s: migrate(conn, SQLITE, s, ":memory:")) == []


@pytest.mark.services
def test_postgres_creates_upgrades_adds_and_refuses(remora_scratch_database: str) -> None:
    import psycopg

    with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
        cur = conn.cursor()
        run = lambda s: migrate(cur, POSTGRES, s, "pg")  # noqa: E731
        assert upgrade_check(cur, POSTGRES, run) == []
        assert POSTGRES.index_exists(cur, OLD.create[2])  # skipped when there: no table lock
        assert not POSTGRES.index_exists(cur, "CREATE INDEX IF NOT EXISTS nope ON t_item (id)")


def test_planted_a_helper_that_forgets_the_added_columns_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dialect, "add_missing_columns", lambda cur, d, added: [])
    conn = sqlite3.connect(":memory:", isolation_level=None)
    assert upgrade_check(conn, SQLITE, lambda s: migrate(conn, SQLITE, s, ":memory:")) == [
        "the added column is missing after the upgrade"
    ]


def test_the_stream_store_adds_a_missing_column_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file an older Remora wrote lacks a column added since: opening it adds it (the
    stream worker's SQLite store declares its added columns like the job runtime's)."""
    path = tmp_path / "state.sqlite3"
    SqliteBackend(path).close()
    added = AddedColumn("remora_outbox", "trace_id", "TEXT NOT NULL DEFAULT ''")
    monkeypatch.setattr(SqliteBackend, "schema", attrs.evolve(SqliteBackend.schema, added=(added,)))
    SqliteBackend(path).close()
    conn = sqlite3.connect(path)
    assert SQLITE.column_exists(conn, "remora_outbox", "trace_id")
    conn.close()


def test_the_dialects_spell_the_sql() -> None:
    assert SQLITE.q("SELECT ? WHERE a = ?") == "SELECT ? WHERE a = ?"
    assert POSTGRES.q("SELECT ? WHERE a = ?") == "SELECT %s WHERE a = %s"
    assert SQLITE.now_sql() == "?" and SQLITE.now_params(7.5) == (7.5,)
    assert POSTGRES.now_params(7.5) == () and "clock_timestamp" in POSTGRES.now_sql()
    injected = POSTGRES.with_injected_clock()
    assert injected.now_sql() == "%s" and injected.now_params(7.5) == (7.5,)
    assert POSTGRES.lock_clause == " FOR UPDATE" and SQLITE.lock_clause == ""
