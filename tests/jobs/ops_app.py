"""Handlers of tests/jobs/test_operating.py: ones that hang, ignoring cancellation."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from remora import jobs

#: Set by a test to let the hung handlers of its process return (they never end else).
RELEASE = threading.Event()


def _hang(ctx: Any) -> None:
    marker = ctx.payload.get("marker") if isinstance(ctx.payload, dict) else None
    if marker:
        Path(f"{marker}.{ctx.token}").write_text("started")
    while not RELEASE.is_set():  # ignores ctx.cancelled, as a stuck call would
        time.sleep(0.02)


@jobs.handler("hang")
def hang(ctx: jobs.JobContext) -> str:
    _hang(ctx)
    return "hung, then returned"


@jobs.handler("quick")
def quick(ctx: jobs.JobContext) -> str:
    return "quick"


@jobs.handler("first_hangs", timeout=0.3)
def first_hangs(ctx: jobs.JobContext) -> str:
    """Hangs on its first attempt (ended by the handler timeout); returns on the next.  The
    hung attempt tries to stage its output once released: refused."""
    if ctx.token == 1:
        _hang(ctx)
        ctx.stage("from the timed-out attempt")
        return "from the timed-out attempt"
    return f"attempt {ctx.token}"
