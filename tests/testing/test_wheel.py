"""Remora installs as a product: the built wheel, installed into fresh virtual environments
with no test kit, runs its commands.

* the base install (no extras): ``remora run`` on the example source and the ``--help`` of
  every command, and ``import remora.cli`` loads neither Hypothesis nor pytest;
* with ``[postgres,redis]`` (still no ``[testing]``): ``remora jobs submit`` and
  ``remora jobs worker --until-idle`` on SQLite, and the same import check.

Each environment is made without pip and filled by this interpreter's pip
(``pip --python``); it does not see the test environment's site-packages, so nothing of the
test kit leaks in.  Dependencies come from the package index, as for a user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("run", "status", "sim-worker", "sim-jobs", "show", "explore", "reduce", "jobs")
PIP = (sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check")
IGNORED = (".git", ".venv*", ".tox", "artifacts", "build", "*.egg-info", "__pycache__", ".*cache")
KIT_CHECK = (
    "import sys, remora.cli\n"
    "print(sorted({m.split('.')[0] for m in sys.modules} & {'hypothesis', 'pytest', '_pytest'}))"
)


def _run(
    args: list[str], cwd: Path | None = None, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(extra or {})
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # a copy: the build writes build/ and *.egg-info beside the code
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*IGNORED))
    built = _run([*PIP, "wheel", "--no-deps", "--wheel-dir", str(out), str(source)])
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("remora-*.whl")
    return found


def _environment(where: Path, requirement: str) -> Path:
    """A fresh virtual environment at ``where`` with ``requirement`` installed; its python."""
    venv.EnvBuilder(with_pip=False, clear=True).create(where)
    python = where / "bin" / "python"
    installed = _run([*PIP, "--python", str(python), "install", requirement])
    assert installed.returncode == 0, installed.stderr
    return python


def _no_kit(python: Path) -> None:
    listed = _run([str(python), "-m", "pip", "list"]) if (python.parent / "pip").exists() else None
    assert listed is None or "hypothesis" not in listed.stdout.lower()
    loaded = _run([str(python), "-c", KIT_CHECK])
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def test_the_base_install_runs_every_command(wheel: Path, tmp_path: Path) -> None:
    python = _environment(tmp_path / "base", str(wheel))
    remora = str(python.parent / "remora")
    assert _run([str(python), "-c", "import hypothesis"]).returncode != 0  # really absent
    # a base dependency: `remora jobs worker --metrics-port` runs on the base install
    assert _run([str(python), "-c", "import prometheus_client"]).returncode == 0
    _no_kit(python)
    for command in ("", *COMMANDS):
        shown = _run([remora, *([command] if command else []), "--help"])
        assert shown.returncode == 0, (command, shown.stderr)
        assert "Traceback" not in shown.stderr
    db = tmp_path / "state.sqlite3"
    ran = _run([remora, "run", str(ROOT / "examples" / "source"), "--db", str(db)], cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "partition" in ran.stdout
    status = _run([remora, "status", "--db", str(db)], cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    replayed = _run([remora, "sim-worker", "--seed", "3"], cwd=tmp_path)
    assert replayed.returncode in (0, 1), replayed.stderr  # a report either way, no traceback
    assert "Traceback" not in replayed.stderr and replayed.stdout


METRICS = ("--metrics-port", "0")


def test_the_service_extras_run_the_job_commands(wheel: Path, tmp_path: Path) -> None:
    python = _environment(tmp_path / "jobs", f"remora[postgres,redis] @ {wheel.as_uri()}")
    remora = str(python.parent / "remora")
    assert _run([str(python), "-c", "import psycopg, redis"]).returncode == 0
    assert _run([str(python), "-c", "import hypothesis"]).returncode != 0
    _no_kit(python)
    for sub in ("submit", "worker", "cancel", "status", "history", "dashboard", "reconcile"):
        shown = _run([remora, "jobs", sub, "--help"])
        assert shown.returncode == 0, (sub, shown.stderr)
    app = tmp_path / "wheelapp.py"
    app.write_text(
        "from remora import jobs\n\n\n"
        '@jobs.handler("greet")\n'
        "def greet(ctx: jobs.JobContext) -> str:\n"
        "    return f\"hello, {ctx.payload['name']}\"\n"
    )
    db = str(tmp_path / "jobs.sqlite3")
    payload = json.dumps({"name": "Ada"})
    submitted = _run(
        [remora, "jobs", "submit", "greet", "--db", db, "--id", "j1", "--payload", payload],
        cwd=tmp_path,
    )
    assert submitted.returncode == 0, submitted.stderr
    worked = _run(
        [*(remora, "jobs", "worker", "--db", db, "--app", "wheelapp", "--until-idle"), *METRICS],
        cwd=tmp_path,
        extra={"PYTHONPATH": str(tmp_path)},
    )
    assert worked.returncode == 0, worked.stderr
    assert "metrics at http://127.0.0.1:" in worked.stderr
    history = _run([remora, "jobs", "history", "j1", "--db", db, "--json"], cwd=tmp_path)
    assert history.returncode == 0 and '"end": "succeeded"' in history.stdout, history.stderr
    status = _run([remora, "jobs", "status", "--db", db, "--json"], cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "Succeeded" in status.stdout and "hello, Ada" in status.stdout
