"""The test tree: SQLite-only tests collect (and so run) on a machine without psycopg, no
test module imports another (shared code lives in helper modules: ``tests/common``,
``tests/jobs/scenarios.py`` …), so each test module can be read, run and moved alone, and
the job runtime's tests have one home, ``tests/jobs/`` (README, "The test tree")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WITHOUT_PSYCOPG = (
    "import sys\n"
    "sys.modules['psycopg'] = None  # any import of psycopg now fails\n"
    "import pytest\n"
    "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))\n"
)


def collect_without_psycopg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PSYCOPG, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_everything_but_the_postgres_tests_collects_without_psycopg() -> None:
    done = collect_without_psycopg("--ignore=tests/postgres", "tests")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "tests/cli/test_run_interrupt.py::" in done.stdout  # SQLite process tests
    assert "tests/test_store_contract.py::" in done.stdout


def test_a_module_level_psycopg_import_would_be_caught(tmp_path: Path) -> None:
    """Planted: a SQLite test importing a helper that imports psycopg at module level."""
    planted = tmp_path / "test_planted.py"
    planted.write_text(
        "from tests.postgres.services import fresh_database\n\ndef test_x():\n    pass\n"
    )
    done = collect_without_psycopg(f"--rootdir={REPO}", str(planted))
    assert done.returncode != 0
    assert "psycopg" in done.stdout + done.stderr


def imported_test_modules(path: Path, root: Path) -> list[str]:
    """The test modules (``test_*.py`` files under ``root``, the ``tests`` package) that the
    file at ``path`` imports, absolutely (``tests.jobs.test_x``) or relatively."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [(0, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [(node.level, base)]
            names += [(node.level, f"{base}.{a.name}".lstrip(".")) for a in node.names]
        else:
            continue
        for level, name in names:
            parts = name.split(".") if name else []
            if level:
                anchor = path.parent
                for _ in range(level - 1):
                    anchor = anchor.parent
                target = anchor.joinpath(*parts)
            elif parts[:1] == ["tests"]:
                target = root.joinpath(*parts[1:])
            else:
                continue
            if target.name.startswith("test_") and target.with_suffix(".py").is_file():
                found.append(("." * level) + name)
    return sorted(set(found))


def imports_between_test_modules(root: Path) -> list[str]:
    return [
        f"{p.relative_to(root)} imports {name}"
        for p in sorted(root.rglob("test_*.py"))
        for name in imported_test_modules(p, root)
    ]


def test_no_test_module_imports_another() -> None:
    assert imports_between_test_modules(REPO / "tests") == []


def test_planted_a_test_module_importing_another_is_caught(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "test_a.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "jobs" / "test_b.py").write_text("from tests.jobs.test_a import test_x\n")
    (tmp_path / "test_c.py").write_text("from .jobs import test_a as A\n")
    (tmp_path / "test_d.py").write_text("from tests.common.support import records\n")  # fine
    (tmp_path / "jobs" / "helpers.py").write_text("def test_shared():\n    pass\n")
    (tmp_path / "test_e.py").write_text("from tests.jobs.helpers import test_shared\n")  # fine
    assert imports_between_test_modules(tmp_path) == [
        "jobs/test_b.py imports tests.jobs.test_a",
        "test_c.py imports .jobs.test_a",
    ]


JOB_RUNTIME = ("remora.jobs", "remora.sim.jobs", "remora.testing.job_machines")
"""What a job test imports: the runtime, its simulation, its state machines."""


def job_modules_outside_their_home(root: Path) -> list[str]:
    """Every module of the test tree ``root`` (tests and their helpers) that imports the job
    runtime, its simulation or its machines but does not live under ``jobs/``: the job
    tests have one home, ``tests/jobs/`` (their PostgreSQL and Redis ones included)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "jobs":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                base = node.module or ""
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                if any(name == m or name.startswith(m + ".") for m in JOB_RUNTIME):
                    found.append(f"{rel} imports {name}")
    return sorted(set(found))


def test_the_job_tests_live_in_tests_jobs() -> None:
    assert job_modules_outside_their_home(REPO / "tests") == []


def test_planted_a_job_test_outside_tests_jobs_is_caught(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "stateful").mkdir()
    (tmp_path / "jobs" / "test_a.py").write_text("from remora.jobs.worker import Worker\n")
    (tmp_path / "stateful" / "test_b.py").write_text(
        "from remora.testing.job_machines import JobRaceMachine\n"
    )
    (tmp_path / "stateful" / "helper.py").write_text("import remora.sim.jobs.run\n")
    (tmp_path / "test_c.py").write_text("from remora import jobs\n")
    (tmp_path / "test_d.py").write_text("from remora.sim import trace\n")  # fine
    assert job_modules_outside_their_home(tmp_path) == [
        "stateful/helper.py imports remora.sim.jobs.run",
        "stateful/test_b.py imports remora.testing.job_machines",
        "stateful/test_b.py imports remora.testing.job_machines.JobRaceMachine",
        "test_c.py imports remora.jobs",
    ]
