"""Example handlers for ``remora jobs`` (see docs/jobs.md):

remora jobs submit greet --payload '{"name": "Ada"}'
remora jobs worker --app examples.jobs.app --until-idle
"""

from __future__ import annotations

from typing import Any

from remora import jobs


@jobs.handler("greet")
def greet(ctx: jobs.JobContext) -> str:
    """Succeeds at once."""
    return f"hello, {ctx.payload['name']}"


@jobs.handler("count")
def count(ctx: jobs.JobContext) -> dict[str, Any]:
    """Works in steps, checkpointing each; a retry resumes after the last checkpoint."""
    total = int(ctx.payload.get("to", 3)) if isinstance(ctx.payload, dict) else 3
    step = max(1, ctx.max_progress // total)
    done = ctx.progress
    while done + step < ctx.max_progress:
        if ctx.cancelled:
            raise jobs.Cancelled()
        done += step
        ctx.advance(done, str(done))
        ctx.checkpoint()
    return {"counted": total, "resumed": ctx.resumed}


@jobs.handler("flaky")
def flaky(ctx: jobs.JobContext) -> str:
    """Stages some output, then fails (retryably) on its first attempt; succeeds on the
    next.  The failed attempt's staging is cleaned up."""
    if ctx.token == 1:
        ctx.advance(1, "partial output of a failing attempt")
        raise jobs.Retryable("first attempts always fail")
    return f"ok on attempt {ctx.token}"


@jobs.handler("resumable")
def resumable(ctx: jobs.JobContext) -> str:
    """Checkpoints half way and fails on its first attempt; the retry resumes from the
    checkpoint (taking over the staged half)."""
    half = ctx.max_progress // 2
    if ctx.progress < half:
        ctx.advance(half, "first half")
        ctx.checkpoint()
    if ctx.token == 1:
        raise jobs.Retryable("interrupted half way")
    before = (ctx.resumed_data or b"").decode()
    return f"resumed={ctx.resumed} from [{before}] on attempt {ctx.token}"


@jobs.handler("doomed")
def doomed(ctx: jobs.JobContext) -> str:
    """Fails permanently."""
    raise jobs.Permanent("this job can never succeed")


@jobs.handler("slow")
def slow(ctx: jobs.JobContext) -> str:
    """Waits for a cancel (polls ``ctx.cancelled``); ends after ~``seconds`` otherwise."""
    import time

    seconds = float(ctx.payload.get("seconds", 30)) if isinstance(ctx.payload, dict) else 30.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ctx.cancelled:
            raise jobs.Cancelled()
        time.sleep(0.02)
    return "slept"
