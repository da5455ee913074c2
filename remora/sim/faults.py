"""The scripted fault hook: one :class:`~remora.faults.IOHook` for both halves.

The worker side's tests script the *n*-th call of a lifecycle operation since the last
:meth:`ScriptedFaults.reset`; a job run arms each step's fault selectors with
:meth:`ScriptedFaults.arm`, which also restarts the count (a job selector names the *n*-th
call of an operation within its step).  Either way a call is keyed by its operation — any
operation enum (:class:`remora.faults.Operation`, :class:`remora.jobs.io.JobOperation`) —
and its ordinal, and an unscripted call commits.

It lives here, not in :mod:`remora.testing`, because the simulations themselves run with it
(``remora sim-jobs`` on a plain install); :mod:`remora.testing.faults` re-exports it for
users' tests.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import TypeVar

from remora.clock import LogicalClock
from remora.context import Context
from remora.faults import COMMIT, At, FaultDecision, IOCall, IOReport

E = TypeVar("E", bound=enum.Enum)

Script = Mapping[tuple[E, int], FaultDecision]
"""(operation, n) → the decision for the *n*-th call of that operation (from 1), for any
operation enum ``E``."""


class ScriptedFaults:
    """A programmable hook: scripted decisions per (operation, call number).

    Unlisted calls commit.  ``delay_ms`` advances ``clock`` if one is given.  Every call and
    its report is recorded in :attr:`log` as ``(operation, n, outcome, effect_applied,
    observation)``; every call a script entry decided is also in :attr:`fired` as
    ``(operation, outcome)``.  :meth:`on_boundary` runs an action at a call's before/after
    boundary (an interleave point).
    """

    def __init__(
        self, script: Script[E] | None = None, *, clock: LogicalClock | None = None
    ) -> None:
        self.script: dict[tuple[enum.Enum, int], FaultDecision] = {}
        self.script.update((script or {}).items())
        self.clock = clock
        self.counts: dict[enum.Enum, int] = {}
        self.last: dict[enum.Enum, int] = {}
        self.log: list[tuple[str, int, str, bool | None, str]] = []
        self.fired: list[tuple[str, str]] = []
        self._current: dict[IOCall, int] = {}
        self.boundaries: dict[tuple[enum.Enum, int, At], Callable[[Context], None]] = {}

    def reset(self) -> None:
        """Count calls from 1 again (the script stays)."""
        self.counts.clear()

    def arm(self, script: Script[E]) -> None:
        """Replace the script and count from 1 again; :attr:`last` keeps the counts of the
        calls before (which operations a step made: the machines' reach)."""
        self.last, self.counts = self.counts, {}
        self.script = {}
        self.script.update(script.items())

    def on_boundary(
        self, operation: enum.Enum, n: int, at: At, action: Callable[[Context], None]
    ) -> None:
        self.boundaries[(operation, n, at)] = action

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        n = self.counts.get(call.operation, 0) + 1
        self.counts[call.operation] = n
        self._current[call] = n
        decision = self.script.get((call.operation, n))
        if decision is None:
            return COMMIT
        self.fired.append((call.operation.value, decision.outcome.value))
        if decision.delay_ms and self.clock is not None:
            self.clock.advance(decision.delay_ms)
        return decision

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None:
        action = self.boundaries.get((call.operation, self._current[call], at))
        if action is not None:
            action(ctx)

    def returned(self, call: IOCall, report: IOReport) -> None:
        n = self._current.pop(call)
        self.log.append(
            (
                call.operation.value,
                n,
                report.decision.outcome.value,
                report.effect_applied,
                report.observation.value,
            )
        )


__all__ = ["Script", "ScriptedFaults"]
