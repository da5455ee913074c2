"""Time as an injected dependency: one :class:`Clock` gives the time, timers and waiting.

The lifecycle never reads time or sleeps directly: it is given a clock, and every wait goes
through :meth:`remora.context.Context.sleep`, which waits on its context's clock.
Production passes :class:`MonotonicClock` (a real wait that a cancellation ends early); the
simulator passes a :class:`LogicalClock`, whose waits advance logical time instead of
sleeping.  No branch of the lifecycle knows which.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol

Disarm = Callable[[], None]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale (origin unspecified)."""
        ...

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Disarm:
        """Run ``callback`` once ``seconds`` have passed on this clock, unless the returned
        function is called first.  This is how an operation budget interrupts blocked I/O."""
        ...

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        """Wait ``seconds`` on this clock, or less if ``wake`` is set (a cancellation);
        True if the whole time passed without ``wake`` being set."""
        ...


class _Timer:
    __slots__ = ("callback", "seq", "when")

    def __init__(self, when: float, seq: int, callback: Callable[[], None]) -> None:
        self.when = when
        self.seq = seq
        self.callback: Callable[[], None] | None = callback

    def __lt__(self, other: _Timer) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)


class _Timers:
    """A heap of timers; disarmed ones are dropped lazily (and compacted in bulk)."""

    def __init__(self) -> None:
        self.heap: list[_Timer] = []
        self.seq = itertools.count()
        self.disarmed = 0

    def push(self, when: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(when, next(self.seq), callback)
        heapq.heappush(self.heap, timer)
        return timer

    def disarm(self, timer: _Timer) -> None:
        if timer.callback is not None:
            timer.callback = None
            self.disarmed += 1
            if self.disarmed > 64 and self.disarmed * 2 > len(self.heap):
                self.heap = [t for t in self.heap if t.callback is not None]
                heapq.heapify(self.heap)
                self.disarmed = 0

    def _drop_disarmed(self) -> None:
        while self.heap and self.heap[0].callback is None:
            heapq.heappop(self.heap)
            self.disarmed -= 1

    def pop_due(self, now: float) -> Callable[[], None] | None:
        self._drop_disarmed()
        if self.heap and self.heap[0].when <= now:
            return heapq.heappop(self.heap).callback
        return None

    def next_due(self) -> float | None:
        self._drop_disarmed()
        return self.heap[0].when if self.heap else None


class _Watchdog:
    """One daemon thread that fires every :class:`MonotonicClock` timer."""

    _instance: _Watchdog | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.timers = _Timers()
        threading.Thread(target=self._run, name="remora-watchdog", daemon=True).start()

    @classmethod
    def shared(cls) -> _Watchdog:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def arm(self, when: float, callback: Callable[[], None]) -> Disarm:
        with self.cond:
            entry = self.timers.push(when, callback)
            if self.timers.heap[0] is entry:
                self.cond.notify()

        def disarm() -> None:
            with self.cond:
                self.timers.disarm(entry)

        return disarm

    def _run(self) -> None:
        while True:
            with self.cond:
                callback = self.timers.pop_due(time.monotonic())
                if callback is None:
                    due = self.timers.next_due()
                    self.cond.wait(None if due is None else max(0.0, due - time.monotonic()))
                    continue
            with contextlib.suppress(Exception):  # a timer must never kill the watchdog
                callback()


class MonotonicClock:
    """The production clock: :func:`time.monotonic`; timers fire on a shared watchdog."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Disarm:
        return _Watchdog.shared().arm(time.monotonic() + seconds, callback)

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        """A real wait on ``wake``: returns as soon as it is set."""
        return not wake.wait(max(0.0, seconds))


class EpochClock(MonotonicClock):
    """:class:`MonotonicClock` anchored to the epoch: ``time.monotonic()`` plus the offset
    of the wall clock when the process started, so it never goes backwards within a process
    yet reads as seconds since 1970 — what the job commands inject where the durable store
    has no clock of its own (SQLite), so that the times of jobs (submitted, started,
    finished, a delayed job's due time) are dates a person can read.  Processes on one host
    agree to within any step of the wall clock between their starts."""

    _offset = time.time() - time.monotonic()

    def now(self) -> float:
        return time.monotonic() + self._offset


class LogicalClock:
    """A clock that moves only when told to, in whole milliseconds.  Its timers fire,
    deterministically, inside the :meth:`advance` that passes their time."""

    def __init__(self, start_ms: int = 0) -> None:
        self.ms = start_ms
        self._timers = _Timers()

    def now(self) -> float:
        return self.ms / 1000.0

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a logical clock cannot go backwards")
        self.ms += ms
        while (callback := self._timers.pop_due(self.now())) is not None:
            callback()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Disarm:
        entry = self._timers.push(self.now() + seconds, callback)
        return lambda: self._timers.disarm(entry)

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        """Advance logical time by ``seconds`` (rounded to whole milliseconds) instead of
        sleeping.  The whole time always passes — logical time is what the schedule says it
        is — but a timer firing on the way (an operation budget) may set ``wake``: then the
        wait reports that it was cut short."""
        self.advance(round(seconds * 1000))
        return not wake.is_set()


__all__ = [
    "Disarm",
    "Clock",
    "MonotonicClock",
    "EpochClock",
    "LogicalClock",
]
