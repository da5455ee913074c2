"""Time as an injected dependency.

The lifecycle never reads time or sleeps directly: it is given a :class:`Clock` and a
:data:`WaitFn`.  Production passes :class:`MonotonicClock` and :func:`real_wait`; the
simulator passes a :class:`LogicalClock` and a wait that advances it.  No branch of the
lifecycle knows which.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from remora.context import Context


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale (origin unspecified)."""
        ...


class MonotonicClock:
    """The production clock: :func:`time.monotonic`."""

    def now(self) -> float:
        return time.monotonic()


class LogicalClock:
    """A clock that moves only when told to, in whole milliseconds."""

    def __init__(self, start_ms: int = 0) -> None:
        self.ms = start_ms

    def now(self) -> float:
        return self.ms / 1000.0

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a logical clock cannot go backwards")
        self.ms += ms


WaitFn = Callable[["Context", float], None]
"""``wait(ctx, seconds)``: pause between retries.  Must return early when ``ctx`` is
canceled; the caller re-checks cancellation after every wakeup."""


def real_wait(ctx: Context, seconds: float) -> None:
    """Production wait: sleep, but wake as soon as the context is canceled."""
    ctx.sleep(seconds)


def logical_wait(clock: LogicalClock) -> WaitFn:
    """A wait that advances ``clock`` instead of sleeping."""

    def wait(ctx: Context, seconds: float) -> None:
        clock.advance(round(seconds * 1000))

    return wait
