"""Controlled I/O: the seam where faults are injected.

Every modeled I/O call — source validation, ``claim``, ``observe``, ``process`` — runs
through :func:`controlled_call`, which consults an :class:`IOHook`:

1. :meth:`IOHook.decide` chooses the requested :class:`Outcome` (and may spend logical time
   for a ``delay_ms``);
2. :meth:`IOHook.boundary` runs *before* the atomic effect (an interleave point);
3. the effect runs — unless the outcome is ``abort`` — and is committed, or rolled back for
   ``unknown-aborted``;
4. :meth:`IOHook.boundary` runs *after* the atomic effect;
5. :meth:`IOHook.returned` learns what actually happened — also when the effect (or the
   hook) raised an exception that is no :class:`RemoraError`: that is reported as
   observation ``error`` with the exception in ``foreign`` (never as ``ok``), and its effect
   as unknown (``None``), since the call died somewhere inside it.

A storage fence or cancellation always wins over the requested outcome: a requested commit
may end fenced or canceled with no effect.  The hook therefore learns the *actual* effect and
observation separately from its choice.  Production uses :data:`NO_FAULTS`; the simulation
its own hook; tests and the job simulation :class:`remora.sim.faults.ScriptedFaults`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol, TypeVar

import attrs

from remora.context import Context
from remora.errors import Canceled, Fenced, InvalidInput, RemoraError, Unavailable, UnknownResult


class Operation(enum.Enum):
    VALIDATE = "validate"
    CLAIM = "claim"
    OBSERVE = "observe"
    PROCESS = "process"


class Outcome(enum.Enum):
    COMMIT = "commit"
    ABORT = "abort"
    UNKNOWN_COMMITTED = "unknown-committed"
    UNKNOWN_ABORTED = "unknown-aborted"


UNKNOWN_OUTCOMES = frozenset({Outcome.UNKNOWN_COMMITTED, Outcome.UNKNOWN_ABORTED})
"""Outcomes that only ``claim`` and ``process`` accept (they are writes)."""

OUTCOMES_FOR: dict[Operation, frozenset[Outcome]] = {
    Operation.VALIDATE: frozenset({Outcome.COMMIT, Outcome.ABORT}),
    Operation.OBSERVE: frozenset({Outcome.COMMIT, Outcome.ABORT}),
    Operation.CLAIM: frozenset(Outcome),
    Operation.PROCESS: frozenset(Outcome),
}


class At(enum.Enum):
    BEFORE = "before"
    AFTER = "after"


class Observation(enum.Enum):
    """What the caller saw."""

    OK = "ok"
    UNAVAILABLE = "unavailable"
    UNKNOWN = "unknown"
    FENCED = "fenced"
    CANCELED = "canceled"
    ERROR = "error"


@attrs.frozen
class FaultDecision:
    outcome: Outcome = Outcome.COMMIT
    delay_ms: int = 0
    selected: bool = False  # True when a fault selector chose this (vs. the default commit)


COMMIT = FaultDecision()


@attrs.frozen
class IOCall:
    """One call through the seam: its operation — any operation enum (the lifecycle's
    :class:`Operation`, the job runtime's own) — and the partition it concerns (0 where
    there is none)."""

    operation: enum.Enum
    partition: int


@attrs.frozen
class IOReport:
    """What actually happened in one controlled call."""

    decision: FaultDecision
    effect_applied: bool | None  # None: a real backend could not tell (lost reply)
    observation: Observation
    error: RemoraError | None
    foreign: Exception | None = None  # an exception that is not a RemoraError (a bug)


class IOHook(Protocol):
    def decide(self, call: IOCall, ctx: Context) -> FaultDecision: ...

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None: ...

    def returned(self, call: IOCall, report: IOReport) -> None: ...


class NoFaults:
    """The production hook: every call commits, nothing is recorded."""

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        return COMMIT

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None:
        return None

    def returned(self, call: IOCall, report: IOReport) -> None:
        return None


NO_FAULTS = NoFaults()

T = TypeVar("T")

Effect = Callable[[bool], T]
"""``effect(commit)`` performs the atomic effect; with ``commit=False`` it runs and then
rolls back.  It raises :class:`Fenced` when the store's fence refuses it."""


_OBSERVED_AS: tuple[tuple[type[RemoraError], Observation], ...] = (
    (Canceled, Observation.CANCELED),
    (Fenced, Observation.FENCED),
    (Unavailable, Observation.UNAVAILABLE),
    (UnknownResult, Observation.UNKNOWN),
)


def _observation_of(exc: RemoraError) -> Observation:
    return next((o for kind, o in _OBSERVED_AS if isinstance(exc, kind)), Observation.ERROR)


_EVERY = frozenset(Outcome)
"""What an operation not in :data:`OUTCOMES_FOR` accepts (built once, not per call)."""


def controlled_call(hook: IOHook, call: IOCall, ctx: Context, effect: Effect[T]) -> T:
    """Run ``effect`` as one modeled I/O call under ``hook`` (see the module docstring)."""
    decision = hook.decide(call, ctx)
    outcome = decision.outcome
    # Operations of other packages (e.g. remora.jobs) are not listed: they accept every outcome.
    op = call.operation
    accepted = OUTCOMES_FOR.get(op, _EVERY) if isinstance(op, Operation) else _EVERY
    if outcome in UNKNOWN_OUTCOMES and outcome not in accepted:
        raise InvalidInput(f"{call.operation.value} does not accept outcome {outcome.value}")
    applied: bool | None = False
    observation = Observation.OK
    error: RemoraError | None = None
    foreign: Exception | None = None
    try:
        ctx.check()
        hook.boundary(call, At.BEFORE, ctx)
        ctx.check()
        if outcome is Outcome.ABORT:
            hook.boundary(call, At.AFTER, ctx)
            raise Unavailable(f"{call.operation.value} unavailable")
        try:
            result = effect(outcome is not Outcome.UNKNOWN_ABORTED)
            applied = outcome is not Outcome.UNKNOWN_ABORTED
        except UnknownResult:
            applied = None
            raise
        finally:
            hook.boundary(call, At.AFTER, ctx)
        ctx.check()
        if outcome in UNKNOWN_OUTCOMES:
            raise UnknownResult(f"{call.operation.value} result unknown")
        return result
    except RemoraError as exc:
        observation, error = _observation_of(exc), exc
        raise
    except Exception as exc:
        observation, foreign = Observation.ERROR, exc
        if applied is False and outcome is not Outcome.ABORT:
            applied = None  # died inside the call: whether the effect landed is not known
        raise
    finally:
        hook.returned(call, IOReport(decision, applied, observation, error, foreign))


__all__ = [
    "Operation",
    "Outcome",
    "UNKNOWN_OUTCOMES",
    "OUTCOMES_FOR",
    "At",
    "Observation",
    "FaultDecision",
    "COMMIT",
    "IOCall",
    "IOReport",
    "IOHook",
    "NoFaults",
    "NO_FAULTS",
    "Effect",
    "controlled_call",
]
