"""The pytest plugin's PostgreSQL fixtures against the real server, run as a user's project
runs them (a directory outside the repository, the plugin loaded by its entry point)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import psycopg

from tests.postgres.services import database_name, require_postgres
from tests.testing.user_project import run_pytest

USER_TESTS = """
from pathlib import Path

import psycopg

from remora.clock import LogicalClock
from remora.context import Context
from remora.store.postgres import PostgresBackend


def test_each_kind(remora_store_factory, remora_store_kind):
    first, second = remora_store_factory(), remora_store_factory()
    assert first.claim(0, Context(LogicalClock()), commit=True).epoch == 1
    assert second.partition_row(0).epoch == 0
    if remora_store_kind == "postgres":
        assert isinstance(first, PostgresBackend) and first.dsn != second.dsn
        Path("made.txt").write_text(first.dsn + "\\n" + second.dsn)


def test_scratch(remora_scratch_database):
    with psycopg.connect(remora_scratch_database) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone() == (0,)
    Path("scratch.txt").write_text(remora_scratch_database)
"""


def exists(maintenance: str, name: str) -> bool:
    with psycopg.connect(maintenance, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return row is not None


def test_postgres_fixtures_make_and_drop_databases(tmp_path: Path) -> None:
    server = require_postgres()
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    done = run_pytest(tmp_path, "-rA", env={"REMORA_PG_DSN": server})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED test_user.py::test_each_kind[postgres]" in done.stdout
    assert "4 passed" in done.stdout
    made = [
        *(tmp_path / "made.txt").read_text().split("\n"),
        (tmp_path / "scratch.txt").read_text(),
    ]
    assert len(made) == 3
    for dsn in made:
        assert not exists(server, database_name(dsn)), f"{dsn} was not dropped"

    by_option = run_pytest(tmp_path, "--remora-dsn", server, "-k", "scratch")
    assert "1 passed" in by_option.stdout, by_option.stdout


def test_an_unreachable_server_skips_with_the_reason(tmp_path: Path) -> None:
    require_postgres()
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    dead = "postgresql://postgres@127.0.0.1:1/postgres"
    done = run_pytest(tmp_path, "-k", "scratch", env={"REMORA_PG_DSN": dead})
    assert "1 skipped" in done.stdout and "PostgreSQL is not reachable at" in done.stdout
