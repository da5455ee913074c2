"""The test tree: SQLite-only tests collect (and so run) on a machine without psycopg."""

from __future__ import annotations

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
