"""Exhaustive breadth-first exploration of ``Init /\\ [][Next]_vars`` (TLC-compatible).

Counting follows TLC exactly:

* **distinct states** — every state reachable from ``Init`` under ``Next`` (all variables,
  no symmetry, no state constraint); the ``Done`` self-loop adds no state;
* **states generated** — the initial states plus every successor computed while expanding
  each distinct state once, duplicates and ``Done``'s stuttering successor included, with
  TLC's multiplicity for disjunctive guards (see :mod:`remora.protocol.tlc`);
* **depth** — the number of BFS levels, the initial states being level 1 (TLC's "depth of
  the complete state graph search").

Every invariant is checked on every distinct state (in the spec's order) and every action
property on every generated transition.  A state with no successor at all is a deadlock
(TLC's default ``CHECK_DEADLOCK``); because ``Done`` is enabled exactly in
``SystemQuiescent`` states, a deadlock is a non-quiescent state where nothing is enabled.
The first violation found in BFS order stops the run; its trace is a shortest path.

State keys are exact: ``marshal.dumps(state, 2)`` of the state tuple (format version 2 has no
back-references, so equal states always give equal bytes; no fingerprint collisions).  For
each distinct state only its parent index and the index of the action instance that found it
are kept (two machine integers), so counterexamples are rebuilt by replaying from ``Init``.
"""

from __future__ import annotations

import marshal
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from remora.progress import Progress
from remora.protocol.spec import ACTION_PROPERTIES, INVARIANTS, Remora, State, Step
from remora.protocol.tlc import BRANCHING_ACTIONS, BranchCounter
from remora.protocol.trace import format_trace, trace_document

_dumps = marshal.dumps
_loads = marshal.loads
_new: Callable[[type[State], Any], State] = tuple.__new__


@dataclass
class ActionStats:
    """Per action (by TLA+ name): successors generated and distinct states first found."""

    generated: int = 0
    distinct: int = 0


@dataclass
class Violation:
    """A safety violation (invariant, action property or deadlock) with its shortest trace."""

    kind: str  # "invariant" | "action-property" | "deadlock" | "error"
    name: str
    states: list[State]
    steps: list[Step]
    detail: str = ""

    def document(self, model: Remora, config_name: str) -> dict[str, Any]:
        return trace_document(
            model,
            config_name,
            self.states,
            self.steps,
            {"kind": self.kind, "name": self.name, "detail": self.detail},
        )


@dataclass
class StateGraph:
    """The explored graph (kept only when asked for, e.g. for liveness checking).

    ``succ[i]`` lists ``(j, step_index)`` for every generated transition ``i -> j``
    (duplicates removed; the ``Done`` self-loop included).
    """

    steps: tuple[Step, ...]
    states: list[State] = field(default_factory=list)
    succ: list[list[tuple[int, int]]] = field(default_factory=list)
    initial: list[int] = field(default_factory=list)


@dataclass
class ExploreResult:
    config_name: str
    distinct: int
    generated: int
    depth: int
    elapsed: float
    per_action: dict[str, ActionStats]
    violation: Violation | None
    complete: bool
    graph: StateGraph | None = None

    @property
    def states_per_second(self) -> float:
        return self.distinct / self.elapsed if self.elapsed > 0 else float("inf")


@dataclass
class ExploreOptions:
    check_invariants: bool = True
    check_properties: bool = True
    check_deadlock: bool = True
    invariants: tuple[str, ...] = INVARIANTS
    properties: tuple[str, ...] = tuple(ACTION_PROPERTIES)
    keep_graph: bool = False
    max_states: int | None = None
    progress: TextIO | None = None
    progress_interval: float = 5.0
    on_state: Callable[[State], None] | None = None


#: For an action property, the variable whose being left untouched (the very same object in
#: the successor) makes the step predicate vacuously true: ``FenceStep`` compares tokens,
#: ``CommitLinearizationStep`` has ``committedAttempt' # committedAttempt`` as premise,
#: ``FailureDispositionStep`` needs ``pendingOutcome[a] \\in FailureOutcomes`` and
#: ``pendingOutcome'[a] = NoOutcome``.  A pure shortcut: the predicate would return TRUE.
_VACUOUS_IF_UNTOUCHED: dict[str, str] = {
    "FencingTokensMonotonic": "currentToken",
    "CommitIsFencedCAS": "committedAttempt",
    "FailureDispositionHonored": "pendingOutcome",
}


def property_checks(
    model: Remora, names: tuple[str, ...]
) -> list[tuple[str, Callable[[State, State], bool], int]]:
    """``(name, [][P]_vars as a function of a step, shortcut variable index or -1)``."""
    out: list[tuple[str, Callable[[State, State], bool], int]] = []
    for n in names:
        var = _VACUOUS_IF_UNTOUCHED.get(n)
        out.append((n, getattr(model, n), State._fields.index(var) if var else -1))
    return out


class _Progress:
    """Exploration progress, drawn through :class:`remora.progress.Progress` (on a terminal
    only; the ``remora explore`` command clears the line when it is done)."""

    def __init__(self, stream: TextIO | None, interval: float) -> None:
        self.line = None if stream is None else Progress(stream, interval=interval)
        self.start = time.monotonic()

    def maybe(self, depth: int, distinct: int, generated: int, queue: int) -> None:
        if self.line is None or not self.line.due():
            return
        el = max(time.monotonic() - self.start, 1e-9)
        self.line.update(
            f"progress: depth {depth}, {distinct:,} distinct, {generated:,} generated, "
            f"{queue:,} queued, {el:.0f}s, {distinct / el:,.0f} distinct/s"
        )


def replay_chain(
    model: Remora, chain: Sequence[int], steps: Sequence[Step]
) -> tuple[list[State], list[Step]]:
    """Rebuild a path from its chain: ``chain[0]`` encodes the initial state
    (``-1 - init_index``), the rest are indexes into ``steps``."""
    s = model.Init()[-1 - chain[0]]
    states, path = [s], []
    for k in chain[1:]:
        t = model.apply(s, steps[k])
        assert t is not None
        states.append(t)
        path.append(steps[k])
        s = t
    return states, path


def explore(
    model: Remora, config_name: str = "custom", options: ExploreOptions | None = None
) -> ExploreResult:
    """Breadth-first search from ``Init`` under ``Next`` with all checks (single process)."""
    opts = options or ExploreOptions()
    t0 = time.monotonic()
    steps = model.NextSteps()
    names = [st.name for st in steps]
    actions: list[tuple[int, Callable[..., State | None], tuple[int, ...], BranchCounter | None]]
    actions = [
        (i, getattr(model, st.name), st.params, BRANCHING_ACTIONS.get(st.name))
        for i, st in enumerate(steps)
    ]
    invariants = [(n, getattr(model, n)) for n in opts.invariants] if opts.check_invariants else []
    props = property_checks(model, opts.properties) if opts.check_properties else []
    gen_by_step = [0] * len(steps)
    new_by_step = [0] * len(steps)
    index: dict[bytes, int] = {}
    parent = array("q")
    via = array("l")
    graph = StateGraph(steps=steps) if opts.keep_graph else None
    progress = _Progress(opts.progress, opts.progress_interval)
    on_state = opts.on_state

    def finish(violation: Violation | None, depth: int, complete: bool) -> ExploreResult:
        per_action: dict[str, ActionStats] = {}
        for i, name in enumerate(names):
            st = per_action.setdefault(name, ActionStats())
            st.generated += gen_by_step[i]
            st.distinct += new_by_step[i]
        return ExploreResult(
            config_name=config_name,
            distinct=len(index),
            generated=generated,
            depth=depth,
            elapsed=time.monotonic() - t0,
            per_action=per_action,
            violation=violation,
            complete=complete,
            graph=graph,
        )

    def trace_to(i: int, extra: tuple[Step, State] | None = None) -> tuple[list[State], list[Step]]:
        chain: list[int] = []
        while i >= 0:
            chain.append(via[i])
            i = parent[i]
        chain.reverse()
        states, path = replay_chain(model, chain, steps)
        if extra is not None:
            path.append(extra[0])
            states.append(extra[1])
        return states, path

    def check_state(s: State, i: int) -> Violation | None:
        for name, inv in invariants:
            if not inv(s):
                st, path = trace_to(i)
                return Violation("invariant", name, st, path, f"{name} is FALSE")
        return None

    generated = 0
    # The frontier holds the (already stored) keys, not the states: a level of a large run
    # would otherwise keep hundreds of thousands of decoded states alive.
    frontier: list[tuple[bytes, int]] = []
    for k, s in enumerate(model.Init()):
        generated += 1
        key = _dumps(tuple(s), 2)
        if key in index:
            continue
        i = len(index)
        index[key] = i
        parent.append(-1)
        via.append(-1 - k)
        if graph is not None:
            graph.states.append(s)
            graph.succ.append([])
            graph.initial.append(i)
        frontier.append((key, i))
        if opts.on_state is not None:
            opts.on_state(s)
        v = check_state(s, i)
        if v is not None:
            return finish(v, 1, False)
    depth = 1 if frontier else 0
    while frontier:
        nxt: list[tuple[bytes, int]] = []
        for skey, si in frontier:
            s = _new(State, _loads(skey))
            any_succ = False
            edges: list[tuple[int, int]] | None = [] if graph is not None else None
            for ai, fn, params, counter in actions:
                t = fn(s, *params)
                if t is None:
                    continue
                any_succ = True
                n = 1 if counter is None else counter(model, s, params)
                generated += n
                gen_by_step[ai] += n
                for pname, prop, skip in props:
                    if skip >= 0 and s[skip] is t[skip]:
                        continue
                    if not prop(s, t):
                        st, path = trace_to(si, (steps[ai], t))
                        return finish(
                            Violation(
                                "action-property",
                                pname,
                                st,
                                path,
                                f"{pname}: step {steps[ai].name} violates "
                                f"{ACTION_PROPERTIES[pname]}",
                            ),
                            depth + 1,
                            False,
                        )
                key = _dumps(tuple(t), 2)
                ti = index.get(key)
                if ti is None:
                    ti = len(index)
                    index[key] = ti
                    parent.append(si)
                    via.append(ai)
                    new_by_step[ai] += 1
                    if graph is not None:
                        graph.states.append(t)
                        graph.succ.append([])
                    nxt.append((key, ti))
                    if on_state is not None:
                        on_state(t)
                    v = check_state(t, ti)
                    if v is not None:
                        return finish(v, depth + 1, False)
                if edges is not None:
                    edges.append((ti, ai))
            if graph is not None and edges is not None:
                graph.succ[si] = list(dict.fromkeys(edges))
            if not any_succ and opts.check_deadlock:
                st, path = trace_to(si)
                return finish(
                    Violation("deadlock", "Deadlock", st, path, "no action is enabled"),
                    depth,
                    False,
                )
            if opts.max_states is not None and len(index) > opts.max_states:
                return finish(None, depth, False)
            progress.maybe(depth, len(index), generated, len(nxt))
        frontier = nxt
        if frontier:
            depth += 1
    return finish(None, depth, True)


def format_summary(result: ExploreResult) -> str:
    """The run summary printed by ``remora explore`` (TLC-like wording)."""
    lines = [
        f"config: {result.config_name}",
        f"{result.generated} states generated, {result.distinct} distinct states found, "
        f"0 states left on queue."
        if result.complete
        else f"{result.generated} states generated, {result.distinct} distinct states found "
        "(search stopped early).",
        f"The depth of the complete state graph search is {result.depth}."
        if result.complete
        else f"Depth reached: {result.depth}.",
        f"time: {result.elapsed:.2f}s ({result.states_per_second:,.0f} distinct states/s)",
        "per action (generated / distinct found):",
    ]
    for name, st in result.per_action.items():
        lines.append(f"  {name:<34} {st.generated:>12,} / {st.distinct:>10,}")
    return "\n".join(lines)


def violation_text(v: Violation, model: Remora, config_name: str = "custom") -> str:
    """TLC-like report of a safety violation: the error line and the behaviour."""
    head = {
        "invariant": f"Error: Invariant {v.name} is violated.",
        "action-property": f"Error: Action property {v.name} is violated.",
        "deadlock": "Error: Deadlock reached.",
    }.get(v.kind, f"Error: {v.name}")
    body = format_trace(v.document(model, config_name))
    return f"{head}\nThe behavior up to this point is:\n{body}"


__all__ = [
    "ActionStats",
    "Violation",
    "StateGraph",
    "ExploreResult",
    "ExploreOptions",
    "property_checks",
    "replay_chain",
    "explore",
    "format_summary",
    "violation_text",
]
