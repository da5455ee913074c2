"""Multi-process breadth-first exploration (same counts and checks as :func:`explore`).

The state space is partitioned by ``crc32(key) % W`` over ``W`` forked worker processes; each
owns the visited set, parent links and frontier of its partition.  Exploration is
level-synchronous: every worker expands its frontier (generating successors, counting them
TLC's way, checking the action properties on every transition), keeps the successors it
owns, ships the others once per level to their owner (deduplicated, ``marshal``-encoded) and
checks the invariants on each new state it owns.  The coordinator sums the statistics after
each level, so distinct states, states generated and depth are exactly those of the
single-process search.  On a violation the shortest trace is rebuilt from the owners' parent
links and replayed from ``Init``.

Requires the ``fork`` start method (Linux): workers inherit the (possibly subclassed) model.
"""

from __future__ import annotations

import marshal
import multiprocessing as mp
import time
import zlib
from array import array
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from remora.protocol.errors import ProtocolError
from remora.protocol.explore import (
    ActionStats,
    ExploreOptions,
    ExploreResult,
    Violation,
    _Progress,
    property_checks,
    replay_chain,
)
from remora.protocol.liveness import DrainChecker
from remora.protocol.spec import ACTION_PROPERTIES, Remora, State, Step

_dumps = marshal.dumps
_loads = marshal.loads
_crc = zlib.crc32
_new: Callable[[type[State], Any], State] = tuple.__new__


def _worker(
    wid: int,
    nw: int,
    model: Remora,
    opts: ExploreOptions,
    drain: bool,
    conn: Connection,
    inboxes: list[Any],
) -> None:
    try:
        _work(wid, nw, model, opts, drain, conn, inboxes)
    except Exception as exc:  # reported to the coordinator, which raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def _work(
    wid: int,
    nw: int,
    model: Remora,
    opts: ExploreOptions,
    drain: bool,
    conn: Connection,
    inboxes: list[Any],
) -> None:
    steps = model.NextSteps()
    from remora.protocol.tlc import BRANCHING_ACTIONS

    actions = [
        (i, getattr(model, st.name), st.params, BRANCHING_ACTIONS.get(st.name))
        for i, st in enumerate(steps)
    ]
    invariants = [(n, getattr(model, n)) for n in opts.invariants] if opts.check_invariants else []
    props = property_checks(model, opts.properties) if opts.check_properties else []
    checker = DrainChecker(model) if drain else None
    gen_by_step = [0] * len(steps)
    new_by_step = [0] * len(steps)
    index: dict[bytes, int] = {}
    parent = array("q")
    via = array("l")
    frontier: list[tuple[bytes, int]] = []  # keys, decoded when expanded (memory)
    violations: list[tuple[Any, ...]] = []

    def add(key: bytes, s: State, par: int, step: int) -> None:
        local = len(index)
        index[key] = local
        parent.append(par)
        via.append(step)
        gid = local * nw + wid
        frontier_next.append((key, gid))
        if checker is not None:
            checker(s)
        for name, inv in invariants:
            if not inv(s):
                violations.append(("invariant", name, gid))
                break

    frontier_next: list[tuple[bytes, int]] = []
    for k, s in enumerate(model.Init()):
        key = _dumps(tuple(s), 2)
        if _crc(key) % nw == wid and key not in index:
            add(key, s, -1, -1 - k)
    while True:
        cmd = conn.recv()
        if cmd[0] == "parent":
            local = cmd[1]
            conn.send((parent[local], via[local]))
            continue
        if cmd[0] == "stop":
            conn.send(
                (
                    gen_by_step,
                    new_by_step,
                    checker.max_length if checker else 0,
                    checker.failures if checker else 0,
                )
            )
            return
        # "expand": one BFS level.
        frontier = frontier_next
        frontier_next = []
        generated = 0
        outbox: list[dict[bytes, tuple[int, int]]] = [{} for _ in range(nw)]
        for skey, gid in frontier:
            if violations:
                break
            s = _new(State, _loads(skey))
            any_succ = False
            for ai, fn, params, counter in actions:
                t = fn(s, *params)
                if t is None:
                    continue
                any_succ = True
                n = 1 if counter is None else counter(model, s, params)
                generated += n
                gen_by_step[ai] += n
                bad = False
                for pname, prop, skip in props:
                    if skip >= 0 and s[skip] is t[skip]:
                        continue
                    if not prop(s, t):
                        violations.append(("action-property", pname, gid, ai))
                        bad = True
                        break
                if bad:
                    break
                key = _dumps(tuple(t), 2)
                owner = _crc(key) % nw
                if owner == wid:
                    if key not in index:
                        new_by_step[ai] += 1
                        add(key, t, gid, ai)
                        if violations:
                            break
                else:
                    box = outbox[owner]
                    if key not in box:
                        box[key] = (gid, ai)
            if not any_succ and opts.check_deadlock and not violations:
                violations.append(("deadlock", "Deadlock", gid))
        for o in range(nw):
            if o != wid:
                inboxes[o].put(_dumps([(k, p, a) for k, (p, a) in outbox[o].items()], 2))
        for _ in range(nw - 1):
            batch = _loads(inboxes[wid].get())
            for key, par, ai in batch:
                if key not in index:
                    new_by_step[ai] += 1
                    add(key, _new(State, _loads(key)), par, ai)
        conn.send(("ok", generated, len(index), len(frontier_next), violations[:1]))


def explore_parallel(
    model: Remora,
    config_name: str = "custom",
    options: ExploreOptions | None = None,
    workers: int = 2,
    drain: bool = False,
) -> tuple[ExploreResult, tuple[int, int] | None]:
    """Explore with ``workers`` processes.  Returns the result and, with ``drain``, the
    pair (longest fair drain in steps, number of states that do not drain)."""
    opts = options or ExploreOptions()
    if opts.keep_graph or opts.on_state is not None:
        raise ValueError("keep_graph/on_state need the single-process explorer")
    t0 = time.monotonic()
    ctx = mp.get_context("fork")
    inboxes = [ctx.Queue() for _ in range(workers)]
    pipes = [ctx.Pipe() for _ in range(workers)]
    procs = [
        ctx.Process(
            target=_worker,
            args=(w, workers, model, opts, drain, pipes[w][1], inboxes),
            daemon=True,
        )
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    conns = [c for c, _ in pipes]
    steps = model.NextSteps()
    generated = len(model.Init())
    depth = 0
    distinct = 0
    violation: Violation | None = None
    complete = False
    progress = _Progress(opts.progress, opts.progress_interval)
    first = True
    try:
        while True:
            for c in conns:
                c.send(("expand",))
            replies = [_reply(c) for c in conns]
            if first:
                depth = 1
                first = False
            generated += sum(r[1] for r in replies)
            distinct = sum(r[2] for r in replies)
            queued = sum(r[3] for r in replies)
            found = [v for r in replies for v in r[4]]
            if found:
                violation = _build_violation(model, conns, workers, steps, found[0])
                depth = len(violation.states)
                break
            if queued == 0:
                complete = True
                break
            depth += 1
            progress.maybe(depth, distinct, generated, queued)
            if opts.max_states is not None and distinct > opts.max_states:
                break
        for c in conns:
            c.send(("stop",))
        finals = [_reply(c) for c in conns]
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():  # pragma: no cover - defensive
                p.kill()
    per_action: dict[str, ActionStats] = {}
    for i, st in enumerate(steps):
        a = per_action.setdefault(st.name, ActionStats())
        a.generated += sum(f[0][i] for f in finals)
        a.distinct += sum(f[1][i] for f in finals)
    result = ExploreResult(
        config_name=config_name,
        distinct=distinct,
        generated=generated,
        depth=depth,
        elapsed=time.monotonic() - t0,
        per_action=per_action,
        violation=violation,
        complete=complete,
    )
    drained = (max(f[2] for f in finals), sum(f[3] for f in finals)) if drain else None
    return result, drained


def _reply(conn: Connection) -> Any:
    r = conn.recv()
    if isinstance(r, tuple) and r and r[0] == "error":
        raise ProtocolError(f"explorer worker failed: {r[1]}")
    return r


def _chain(conns: list[Connection], nw: int, gid: int) -> list[int]:
    out: list[int] = []
    while True:
        conns[gid % nw].send(("parent", gid // nw))
        par, v = conns[gid % nw].recv()
        out.append(v)
        if par < 0:
            break
        gid = par
    out.reverse()
    return out


def _build_violation(
    model: Remora,
    conns: list[Connection],
    nw: int,
    steps: tuple[Step, ...],
    found: tuple[Any, ...],
) -> Violation:
    kind, name, gid = found[0], found[1], found[2]
    states, path = replay_chain(model, _chain(conns, nw, gid), steps)
    s = states[-1]
    if kind == "action-property":
        step = steps[found[3]]
        t = model.apply(s, step)
        assert t is not None
        states.append(t)
        path.append(step)
        detail = f"{name}: step {step.name} violates {ACTION_PROPERTIES[name]}"
    elif kind == "invariant":
        detail = f"{name} is FALSE"
    else:
        detail = "no action is enabled"
    return Violation(kind, name, states, path, detail)


__all__ = [
    "explore_parallel",
]
