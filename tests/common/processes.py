"""Running ``remora run`` as a real process, and interrupting or killing it mid-run (the
PostgreSQL progress probe is ``tests.postgres.services.pg_progress``)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOUND = 60.0  # seconds any one process may take before the test fails


def remora_run(src: Path, store_args: list[str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "remora", "run", str(src), *store_args, *extra],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def sqlite_progress(db: Path) -> Callable[[], int]:
    """Records durably processed so far (outbox + quarantine rows), read-only."""

    def count() -> int:
        if not db.exists():
            return 0
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
            try:
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM remora_outbox) "
                    "+ (SELECT count(*) FROM remora_quarantine)"
                ).fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            return 0  # not created yet
        return int(row[0]) if row else 0

    return count


def wait_for_progress(proc: subprocess.Popen[str], progress: Callable[[], int], n: int) -> int:
    """Wait until at least ``n`` records are durable; fails if the process ends first."""
    give_up = time.monotonic() + BOUND
    while True:
        done = progress()
        if done >= n:
            return done
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"remora run ended early ({proc.returncode}): {out}{err}")
        if time.monotonic() > give_up:
            proc.kill()
            raise AssertionError("remora run made no progress")
        time.sleep(0.005)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"remora run did not end: {out}{err}") from None
    return proc.returncode, out, err


def interrupt(
    proc: subprocess.Popen[str], progress: Callable[[], int], after: int, sig: signal.Signals
) -> tuple[int, str, str]:
    wait_for_progress(proc, progress, after)
    proc.send_signal(sig)
    return finish(proc)
