"""Handlers of the real-fault evidence tests (``tests/jobs/test_real_faults.py``).

``nap`` stages a first half, checkpoints, sleeps ``seconds`` (watching for a stop) and
returns a result naming its job and attempt — so the committed result shows which attempt
won, and a test can check it is the durable winner's."""

from __future__ import annotations

import time

from remora import jobs


@jobs.handler("nap")
def nap(ctx: jobs.JobContext) -> str:
    seconds = float(ctx.payload.get("seconds", 0.5)) if isinstance(ctx.payload, dict) else 0.5
    half = ctx.max_progress // 2
    if ctx.progress < half:
        ctx.advance(half, f"{ctx.job_id} half")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ctx.cancelled:
            raise jobs.Retryable("stopped")
        time.sleep(0.02)
    return winning_result(ctx.job_id, ctx.token)


def winning_result(job: str, token: int) -> str:
    return f"{job} by attempt {token}"
