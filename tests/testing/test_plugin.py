"""The pytest plugin as a user's project sees it: fixtures for a store of each kind, the
kind parametrization, and the check of @reproduce_failure blobs (each with its planted
failure).  PostgreSQL fixtures against the real server: tests/postgres/test_plugin_postgres.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import hypothesis

from remora.testing.plugin import blob_version_problem
from tests.testing.user_project import run_pytest

STORE_TESTS = """
from pathlib import Path

from remora.clock import LogicalClock
from remora.context import Context
from remora.store import Backend, MemoryBackend, SqliteBackend

MADE = []


def claim(backend):
    return backend.claim(0, Context(LogicalClock()), commit=True)


def test_each_kind(remora_store_factory, remora_store_kind):
    first, second = remora_store_factory(), remora_store_factory()
    assert isinstance(first, Backend)
    assert claim(first).epoch == 1 and claim(first).epoch == 2
    assert second.partition_row(0).epoch == 0  # every backend starts empty
    MADE.append((remora_store_kind, first))


def test_memory(remora_memory_store):
    assert isinstance(remora_memory_store(), MemoryBackend)


def test_sqlite(remora_sqlite_store, tmp_path):
    backend = remora_sqlite_store()
    assert isinstance(backend, SqliteBackend)
    assert Path(backend.path).is_relative_to(tmp_path)
    MADE.append(("sqlite-file", backend))


def test_zz_made_backends_were_closed():
    import sqlite3

    for kind, backend in MADE:
        if kind == "sqlite-file":
            try:
                backend.partition_row(0)
            except sqlite3.ProgrammingError:
                continue
            raise AssertionError("the fixture left an SQLite backend open")
"""


def write(project: Path, name: str, text: str) -> None:
    (project / name).write_text(textwrap.dedent(text))


def test_store_fixtures_of_each_kind(tmp_path: Path) -> None:
    write(tmp_path, "test_stores.py", STORE_TESTS)
    done = run_pytest(tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "5 passed, 1 skipped" in out  # memory and sqlite runs; postgres has no server
    assert "no PostgreSQL server configured: pass --remora-dsn or set REMORA_PG_DSN" in out

    narrowed = run_pytest(tmp_path, "--remora-store", "sqlite", "-k", "each_kind", "-rA")
    assert "PASSED test_stores.py::test_each_kind[sqlite]" in narrowed.stdout, narrowed.stdout
    assert "[memory]" not in narrowed.stdout and "[postgres]" not in narrowed.stdout


def test_without_a_server_ci_fails_instead_of_skipping(tmp_path: Path) -> None:
    write(tmp_path, "test_pg.py", "def test_pg(remora_postgres_store):\n    pass\n")
    assert run_pytest(tmp_path).returncode == 0  # skipped
    done = run_pytest(tmp_path, env={"REMORA_REQUIRE_SERVICES": "1"})
    assert done.returncode == 1
    assert "no PostgreSQL server configured" in done.stdout
    assert "(REMORA_REQUIRE_SERVICES=1)" in done.stdout


BLOB_TEST = """
from hypothesis import given, reproduce_failure, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule


@reproduce_failure({version!r}, b"AAAA")
@given(st.integers())
def test_function(x):
    pass


@reproduce_failure({version!r}, b"AAAA")
class Machine(RuleBasedStateMachine):
    @rule()
    def step(self):
        pass


TestMachine = Machine.TestCase
"""


def test_a_blob_from_another_hypothesis_version_gets_a_clear_message(tmp_path: Path) -> None:
    write(tmp_path, "test_blob.py", BLOB_TEST.format(version="6.0.0"))
    done = run_pytest(tmp_path)
    assert done.returncode == 1
    line = (
        f"this @reproduce_failure blob was printed by Hypothesis 6.0.0, but Hypothesis "
        f"{hypothesis.__version__} is installed"
    )
    assert done.stdout.count(line) == 2, done.stdout  # the function and the machine
    assert "remora sim-worker --replay FILE" in done.stdout
    assert "Traceback" not in done.stdout


def test_a_blob_of_the_installed_version_reaches_hypothesis(tmp_path: Path) -> None:
    """Planted the other way: the check does not stand in the way of a matching blob (the
    bogus blob then fails inside Hypothesis, which proves it got there)."""
    write(tmp_path, "test_blob.py", BLOB_TEST.format(version=hypothesis.__version__))
    done = run_pytest(tmp_path)
    assert "was printed by Hypothesis" not in done.stdout
    assert "DidNotReproduce" in done.stdout or "InvalidArgument" in done.stdout, done.stdout


def test_blob_version_problem() -> None:
    assert blob_version_problem(hypothesis.__version__) is None
    problem = blob_version_problem("1.2.3")
    assert problem is not None and "pip install 'hypothesis==1.2.3'" in problem
