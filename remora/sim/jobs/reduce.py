"""The job-trace reducer: delete steps and fault choices while the failure stays the same.

A greedy delta-debugging loop over a ``job-schedule-v1`` trace — chunks of steps from large
to single, then single fault selectors — repeated until nothing more can go.  Every
candidate is re-validated exactly like a file and replayed through the shared executor
(:func:`remora.sim.jobs.run.run_trace`), with the trace's planted mutation.  A step whose
worker was never started (its ``start`` was deleted) is simply refused at replay, so no
dependency bookkeeping is needed.  It does not promise a globally minimal trace.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from remora.errors import InvalidInput
from remora.sim.jobs.run import run_trace
from remora.sim.jobs.trace import JobStep, JobTrace, TraceError, validate

FailureOf = Callable[[JobTrace], str | None]


def replay_failure(trace: JobTrace) -> str | None:
    return run_trace(trace).failure


class JobReducer:
    def __init__(self, trace: JobTrace, failure_of: FailureOf = replay_failure) -> None:
        self.failure_of = failure_of
        self.failure = failure_of(trace)
        if self.failure is None:
            raise InvalidInput("the trace does not fail: nothing to reduce")
        self.best = trace
        self.tries = 0

    def _try(self, steps: list[JobStep]) -> bool:
        try:
            candidate = validate(attrs.evolve(self.best, steps=tuple(steps)))
        except TraceError:
            return False
        self.tries += 1
        if self.failure_of(candidate) == self.failure:
            self.best = candidate
            return True
        return False

    def run(self) -> JobTrace:
        changed = True
        while changed:
            changed = False
            size = max(1, len(self.best.steps) // 2)
            while size >= 1:
                i = 0
                while i < len(self.best.steps):
                    steps = list(self.best.steps)
                    if self._try(steps[:i] + steps[i + size :]):
                        changed = True
                    else:
                        i += size
                size //= 2
            for i in range(len(self.best.steps)):
                for k in range(len(self.best.steps[i].faults)):
                    steps = list(self.best.steps)
                    if k >= len(steps[i].faults):
                        break
                    fs = steps[i].faults[:k] + steps[i].faults[k + 1 :]
                    steps[i] = attrs.evolve(steps[i], faults=fs)
                    if self._try(steps):
                        changed = True
        return self.best


__all__ = ["JobReducer", "replay_failure"]
