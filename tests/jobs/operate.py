"""Helpers of the tests that operate workers (``test_operating.py``, ``test_isolation.py``,
``test_worker_run.py``): stores in memory, waiting on a condition with a safety bound,
ending a worker process."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from remora.clock import MonotonicClock
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import open_sqlite
from remora.jobs.model import JobsConfig
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget, MemoryVault

SAFETY = 120.0  # seconds: a safety net only, never a speed assertion


def memory_stores(cfg: JobsConfig) -> Stores:
    """SQLite ``:memory:``, memory coordination, target and vault, on the real clock."""
    clock = MonotonicClock()
    return Stores(
        open_sqlite(":memory:"),
        MemoryCoordination(clock, cfg),
        MemoryTarget(),
        MemoryVault(),
        clock,
        cfg,
    )


def wait_for(cond: Any, what: str, timeout: float = SAFETY) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def end(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Wait for a worker process to exit: its exit code and stderr (the test fails if it
    does not exit within :data:`SAFETY`)."""
    try:
        _, err = proc.communicate(timeout=SAFETY)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the worker did not exit")
    return proc.returncode, err


__all__ = ["SAFETY", "end", "memory_stores", "wait_for"]
