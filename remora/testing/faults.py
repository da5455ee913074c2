"""A programmable fault hook for tests and examples."""

from __future__ import annotations

from collections.abc import Callable

from remora.clock import LogicalClock
from remora.context import Context
from remora.faults import COMMIT, At, FaultDecision, IOCall, IOReport, Operation


class ScriptedFaults:
    """A simple programmable hook for tests and examples.

    ``script`` maps (operation, n) — the n-th call of that operation since the last
    :meth:`reset`, counting from 1 — to a decision.  Unlisted calls commit.  ``delay_ms``
    advances ``clock`` if one is given.  Every call and its report is recorded in
    :attr:`log` as ``(operation, n, outcome, effect_applied, observation)``.
    """

    def __init__(
        self,
        script: dict[tuple[Operation, int], FaultDecision] | None = None,
        *,
        clock: LogicalClock | None = None,
    ) -> None:
        self.script = dict(script or {})
        self.clock = clock
        self.counts: dict[Operation, int] = {}
        self.log: list[tuple[str, int, str, bool | None, str]] = []
        self._current: dict[IOCall, int] = {}
        self.boundaries: dict[tuple[Operation, int, At], Callable[[Context], None]] = {}

    def reset(self) -> None:
        self.counts.clear()

    def on_boundary(
        self, operation: Operation, n: int, at: At, action: Callable[[Context], None]
    ) -> None:
        self.boundaries[(operation, n, at)] = action

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        n = self.counts.get(call.operation, 0) + 1
        self.counts[call.operation] = n
        self._current[call] = n
        decision = self.script.get((call.operation, n), COMMIT)
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
