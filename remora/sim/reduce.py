"""The trace reducer: delete steps and fault choices while the failure stays the same.

It preserves the source history and the configuration, keeps every candidate structurally
valid (it is re-validated exactly like a file), and respects lifetime dependencies: deleting
a ``start`` deletes every later step of that lifetime, and deleting a replacement deletes the
steps of the lifetime it would have started.  It is a greedy delta-debugging loop — chunks of
steps from large to single, then selectors, interleaves and delays — repeated until nothing
more can go.  It does not promise a globally minimal trace.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from remora.errors import InvalidInput
from remora.sim.report import run_trace
from remora.sim.trace import FaultSelector, Step, Trace, TraceError, validate

FailureOf = Callable[[Trace], str | None]


def replay_failure(trace: Trace) -> str | None:
    return run_trace(trace).failure


def _without_lifetimes(steps: list[Step], lifetimes: set[int]) -> list[Step]:
    """Drop steps of ``lifetimes`` and, transitively, of replacements they would reserve."""
    kept = list(steps)
    while True:
        dropped = [s for s in kept if s.worker in lifetimes]
        kept = [s for s in kept if s.worker not in lifetimes]
        more = {
            f.interleave.replacement
            for s in dropped
            for f in s.faults
            if f.interleave is not None and f.interleave.replacement is not None
        } - lifetimes
        if not more:
            return kept
        lifetimes |= more


def _close(steps: list[Step], original: list[Step]) -> list[Step]:
    """Remove steps whose lifetime lost its origin (its start or its replacement)."""
    origins = {s.worker for s in steps if s.actor == "start"} | {
        f.interleave.replacement
        for s in steps
        for f in s.faults
        if f.interleave is not None and f.interleave.replacement is not None
    }
    had = {s.worker for s in original if s.actor == "start"} | {
        f.interleave.replacement
        for s in original
        for f in s.faults
        if f.interleave is not None and f.interleave.replacement is not None
    }
    return _without_lifetimes(steps, had - origins)


class Reducer:
    def __init__(self, trace: Trace, failure_of: FailureOf = replay_failure) -> None:
        self.original = trace
        self.failure_of = failure_of
        self.failure = failure_of(trace)
        if self.failure is None:
            raise InvalidInput("the trace does not fail; there is nothing to reduce")
        self.best = trace
        self.tries = 0

    def _accept(self, steps: list[Step]) -> bool:
        candidate = attrs.evolve(self.best, steps=tuple(_close(steps, list(self.best.steps))))
        if candidate == self.best:
            return False
        try:
            validate(candidate)
        except TraceError:
            return False
        self.tries += 1
        if self.failure_of(candidate) != self.failure:
            return False
        self.best = candidate
        return True

    def _delete_chunks(self) -> bool:
        progress = False
        size = max(1, len(self.best.steps) // 2)
        while size >= 1:
            i = 0
            while i < len(self.best.steps):
                steps = list(self.best.steps)
                if self._accept(steps[:i] + steps[i + size :]):
                    progress = True
                else:
                    i += size
            size //= 2
        return progress

    def _simplify_selector(self, i: int, j: int) -> bool:
        """Try to delete selector j of step i, else drop its interleave, else its delay."""
        step = self.best.steps[i]
        sel = step.faults[j]
        options: list[FaultSelector | None] = [None]
        if sel.interleave is not None:
            options.append(attrs.evolve(sel, interleave=None))
        if sel.delay_ms:
            options.append(attrs.evolve(sel, delay_ms=0))
        for option in options:
            faults = list(step.faults)
            if option is None:
                del faults[j]
            else:
                faults[j] = option
            steps = list(self.best.steps)
            steps[i] = attrs.evolve(step, faults=tuple(faults))
            if self._accept(steps):
                return True
        return False

    def _simplify_faults(self) -> bool:
        progress = False
        i = 0
        while i < len(self.best.steps):
            j = 0
            while j < len(self.best.steps[i].faults):
                if self._simplify_selector(i, j):
                    progress = True  # every accepted change makes the trace strictly simpler
                    if i >= len(self.best.steps):
                        break
                else:
                    j += 1
            i += 1
        return progress

    def run(self) -> Trace:
        while self._delete_chunks() | self._simplify_faults():
            pass
        return self.best


def reduce_trace(trace: Trace, failure_of: FailureOf = replay_failure) -> Trace:
    """A smaller trace with the same failure string (see the module docstring)."""
    return Reducer(trace, failure_of).run()


__all__ = [
    "FailureOf",
    "replay_failure",
    "Reducer",
    "reduce_trace",
]
