"""Layering of ``remora.jobs`` and the ``remora jobs`` command line (embedded default)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from remora.cli import main

JOBS_DIR = Path(__file__).resolve().parents[2] / "remora" / "jobs"
REPO = Path(__file__).resolve().parents[2]


def imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_jobs_is_production_code() -> None:
    """No simulation, test double, oracle or Hypothesis; the spec port only from the
    refinement module."""
    for path in JOBS_DIR.glob("*.py"):
        for name in imports(path):
            assert not name.startswith(
                ("remora.sim", "remora.testing", "remora.oracle", "hypothesis", "tests")
            ), f"{path.name} imports {name}"
            if name.startswith("remora.protocol"):
                assert path.name == "refinement.py", f"{path.name} imports {name}"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remora", "jobs", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )


def test_embedded_end_to_end(tmp_path: Path) -> None:
    """The documented one-command run: a handful of example jobs on SQLite + in-process
    coordination, every one terminal as its handler says."""
    db = str(tmp_path / "jobs.sqlite3")
    cfg = json.dumps({"tick_ms": 100, "lease_ticks": 100, "reservation_ticks": 100})
    for handler, job in (("greet", "g"), ("count", "c"), ("flaky", "f"), ("doomed", "d")):
        extra = ["--config", cfg] if job == "g" else []
        out = run_cli(
            "submit",
            handler,
            "--db",
            db,
            "--id",
            job,
            "--payload",
            '{"name": "Ada", "to": 3}',
            *extra,
            cwd=REPO,
        )
        assert out.returncode == 0, out.stderr
    out = run_cli(
        "worker",
        "--db",
        db,
        "--app",
        "examples.jobs.app",
        "--concurrency",
        "2",
        "--until-idle",
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    out = run_cli("status", "--db", db, "--json", cwd=REPO)
    rows = {r["id"]: r for r in json.loads(out.stdout)["jobs"]}
    assert {k: r["phase"] for k, r in rows.items()} == {
        "g": "Succeeded",
        "c": "Succeeded",
        "f": "Succeeded",
        "d": "Failed",
    }
    assert rows["g"]["result"] == "hello, Ada"
    assert rows["f"]["attempts"] == 2
    out = run_cli("reconcile", "--db", db, cwd=REPO)
    assert out.returncode == 0 and out.stdout.strip().endswith("steps")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["submit", "greet", "--payload", "{not json"], "--payload is not JSON"),
        (["submit", "greet", "--id", "bad id!"], "job id 'bad id!'"),
        (["submit", "nope", "--app", "examples.jobs.app"], "no handler named 'nope'"),
        (["worker", "--app", "no.such.module"], "cannot import app module"),
        (["status", "missing"], "no such job: missing"),
        (["cancel", "missing"], "no job 'missing'"),
        (["submit", "greet", "--config", '{"max_attempts": 0}'], "--config"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    db = str(tmp_path / "j.sqlite3")
    if args[0] in ("status", "cancel"):  # they refuse a missing database: make one
        assert main(["jobs", "submit", "greet", "--db", db, "--id", "other"]) == 0
        capsys.readouterr()
    code = main(["jobs", *args[:1], "--db", db, *args[1:]])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


def test_unreachable_redis_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "jobs",
            "submit",
            "g",
            "--db",
            str(tmp_path / "j.sqlite3"),
            "--redis",
            "redis://127.0.0.1:9/0",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "cannot reach Redis" in err and err.count("\n") == 1


def test_one_embedded_worker_per_store(tmp_path: Path) -> None:
    """With in-process coordination a second worker process on the same SQLite file is
    refused (it would reap the first one's live attempts)."""
    import os
    import signal
    import time

    db = str(tmp_path / "jobs.sqlite3")
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "remora",
            "jobs",
            "worker",
            "--db",
            db,
            "--app",
            "examples.jobs.app",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        import fcntl

        lock = Path(db + ".worker-lock")
        deadline = time.monotonic() + 60
        while True:  # wait until the first worker holds the lock (probe without taking it)
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first worker never took the lock"
            if lock.exists():
                with lock.open("a") as f:
                    try:
                        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        break  # held by the first worker
                    fcntl.flock(f, fcntl.LOCK_UN)
            time.sleep(0.05)
        out = run_cli("worker", "--db", db, "--app", "examples.jobs.app", "--until-idle", cwd=REPO)
        assert out.returncode == 2, out.stderr
        assert "use --redis to run several" in out.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 0
