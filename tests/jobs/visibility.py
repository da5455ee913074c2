"""Shared by the visibility tests (status, history, metrics, the dashboard): running
``remora jobs`` as a real process, a long-running one and its address, and a Prometheus
exposition as samples."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
APP = "tests.jobs.vis_app"
#: Ticks of 100 ms, leases and reservations of 2 s: quick runs.
FAST = '{"tick_ms": 100, "lease_ticks": 20, "reservation_ticks": 20}'
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def jobs(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``remora jobs ARGS`` run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "remora", "jobs", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


def ok(*args: str) -> str:
    """``remora jobs ARGS``, which must exit 0: its stdout."""
    out = jobs(*args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def work(db: str, *queues: str, extra: Iterable[str] = ()) -> str:
    """A worker of :data:`APP` on ``db`` (serving ``queues``) until it is idle."""
    serve = [a for q in queues for a in ("--queue", q)]
    return ok("worker", "--db", db, "--app", APP, "--until-idle", "--log-format", "none",
              *serve, *extra)  # fmt: skip


def status(db: str, *ids: str) -> dict[str, dict[str, Any]]:
    """``status --json``, by job id."""
    return {r["id"]: r for r in json.loads(ok("status", "--db", db, *ids, "--json"))["jobs"]}


def started(args: list[str], pattern: str) -> tuple[subprocess.Popen[str], str]:
    """A long-running ``remora jobs`` process, and what ``pattern``'s group finds on the
    first line it writes on stderr (the address it serves on)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "remora", "jobs", *args],
        cwd=REPO,
        env=ENV,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(pattern, line)
    if m is None:
        stop(proc)
        raise AssertionError(line)
    return proc, m.group(1)


def stop(proc: subprocess.Popen[Any]) -> int:
    """SIGTERM, then (after a minute) SIGKILL; the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return int(proc.returncode)


def samples(families: Iterable[Any]) -> dict[str, float]:
    """Prometheus metric families as ``{"name{label=value,…}": value}``."""
    out = {}
    for family in families:
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out
