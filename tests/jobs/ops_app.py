"""Handlers of tests/jobs/test_operating.py and tests/jobs/test_isolation.py: ones that hang
(ignoring cancellation), stop politely, die, or end in ways a pipe cannot carry."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from remora import jobs

#: Set by a test to let the hung handlers of its process return (they never end else).
RELEASE = threading.Event()


def _hang(ctx: Any) -> None:
    marker = ctx.payload.get("marker") if isinstance(ctx.payload, dict) else None
    if marker:  # the process that runs the handler: a child's, or the worker's own
        Path(f"{marker}.{ctx.token}").write_text(str(os.getpid()))
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


@jobs.handler("polite")
def polite(ctx: jobs.JobContext) -> str:
    """Runs until asked to stop (``ctx.cancelled``: a cancel, or its timeout overrun), says
    so in ``MARKER.stopped.TOKEN``, then stops cooperatively."""
    marker = ctx.payload["marker"]
    Path(f"{marker}.{ctx.token}").write_text(str(os.getpid()))
    while not ctx.cancelled:
        time.sleep(0.01)
    Path(f"{marker}.stopped.{ctx.token}").write_text(str(os.getpid()))
    raise jobs.Cancelled()


@jobs.handler("dies")
def dies(ctx: jobs.JobContext) -> str:
    """The first attempt stages half, checkpoints and then its process dies (``how``:
    ``exit``, ``segv`` or ``kill``); the next resumes from the checkpoint, writes a secret
    and returns what it resumed from — the whole ``JobContext`` API, through a pipe."""
    if ctx.token == 1:
        ctx.advance(1, "half")
        ctx.checkpoint()
        how = ctx.payload["how"]
        if how == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGSEGV if how == "segv" else signal.SIGKILL)
        time.sleep(60)
    assert ctx.resumed and ctx.progress == 1, (ctx.resumed, ctx.progress)
    data = ctx.resumed_data
    sequence = ctx.put_secret("s3cret")
    return f"{ctx.payload['how']}: resumed from {data!r} at {ctx.progress}, secret {sequence}"


class _Unpicklable(Exception):
    def __init__(self) -> None:
        super().__init__("carries a lock")
        self.lock = threading.Lock()


@jobs.handler("awkward")
def awkward(ctx: jobs.JobContext) -> Any:
    """The first attempt ends in what a pipe cannot carry (``end``): a return value that is
    not JSON, or an exception that cannot be pickled; the next succeeds."""
    if ctx.token == 1:
        if ctx.payload["end"] == "value":
            return object()
        raise _Unpicklable()
    return "plain at last"
