"""Handlers of the visibility tests (status, history, metrics, the dashboard): the example
handlers (``greet``, ``count``, ``flaky``, ``doomed``…), the operating ones (``quick``,
``first_hangs`` with its 0.3 s timeout…), and ``crawl``, which runs for a while, checkpointing
as it goes (a job to see running)."""

from __future__ import annotations

import time

import examples.jobs.app  # noqa: F401  (registers its handlers)
import tests.jobs.ops_app  # noqa: F401  (registers its handlers)
from remora import jobs


@jobs.handler("crawl")
def crawl(ctx: jobs.JobContext) -> str:
    """Ten steps of ``payload["seconds"] / 10`` seconds each (default 3 s in all), staging
    and checkpointing each; stops when cancelled."""
    seconds = float(ctx.payload.get("seconds", 3)) if isinstance(ctx.payload, dict) else 3.0
    step = max(1, ctx.max_progress // 10)
    done = ctx.progress
    while done + step < ctx.max_progress:  # the output is the last step
        if ctx.cancelled:
            raise jobs.Cancelled()
        time.sleep(seconds / 10)
        done += step
        ctx.advance(done, f"{done}")
        ctx.checkpoint()
    time.sleep(seconds / 10)
    return f"crawled {ctx.max_progress}"
