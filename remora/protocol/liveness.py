"""Liveness: the module's temporal properties under ``Fairness`` and ``RecoveryAssumption``.

Method (documented in ``docs/protocol.md``)
-------------------------------------------
The explored graph (every generated transition, plus an implicit stuttering self-loop on every
state, since ``[][Next]_vars`` admits stuttering) is checked property instance by property
instance.  ``EventuallyX == RecoveryAssumption => (P ~> Q)`` is violated iff some fair
behaviour satisfying ``<>[]Avail`` (``Avail == \\E w : WorkerAvailable(w)``) reaches a
``P /\\ ~Q`` state and never reaches ``Q`` afterwards.  ``<>Q`` is ``P ~> Q`` with ``P`` the
initial states.  So:

1. ``R`` = states reachable from ``P /\\ ~Q`` states along ``~Q`` states;
2. ``H`` = ``R /\\ Avail`` (the infinite suffix must stay in ``Avail`` states);
3. search ``H`` for a *fair* strongly connected set ``S`` (a behaviour can visit exactly the
   states and edges of ``S`` infinitely often): for every ``WF_vars(A)`` in ``Fairness``,
   ``<<A>>_vars`` is disabled in some state of ``S`` or taken on an edge inside ``S``; for
   every ``SF_vars(A)``, ``<<A>>_vars`` is disabled in all states of ``S`` or taken inside
   ``S``.  A WF failure rejects ``S`` and all its subsets; an SF failure removes the states
   of ``S`` where that action is enabled and the remainder is split into SCCs again
   (the standard Emerson-Lei refinement).

A fair ``S`` yields a lasso counterexample: shortest prefix from ``Init`` to a ``P`` state,
a ``~Q`` path into ``S`` and a cycle in ``S`` through a witness for every fairness condition.
``ENABLED <<A>>_vars`` and "an ``<<A>>_vars`` step" are read off the explored transitions:
``A`` is the set of ``Next`` action instances that make up ``JobStep(A)`` (every job action
leaves ``credentialVars`` unchanged), and a step is an ``<<A>>_vars`` step iff one of those
instances produces it and it changes some variable.

The fair drain (:func:`fair_drain`) is the practical check for graphs too large to keep:
from a state, a deterministic fault-free scheduler runs until ``SystemQuiescent``.
"""

from __future__ import annotations

import marshal
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from remora.protocol.explore import StateGraph
from remora.protocol.spec import (
    AttemptAuthorized,
    AttemptExecuting,
    LeaseLive,
    Queued,
    Remora,
    Running,
    StageCleaned,
    State,
    Step,
)
from remora.protocol.trace import Renderer, trace_document

# ---------------------------------------------------------------------------------------------
# Fairness
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FairnessConjunct:
    kind: str  # "WF" | "SF"
    label: str  # e.g. "SF_vars(JobStep(ReserveJob(j1)))"
    steps: frozenset[Step]


def fairness(model: Remora) -> list[FairnessConjunct]:
    """The conjuncts of ``Fairness``, each with the ``Next`` action instances it covers."""
    r = Renderer(model)
    J, A, W = model.Jobs, model.AttemptIds, model.Workers
    out: list[FairnessConjunct] = []

    def add(kind: str, op: str, arg: str, steps: Iterable[Step]) -> None:
        out.append(FairnessConjunct(kind, f"{kind}_vars(JobStep({op}({arg})))", frozenset(steps)))

    for j in J:
        add("WF", "Enqueue", r.job(j), [Step("Enqueue", (j,))])
    for j in J:
        add("SF", "ReserveJob", r.job(j), [Step("Reserve", (j, w)) for w in W])
    for j in J:
        add("SF", "AuthorizeJob", r.job(j), [Step("AuthorizeAttempt", (j, w)) for w in W])
    for j in J:
        add(
            "SF",
            "ActivateJob",
            r.job(j),
            [Step("ActivateAttempt", (a,)) for a in model.AttemptsOf[j]],
        )
    for j in J:
        ex: list[Step] = []
        for a in model.AttemptsOf[j]:
            ex += [Step("SendOutcome", (a, o)) for o in (1, 2, 3)]
            ex += [Step("AdvanceAttempt", (a, n)) for n in range(1, model.MaxProgress + 1)]
        add("SF", "ExecuteJob", r.job(j), ex)
    for a in A:
        add(
            "WF",
            "ProcessOutcome",
            r.attempt(a),
            [
                Step(n, (a,))
                for n in (
                    "AcceptSuccess",
                    "AcceptPermanentFailure",
                    "AcceptRetryableFailureWithBudget",
                    "AcceptRetryableFailureExhausted",
                    "RejectOutcome",
                )
            ],
        )
    for a in A:
        add("WF", "ExpireLease", r.attempt(a), [Step("ExpireLease", (a,))])
    for j in J:
        add("WF", "ExpireReservation", r.job(j), [Step("ExpireReservation", (j,))])
    for a in A:
        add("WF", "CooperativeStop", r.attempt(a), [Step("CooperativeStop", (a,))])
    for a in A:
        add("WF", "ReleaseLease", r.attempt(a), [Step("ReleaseLease", (a,))])
    for a in A:
        add("WF", "CleanupStage", r.attempt(a), [Step("CleanupStage", (a,))])
    for j in J:
        add("WF", "ReleaseReservation", r.job(j), [Step("ReleaseReservation", (j,))])
    for j in J:
        add(
            "WF",
            "ReapJob",
            r.job(j),
            [Step("ReapLostAttempt", (a,)) for a in model.AttemptsOf[j]],
        )
    for name in (
        "ScheduleRetry",
        "FinalizeCancel",
        "PublishCancelNotice",
        "ClearStaleLiveProgress",
        "CleanTerminalCoordination",
    ):
        for j in J:
            add("WF", name, r.job(j), [Step(name, (j,))])
    for w in W:
        for s in model.Services:
            add("WF", "RestoreLink", f"{r.worker(w)}, {s}", [Step("RestoreLink", (w, s))])
    for w in W:
        add("WF", "StartIncarnation", r.worker(w), [Step("StartIncarnation", (w,))])
    out.append(FairnessConjunct("WF", "WF_vars(JobStep(Tick))", frozenset({Step("Tick", ())})))
    return out


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

Pred = Callable[[State], bool]


@dataclass(frozen=True)
class LeadsTo:
    """One instance ``P ~> Q`` (``P`` is ``None`` for ``<>Q``: the initial states)."""

    prop: str
    instance: str
    p: Pred | None
    q: Pred


LIVENESS_PROPERTIES: tuple[str, ...] = (
    "EventuallyDispatched",
    "EventuallyReaped",
    "EventuallyAuthorizedResolved",
    "EventuallyTerminal",
    "EventuallyNonWinnerStagingCleaned",
    "EventuallySystemQuiescent",
)


def property_instances(model: Remora, names: Iterable[str] = LIVENESS_PROPERTIES) -> list[LeadsTo]:
    """Each liveness property split into its ``\\A j`` / ``\\A a`` instances."""
    m = model
    r = Renderer(m)
    out: list[LeadsTo] = []

    def dispatched(j: int) -> LeadsTo:
        def p(s: State) -> bool:
            return s.phase[j] == Queued

        def q(s: State) -> bool:
            return s.phase[j] == Running or m.Terminal(s, j)

        return LeadsTo("EventuallyDispatched", r.job(j), p, q)

    def reaped(a: int) -> LeadsTo:
        def p(s: State) -> bool:
            return m.CurrentAuthority(s, a) and s.leaseState[a] != LeaseLive

        def q(s: State) -> bool:
            return not m.CurrentAuthority(s, a) or m.Terminal(s, m.JobOf(a))

        return LeadsTo("EventuallyReaped", r.attempt(a), p, q)

    def authorized_resolved(a: int) -> LeadsTo:
        def p(s: State) -> bool:
            return m.CurrentAuthority(s, a) and s.attemptState[a] == AttemptAuthorized

        def q(s: State) -> bool:
            return (
                s.attemptState[a] == AttemptExecuting
                or not m.CurrentAuthority(s, a)
                or m.Terminal(s, m.JobOf(a))
            )

        return LeadsTo("EventuallyAuthorizedResolved", r.attempt(a), p, q)

    def terminal(j: int) -> LeadsTo:
        def q(s: State) -> bool:
            return m.Terminal(s, j)

        return LeadsTo("EventuallyTerminal", r.job(j), None, q)

    def staging_cleaned(a: int) -> LeadsTo:
        def p(s: State) -> bool:
            return m.CleanupEligible(s, a)

        def q(s: State) -> bool:
            return s.stageState[a] == StageCleaned

        return LeadsTo("EventuallyNonWinnerStagingCleaned", r.attempt(a), p, q)

    for name in names:
        if name == "EventuallyDispatched":
            out += [dispatched(j) for j in m.Jobs]
        elif name == "EventuallyReaped":
            out += [reaped(a) for a in m.AttemptIds]
        elif name == "EventuallyAuthorizedResolved":
            out += [authorized_resolved(a) for a in m.AttemptIds]
        elif name == "EventuallyTerminal":
            out += [terminal(j) for j in m.Jobs]
        elif name == "EventuallyNonWinnerStagingCleaned":
            out += [staging_cleaned(a) for a in m.AttemptIds]
        elif name == "EventuallySystemQuiescent":
            out.append(LeadsTo(name, "", None, m.SystemQuiescent))
        else:
            raise KeyError(name)
    return out


# ---------------------------------------------------------------------------------------------
# Fair SCC search
# ---------------------------------------------------------------------------------------------


@dataclass
class LivenessResult:
    prop: str
    instance: str
    holds: bool
    states_checked: int
    lasso: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"{self.prop}[{self.instance}]" if self.instance else self.prop


@dataclass
class _Annotated:
    graph: StateGraph
    conj: list[FairnessConjunct]
    en: list[int]  # per state: mask of conjuncts whose <<A>>_vars is enabled
    taken: list[dict[int, int]]  # per state: successor -> mask of conjuncts the edge takes
    wf: int
    sf: int
    avail: list[bool]
    bfs_parent: list[int] = field(default_factory=list)


def _annotate(model: Remora, graph: StateGraph) -> _Annotated:
    conj = fairness(model)
    step_mask = [0] * len(graph.steps)
    for bit, c in enumerate(conj):
        for k, st in enumerate(graph.steps):
            if st in c.steps:
                step_mask[k] |= 1 << bit
    en: list[int] = []
    taken: list[dict[int, int]] = []
    for u, edges in enumerate(graph.succ):
        e = 0
        tk: dict[int, int] = {}
        for v, k in edges:
            if v == u:
                continue  # a stuttering step is no <<A>>_vars step
            msk = step_mask[k]
            if msk:
                e |= msk
                tk[v] = tk.get(v, 0) | msk
            elif v not in tk:
                tk[v] = 0
        en.append(e)
        taken.append(tk)
    wf = sf = 0
    for bit, c in enumerate(conj):
        if c.kind == "WF":
            wf |= 1 << bit
        else:
            sf |= 1 << bit
    avail = [model.SomeWorkerAvailable(s) for s in graph.states]
    # BFS tree from the initial states (shortest prefixes).
    parent = [-2] * len(graph.states)
    dq: deque[int] = deque()
    for i in graph.initial:
        parent[i] = -1
        dq.append(i)
    while dq:
        u = dq.popleft()
        for v in taken[u]:
            if parent[v] == -2:
                parent[v] = u
                dq.append(v)
    return _Annotated(graph, conj, en, taken, wf, sf, avail, parent)


def _sccs(nodes: set[int], taken: list[dict[int, int]]) -> list[list[int]]:
    """Tarjan's algorithm (iterative) on the subgraph induced by ``nodes``."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[int, Any]] = [(root, iter(taken[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            u, it = work[-1]
            advanced = False
            for v in it:
                if v not in nodes:
                    continue
                if v not in index:
                    index[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on.add(v)
                    work.append((v, iter(taken[v])))
                    advanced = True
                    break
                if v in on and index[v] < low[u]:
                    low[u] = index[v]
            if advanced:
                continue
            work.pop()
            if work:
                p = work[-1][0]
                if low[u] < low[p]:
                    low[p] = low[u]
            if low[u] == index[u]:
                comp: list[int] = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == u:
                        break
                out.append(comp)
    return out


def _fair_set(ann: _Annotated, nodes: set[int]) -> set[int] | None:
    """A fair strongly connected subset of ``nodes`` (each state stutters), if any."""
    pending = [set(c) for c in _sccs(nodes, ann.taken)]
    while pending:
        comp = pending.pop()
        en_any = 0
        en_all = -1
        tk = 0
        for u in comp:
            en_any |= ann.en[u]
            en_all &= ann.en[u]
            for v, msk in ann.taken[u].items():
                if v in comp:
                    tk |= msk
        if ann.wf & en_all & ~tk:
            continue
        bad = ann.sf & en_any & ~tk
        if bad:
            rest = {u for u in comp if not ann.en[u] & bad}
            if rest:
                pending.extend(set(c) for c in _sccs(rest, ann.taken))
            continue
        return comp
    return None


def _path(ann: _Annotated, src: set[int], dst: set[int], allowed: set[int]) -> list[int]:
    """Shortest path from some ``src`` node to some ``dst`` node inside ``allowed``."""
    prev: dict[int, int] = {u: -1 for u in src}
    dq = deque(src)
    while dq:
        u = dq.popleft()
        if u in dst:
            path = [u]
            while prev[path[-1]] != -1:
                path.append(prev[path[-1]])
            return path[::-1]
        for v in ann.taken[u]:
            if v in allowed and v not in prev:
                prev[v] = u
                dq.append(v)
    raise AssertionError("no path")  # pragma: no cover - callers guarantee reachability


def _lasso(
    model: Remora,
    config_name: str,
    ann: _Annotated,
    inst: LeadsTo,
    start: set[int],
    reach: set[int],
    comp: set[int],
) -> dict[str, Any]:
    g = ann.graph
    # Prefix: Init ->* p (shortest, any states), then p ->* S inside ~Q states.
    inner = _path(ann, start, comp, reach)
    p = inner[0]
    prefix: list[int] = []
    u = p
    while u != -1:
        prefix.append(u)
        u = ann.bfs_parent[u]
    prefix.reverse()
    nodes = prefix + inner[1:]
    # Cycle through S visiting one witness per fairness condition.
    en_all = -1
    for v in comp:
        en_all &= ann.en[v]
    targets: list[int] = []
    for bit in range(len(ann.conj)):
        b = 1 << bit
        if ann.wf & b and not en_all & b:
            targets.append(next(v for v in comp if not ann.en[v] & b))
        elif (ann.wf | ann.sf) & b:
            for x in comp:
                y = next((y for y, m in ann.taken[x].items() if y in comp and m & b), None)
                if y is not None:
                    targets += [x, y]
                    break
    cycle_start = len(nodes) - 1
    cur = nodes[-1]
    for tgt in targets:
        if tgt != cur:
            seg = _path(ann, {cur}, {tgt}, comp)
            nodes += seg[1:]
            cur = tgt
    if cur != nodes[cycle_start]:
        # Close the loop: the last state's successor is nodes[cycle_start].
        nodes += _path(ann, {cur}, {nodes[cycle_start]}, comp)[1:-1]
    states = [g.states[i] for i in nodes]
    steps: list[Step] = []
    for a, b in pairwise(nodes):
        k = next(k for v, k in g.succ[a] if v == b)
        steps.append(g.steps[k])
    doc = trace_document(
        model,
        config_name,
        states,
        steps,
        {
            "kind": "liveness",
            "name": inst.prop,
            "detail": f"{inst.prop}[{inst.instance}]: a fair behaviour under RecoveryAssumption "
            "never reaches the goal",
        },
        cycle_start=cycle_start,
    )
    return doc


def check_liveness(
    model: Remora,
    graph: StateGraph,
    config_name: str = "custom",
    names: Iterable[str] = LIVENESS_PROPERTIES,
) -> list[LivenessResult]:
    """Check each liveness property instance on a complete explored graph."""
    ann = _annotate(model, graph)
    results: list[LivenessResult] = []
    n = len(graph.states)
    for inst in property_instances(model, names):
        notq = [not inst.q(s) for s in graph.states]
        if inst.p is None:
            start = {i for i in graph.initial if notq[i]}
        else:
            start = {i for i in range(n) if notq[i] and inst.p(graph.states[i])}
        reach = set(start)
        dq = deque(start)
        while dq:
            u = dq.popleft()
            for v in ann.taken[u]:
                if notq[v] and v not in reach:
                    reach.add(v)
                    dq.append(v)
        h = {u for u in reach if ann.avail[u]}
        comp = _fair_set(ann, h) if h else None
        if comp is None:
            results.append(LivenessResult(inst.prop, inst.instance, True, len(reach)))
        else:
            lasso = _lasso(model, config_name, ann, inst, start, reach, comp)
            results.append(LivenessResult(inst.prop, inst.instance, False, len(reach), lasso))
    return results


# ---------------------------------------------------------------------------------------------
# Fair drain
# ---------------------------------------------------------------------------------------------

#: Priority of the fault-free drain scheduler: earlier families are preferred.  Faults
#: (``LoseCoordinationState``, ``DropLink``, ``CrashWorker``), new work (``RequestCancel``,
#: ``PrepareCredentialIntent``) and optional steps (``RenewLease``, ``PersistCheckpoint``,
#: ``InvalidateCheckpoint``, ``ReportProgress``) are never scheduled.
DRAIN_PRIORITY: tuple[str, ...] = (
    "AcceptSuccess",
    "AcceptPermanentFailure",
    "AcceptRetryableFailureWithBudget",
    "AcceptRetryableFailureExhausted",
    "RejectOutcome",
    "FinalizeCancel",
    "PublishCancelNotice",
    "CooperativeStop",
    "ReleaseLease",
    "ReapLostAttempt",
    "ReleaseReservation",
    "CleanupStage",
    "ScheduleRetry",
    "SendOutcome",
    "AdvanceAttempt",
    "ActivateAttempt",
    "AuthorizeAttempt",
    "Reserve",
    "Enqueue",
    "ClearStaleLiveProgress",
    "CleanTerminalCoordination",
    "ExpireLease",
    "ExpireReservation",
    "RestoreLink",
    "StartIncarnation",
    "CommitCredentialVersion",
    "RecordCredentialWrite",
    "CompleteCredentialWrite",
    "DestroyClaimedCredentialSecret",
    "BeginCredentialWrite",
    "Tick",
)


def drain_schedule(model: Remora) -> list[Step]:
    """The drain scheduler's action instances in priority order."""
    by_name: dict[str, list[Step]] = {}
    for st in model.NextSteps():
        by_name.setdefault(st.name, []).append(st)
    order: list[Step] = []
    for name in DRAIN_PRIORITY:
        group = by_name.get(name, [])
        if name == "AdvanceAttempt":
            group = sorted(group, key=lambda st: -st.params[1])  # finish the work at once
        if name == "SendOutcome":
            group = sorted(group, key=lambda st: st.params[1])  # WantsSuccess first
        order.extend(group)
    return order


class DrainError(Exception):
    """The drain did not reach ``SystemQuiescent`` (carries the drained path)."""

    def __init__(self, message: str, states: list[State], steps: list[Step]) -> None:
        super().__init__(message)
        self.states = states
        self.steps = steps


def fair_drain(
    model: Remora, s: State, max_steps: int = 1000, schedule: list[Step] | None = None
) -> tuple[list[State], list[Step]]:
    """Run the fault-free scheduler from ``s`` until ``SystemQuiescent``.

    Raises :class:`DrainError` when no scheduled action is enabled in a non-quiescent state,
    a state repeats (the deterministic scheduler would loop), or ``max_steps`` is exceeded.
    """
    order = schedule or drain_schedule(model)
    states: list[State] = [s]
    steps: list[Step] = []
    seen = {s}
    while not model.SystemQuiescent(s):
        if len(steps) >= max_steps:
            raise DrainError(f"no SystemQuiescent within {max_steps} steps", states, steps)
        for st in order:
            t = model.apply(s, st)
            if t is not None:
                break
        else:
            raise DrainError("the fault-free scheduler has nothing to do", states, steps)
        if t in seen:
            raise DrainError("the fault-free scheduler loops", states, steps)
        seen.add(t)
        states.append(t)
        steps.append(st)
        s = t
    return states, steps


class DrainChecker:
    """Memoised drain lengths for every state of an exploration (``explore(on_state=...)``)."""

    def __init__(self, model: Remora, max_steps: int = 1000) -> None:
        self.model = model
        self.max_steps = max_steps
        self.order = drain_schedule(model)
        self.length: dict[bytes, int] = {}
        self.max_length = 0
        self.failures = 0
        self.first_failure: DrainError | None = None

    def __call__(self, s: State) -> None:
        m = self.model
        chain: list[bytes] = []
        chain_set: set[bytes] = set()
        cur = s
        known = 0
        while True:
            key = marshal.dumps(tuple(cur), 2)
            if key in self.length:
                known = self.length[key]
                break
            if m.SystemQuiescent(cur):
                known = 0
                self.length[key] = 0
                break
            if key in chain_set or len(chain) >= self.max_steps:
                self._fail(s, "loops or exceeds the step bound")
                return
            chain.append(key)
            chain_set.add(key)
            for st in self.order:
                t = m.apply(cur, st)
                if t is not None:
                    break
            else:
                self._fail(s, "has nothing to do")
                return
            cur = t
        if known < 0:
            self._fail(s, "reaches a state that cannot drain")
            return
        for key in reversed(chain):
            known += 1
            self.length[key] = known
        if known > self.max_length:
            self.max_length = known

    def _fail(self, s: State, why: str) -> None:
        self.failures += 1
        if self.first_failure is None:
            try:
                fair_drain(self.model, s, self.max_steps, self.order)
            except DrainError as exc:
                self.first_failure = DrainError(f"drain {why}: {exc}", exc.states, exc.steps)


# ---------------------------------------------------------------------------------------------
# TLA+ names of the temporal part of the module
# ---------------------------------------------------------------------------------------------


def JobStep(action: Iterable[Step]) -> frozenset[Step]:
    """``JobStep(A) == A /\\ UNCHANGED credentialVars``: every job action of the port leaves
    ``credentialVars`` unchanged (checked by the tests), so ``JobStep(A)`` is ``A``."""
    return frozenset(action)


#: ``Fairness``: the WF/SF conjuncts with the action instances they cover.
Fairness = fairness


def RecoveryAssumption(model: Remora, s: State) -> bool:
    """The state predicate under ``<>[]`` in ``RecoveryAssumption``: the liveness check
    keeps the infinite suffix (the fair cycle) inside states where it holds."""
    return model.SomeWorkerAvailable(s)


def EventuallyDispatched(model: Remora) -> list[LeadsTo]:
    return property_instances(model, ["EventuallyDispatched"])


def EventuallyReaped(model: Remora) -> list[LeadsTo]:
    return property_instances(model, ["EventuallyReaped"])


def EventuallyAuthorizedResolved(model: Remora) -> list[LeadsTo]:
    return property_instances(model, ["EventuallyAuthorizedResolved"])


def EventuallyTerminal(model: Remora) -> list[LeadsTo]:
    return property_instances(model, ["EventuallyTerminal"])


def EventuallyNonWinnerStagingCleaned(model: Remora) -> list[LeadsTo]:
    return property_instances(model, ["EventuallyNonWinnerStagingCleaned"])


def EventuallySystemQuiescent(model: Remora) -> list[LeadsTo]:
    return property_instances(model, ["EventuallySystemQuiescent"])


__all__ = [
    "FairnessConjunct",
    "fairness",
    "Pred",
    "LeadsTo",
    "LIVENESS_PROPERTIES",
    "property_instances",
    "LivenessResult",
    "check_liveness",
    "DRAIN_PRIORITY",
    "drain_schedule",
    "DrainError",
    "fair_drain",
    "DrainChecker",
    "JobStep",
    "Fairness",
    "RecoveryAssumption",
    "EventuallyDispatched",
    "EventuallyReaped",
    "EventuallyAuthorizedResolved",
    "EventuallyTerminal",
    "EventuallyNonWinnerStagingCleaned",
    "EventuallySystemQuiescent",
]
