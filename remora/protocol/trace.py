"""Rendering states and action sequences in TLA+ terms, as text and JSON.

The JSON form of a counterexample (``remora-protocol-trace-v1``) is shared by the explorer
and the Hypothesis walks::

    {
      "format": "remora-protocol-trace-v1",
      "config": {"name": "tiny", "constants": {...}},
      "violation": {"kind": "invariant", "name": "StateConsistency", "detail": "..."},
      "steps": [
        {"index": 0, "action": "Init", "params": {}, "state": {<every variable>}},
        {"index": 1, "action": "Reserve", "params": {"j": "j1", "w": "w1"},
         "changes": {"queued": {"j1": false}, "reservation": {"j1": "w1"}}},
        ...
      ],
      "cycle_start": null
    }

``changes`` holds the new value of every variable the step changed.  For a liveness
counterexample ``cycle_start`` is the index of the first state of the cycle: the behaviour
is ``steps[0..]`` followed by ``steps[cycle_start+1..]`` forever (the last state's successor
is ``steps[cycle_start]``'s state; a cycle of length zero means stuttering forever).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from remora.protocol.config import constants_to_mapping
from remora.protocol.errors import ProtocolError
from remora.protocol.spec import (
    ATTEMPT_STATE_NAMES,
    CREDENTIAL_INTENT_STATE_NAMES,
    LEASE_STATE_NAMES,
    LINK_STATE_NAMES,
    OUTCOME_NAMES,
    PHASE_NAMES,
    SERVICE_NAMES,
    STAGE_STATE_NAMES,
    VARIABLES,
    VAULT_SECRET_STATE_NAMES,
    WORKER_STATE_NAMES,
    NoAttempt,
    NoWorker,
    Remora,
    State,
    Step,
)

TRACE_FORMAT = "remora-protocol-trace-v1"

#: TLA+ parameter names of every action (and their kinds) for rendering ``params``.
ACTION_PARAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "Enqueue": (("j", "job"),),
    "Reserve": (("j", "job"), ("w", "worker")),
    "AuthorizeAttempt": (("j", "job"), ("w", "worker")),
    "ActivateAttempt": (("a", "attempt"),),
    "RenewLease": (("a", "attempt"),),
    "Tick": (),
    "ExpireLease": (("a", "attempt"),),
    "ExpireReservation": (("j", "job"),),
    "LoseCoordinationState": (),
    "DropLink": (("w", "worker"), ("service", "service")),
    "RestoreLink": (("w", "worker"), ("service", "service")),
    "CrashWorker": (("w", "worker"),),
    "StartIncarnation": (("w", "worker"),),
    "ReleaseReservation": (("j", "job"),),
    "ReapLostAttempt": (("a", "attempt"),),
    "ScheduleRetry": (("j", "job"),),
    "RequestCancel": (("j", "job"),),
    "FinalizeCancel": (("j", "job"),),
    "PublishCancelNotice": (("j", "job"),),
    "CooperativeStop": (("a", "attempt"),),
    "ReleaseLease": (("a", "attempt"),),
    "ClearStaleLiveProgress": (("j", "job"),),
    "CleanTerminalCoordination": (("j", "job"),),
    "AdvanceAttempt": (("a", "attempt"), ("amount", "int")),
    "PersistCheckpoint": (("a", "attempt"),),
    "InvalidateCheckpoint": (("j", "job"),),
    "ReportProgress": (("a", "attempt"),),
    "SendOutcome": (("a", "attempt"), ("outcome", "outcome")),
    "AcceptSuccess": (("a", "attempt"),),
    "AcceptPermanentFailure": (("a", "attempt"),),
    "AcceptRetryableFailureWithBudget": (("a", "attempt"),),
    "AcceptRetryableFailureExhausted": (("a", "attempt"),),
    "RejectOutcome": (("a", "attempt"),),
    "CleanupStage": (("a", "attempt"),),
    "PrepareCredentialIntent": (("c", "intent"),),
    "BeginCredentialWrite": (("c", "intent"),),
    "CompleteCredentialWrite": (("c", "intent"),),
    "RecordCredentialWrite": (("c", "intent"),),
    "FenceFailedCredentialWrite": (("c", "intent"),),
    "CommitCredentialVersion": (("c", "intent"),),
    "ClaimCredentialCleanup": (("c", "intent"),),
    "DestroyClaimedCredentialSecret": (("c", "intent"),),
    "AbandonFencedCredentialIntent": (("c", "intent"),),
    "Done": (),
}

_ENUM_NAMES: dict[str, tuple[str, ...]] = {
    "phase": PHASE_NAMES,
    "leaseState": LEASE_STATE_NAMES,
    "workerState": WORKER_STATE_NAMES,
    "attemptState": ATTEMPT_STATE_NAMES,
    "stageState": STAGE_STATE_NAMES,
    "pendingOutcome": OUTCOME_NAMES,
    "credentialIntentState": CREDENTIAL_INTENT_STATE_NAMES,
    "vaultSecretState": VAULT_SECRET_STATE_NAMES,
}
_ATTEMPT_VALUED = frozenset(
    {"authority", "committedAttempt", "checkpointStageOwner", "liveProgressAttempt"}
)
_WORKER_VALUED = frozenset({"reservation", "attemptWorker"})
_JOB_DOMAIN = frozenset(
    {
        "phase",
        "cancelRequested",
        "currentToken",
        "authority",
        "dispatchNeeded",
        "committedAttempt",
        "checkpoint",
        "checkpointStageOwner",
        "checkpointValid",
        "queued",
        "reservation",
        "reservationAge",
        "cancelNotice",
        "liveProgress",
        "liveProgressAttempt",
    }
)
_ATTEMPT_DOMAIN = frozenset(
    {
        "leaseState",
        "leaseAge",
        "attemptState",
        "attemptWorker",
        "attemptProgress",
        "initialProgress",
        "resumedFromCheckpoint",
        "stageState",
        "pendingOutcome",
    }
)
_INTENT_DOMAIN = frozenset(
    {"credentialIntentState", "vaultSecretState", "credentialVersionDurable"}
)


class TraceError(ProtocolError):
    """A trace document could not be read or does not replay through the spec."""


class Renderer:
    """Turns index-encoded values of a :class:`Remora` instance into TLA+ spellings."""

    def __init__(self, model: Remora) -> None:
        self.m = model
        k = model.constants
        self.jobs = k.Jobs
        self.workers = k.Workers

    def job(self, j: int) -> str:
        return self.m.constants.NoJob if j < 0 else self.jobs[j]

    def worker(self, w: int) -> str:
        return self.m.constants.NoWorker if w == NoWorker else self.workers[w]

    def attempt(self, a: int) -> str:
        if a == NoAttempt:
            return f"[job |-> {self.m.constants.NoJob}, token |-> 0]"
        return f"[job |-> {self.job(self.m.JobOf(a))}, token |-> {self.m.TokenOf(a)}]"

    def intent(self, c: int) -> str:
        n = self.m.MaxCredentialIntents
        return f"[job |-> {self.job(c // n)}, sequence |-> {c % n + 1}]"

    def value(self, var: str, v: Any) -> Any:
        if var in _ENUM_NAMES:
            return _ENUM_NAMES[var][v]
        if var in _ATTEMPT_VALUED:
            return self.attempt(v)
        if var in _WORKER_VALUED:
            return self.worker(v)
        return v

    def variable(self, var: str, value: Any) -> Any:
        """The JSON rendering of one variable's value."""
        if var in ("coordLossCount", "partitionCount"):
            return value
        if var == "workerState":
            return {self.worker(w): WORKER_STATE_NAMES[x] for w, x in enumerate(value)}
        if var == "links":
            return {
                self.worker(w): {SERVICE_NAMES[i]: LINK_STATE_NAMES[x] for i, x in enumerate(row)}
                for w, row in enumerate(value)
            }
        if var in _JOB_DOMAIN:
            return {self.job(j): self.value(var, x) for j, x in enumerate(value)}
        if var in _ATTEMPT_DOMAIN:
            return {self.attempt(a): self.value(var, x) for a, x in enumerate(value)}
        if var in _INTENT_DOMAIN:
            return {self.intent(c): self.value(var, x) for c, x in enumerate(value)}
        raise TraceError(f"unknown variable {var}")

    def state(self, s: State) -> dict[str, Any]:
        return {var: self.variable(var, getattr(s, var)) for var in VARIABLES}

    def changes(self, s: State, t: State) -> dict[str, Any]:
        return {
            var: self.variable(var, getattr(t, var))
            for var in VARIABLES
            if getattr(s, var) != getattr(t, var)
        }

    def params(self, step: Step) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for (pname, kind), v in zip(ACTION_PARAMS[step.name], step.params, strict=True):
            if kind == "job":
                out[pname] = self.job(v)
            elif kind == "worker":
                out[pname] = self.worker(v)
            elif kind == "attempt":
                out[pname] = self.attempt(v)
            elif kind == "intent":
                out[pname] = self.intent(v)
            elif kind == "service":
                out[pname] = SERVICE_NAMES[v]
            elif kind == "outcome":
                out[pname] = OUTCOME_NAMES[v]
            else:
                out[pname] = v
        return out

    def step_label(self, step: Step) -> str:
        p = self.params(step)
        if not p:
            return step.name
        return f"{step.name}({', '.join(str(v) for v in p.values())})"

    def parse_step(self, name: str, params: dict[str, Any]) -> Step:
        """Inverse of :meth:`params`: a JSON step back to an index-encoded :class:`Step`."""
        if name not in ACTION_PARAMS:
            raise TraceError(f"unknown action {name!r}")
        spec = ACTION_PARAMS[name]
        if set(params) != {p for p, _ in spec}:
            raise TraceError(f"{name}: expected parameters {[p for p, _ in spec]}")
        values: list[int] = []
        for pname, kind in spec:
            raw = params[pname]
            table: Sequence[str]
            if kind == "job":
                table = self.jobs
            elif kind == "worker":
                table = self.workers
            elif kind == "attempt":
                table = [self.attempt(a) for a in self.m.AttemptIds]
            elif kind == "intent":
                table = [self.intent(c) for c in self.m.CredentialIntents]
            elif kind == "service":
                table = SERVICE_NAMES
            elif kind == "outcome":
                table = OUTCOME_NAMES
            else:
                if not isinstance(raw, int):
                    raise TraceError(f"{name}: {pname} must be an integer")
                values.append(raw)
                continue
            if raw not in table:
                raise TraceError(f"{name}: {pname}={raw!r} is not one of {list(table)}")
            values.append(list(table).index(raw))
        return Step(name, tuple(values))


def trace_document(
    model: Remora,
    config_name: str,
    states: Sequence[State],
    steps: Sequence[Step],
    violation: dict[str, Any],
    cycle_start: int | None = None,
) -> dict[str, Any]:
    """Build the ``remora-protocol-trace-v1`` document for a sequence of states.

    ``steps[i]`` leads from ``states[i]`` to ``states[i + 1]``.
    """
    r = Renderer(model)
    out: list[dict[str, Any]] = [
        {"index": 0, "action": "Init", "params": {}, "state": r.state(states[0])}
    ]
    for i, step in enumerate(steps):
        out.append(
            {
                "index": i + 1,
                "action": step.name,
                "params": r.params(step),
                "changes": r.changes(states[i], states[i + 1]),
            }
        )
    return {
        "format": TRACE_FORMAT,
        "config": {"name": config_name, "constants": constants_to_mapping(model.constants)},
        "violation": violation,
        "steps": out,
        "cycle_start": cycle_start,
    }


def replay(model: Remora, document: dict[str, Any]) -> tuple[list[State], list[Step]]:
    """Replay a trace document through the spec; every step must be enabled and match."""
    if document.get("format") != TRACE_FORMAT:
        raise TraceError("not a remora-protocol-trace-v1 document")
    r = Renderer(model)
    raw_steps = document["steps"]
    inits = model.Init()
    s = inits[0]
    if r.state(s) != raw_steps[0]["state"]:
        raise TraceError("the initial state does not match Init")
    states = [s]
    steps: list[Step] = []
    for raw in raw_steps[1:]:
        step = r.parse_step(raw["action"], raw["params"])
        t = model.apply(s, step)
        if t is None:
            raise TraceError(f"step {raw['index']}: {r.step_label(step)} is not enabled")
        if r.changes(s, t) != raw["changes"]:
            raise TraceError(f"step {raw['index']}: changes differ from the spec's")
        states.append(t)
        steps.append(step)
        s = t
    return states, steps


def format_trace(document: dict[str, Any]) -> str:
    """Human-readable rendering of a trace document (TLC-like)."""
    lines: list[str] = []
    cycle = document.get("cycle_start")
    for raw in document["steps"]:
        i = raw["index"]
        params = ", ".join(f"{k}={v}" for k, v in raw["params"].items())
        label = f"{raw['action']}({params})" if params else raw["action"]
        marker = "  <- cycle starts here" if cycle is not None and i == cycle else ""
        lines.append(f"State {i + 1}: <{label}>{marker}")
        body = raw.get("state", raw.get("changes", {}))
        for var, val in body.items():
            lines.append(f"  /\\ {var} = {_fmt(val)}")
    if cycle is not None:
        if cycle == len(document["steps"]) - 1:
            lines.append(f"State {len(document['steps']) + 1}: Stuttering")
        else:
            lines.append(f"Back to state {cycle + 1}")
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, dict):
        if not v:
            return "<<>>"
        if set(v) <= set(SERVICE_NAMES):  # a record [Services -> LinkStates]
            return "[" + ", ".join(f"{k} |-> {_fmt(x)}" for k, x in v.items()) + "]"
        return "(" + " @@ ".join(f"{k} :> {_fmt(x)}" for k, x in v.items()) + ")"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str) and not v.startswith("["):
        return f'"{v}"' if v[0].isupper() and v not in ("NoJob", "NoWorker") else v
    return str(v)


__all__ = [
    "TRACE_FORMAT",
    "ACTION_PARAMS",
    "TraceError",
    "Renderer",
    "trace_document",
    "replay",
    "format_trace",
]
