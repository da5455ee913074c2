"""Remora's side of ``benchmarks/jobs_peers.py``: a no-op handler and a handler that stalls
on its first attempt (the benchmark SIGKILLs the worker running it)."""

from __future__ import annotations

import time

from remora import jobs


@jobs.handler("noop")
def noop(ctx: jobs.JobContext) -> None:
    """Does nothing: the benchmark measures the runtime, not the work."""


@jobs.handler("stall")
def stall(ctx: jobs.JobContext) -> str:
    """Sleeps (up to a minute) on its first attempt; a retry returns at once."""
    if ctx.token == 1:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not ctx.cancelled:
            time.sleep(0.02)
    return f"attempt {ctx.token}"
