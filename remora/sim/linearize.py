"""Linearizability: is a concurrent history explained by some sequential run of a model?

A parallel run records, per thread, the operations it made — what each asked for, what it
got back, and when it was invoked and answered on one global clock of events.  The history
is **linearizable** (Herlihy and Wing, 1990) when some total order of the operations

* keeps each thread's program order,
* keeps real time: an operation answered before another was invoked comes first,
* and is accepted by the sequential model step by step — each operation's result is the
  one the model gives in the state reached — ending in a state the model accepts (the
  store's observed final state),

exists.  :func:`linearize` searches for one depth first, memoizing the search states it has
already refuted (a state is: how far each thread got, which operations of unknown outcome
are still open, and the model's state) — the algorithm of Wing and Gong with Lowe's
memoization, as in QuickCheck's and PropEr's ``parallel_commands``.

**Unknown outcomes.**  An operation whose result the caller could not learn (a lost
``COMMIT`` reply, a call that died inside) *may or may not* have taken effect.  Such an
operation is not *definite*: its result is never compared, and the search may place its
effect at any point after its invocation — or never.  With ``returned`` set, the effect
must land before anything invoked after that answer (a store that settles every call
before it returns, as Remora's stores do); with ``returned=None`` it may land any time
later, even after later operations of its own thread (any backend).  Both are sound: a
history is refused only if *no* placement of the unknown effects explains it.

The module knows nothing of Remora's stores: a :class:`SequentialModel` gives the initial
state, the successor of a definite operation (None if its result is impossible there), the
effect of an unknown one, and whether a final state is accepted.  The worker side's model
is :class:`remora.sim.parallel.StoreModel`; a job-runtime model plugs in the same way, its
step being the refinement checker's.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Sequence
from typing import Generic, Protocol, TypeVar

import attrs

S = TypeVar("S", bound=Hashable)

DEFAULT_STATES = 200_000
"""Search states explored before :func:`linearize` gives up (reported, never a pass)."""


@attrs.frozen
class Op:
    """One operation of a history (module docstring).  ``command`` and ``result`` are the
    model's own values (hashable); ``result`` is None for an operation that is not
    ``definite``."""

    id: int
    thread: int
    command: Hashable
    result: Hashable | None
    invoked: int
    returned: int | None
    definite: bool = True


class SequentialModel(Protocol[S]):
    """The sequential reference the history is judged against (module docstring)."""

    def initial(self) -> S: ...

    def step(self, state: S, op: Op) -> S | None:
        """The state after the definite ``op``, or None if ``op.result`` is not what the
        model gives in ``state``."""
        ...

    def effect(self, state: S, op: Op) -> S:
        """The state after ``op`` (of unknown result) took effect in ``state``."""
        ...

    def accepts(self, state: S) -> bool:
        """Whether a complete linearization may end in ``state``."""
        ...

    def describe(self, op: Op) -> str:
        """One line naming ``op`` for a failure message."""
        ...


@attrs.frozen
class Verdict:
    """The search's answer.  ``order`` is a witness (ids in linearization order; unknown
    operations that took effect included, dropped ones left out); when there is none,
    ``deepest`` is the longest prefix the model accepted and ``stuck`` the operations none
    of which could come next, and ``message`` says so in words."""

    ok: bool
    order: tuple[int, ...]
    explored: int
    deepest: tuple[int, ...] = ()
    stuck: tuple[int, ...] = ()
    exhausted: bool = False
    message: str = ""


class _Search(Generic[S]):
    def __init__(self, threads: Sequence[Sequence[Op]], model: SequentialModel[S], limit: int):
        self.threads = [list(t) for t in threads]
        self.model = model
        self.limit = limit
        self.explored = 0
        self.refuted: set[tuple[tuple[int, ...], frozenset[int], S]] = set()
        self.deepest: tuple[int, ...] = ()
        self.stuck: tuple[int, ...] = ()
        self.ops = {op.id: op for t in self.threads for op in t}

    def _normal(
        self, heads: tuple[int, ...], pool: frozenset[int]
    ) -> tuple[tuple[int, ...], frozenset[int]]:
        """Detach every thread's leading unknown operations into the pool: their effect is
        placed (or dropped) on its own, and program order past them continues."""
        out = list(heads)
        opened = set(pool)
        for t, ops in enumerate(self.threads):
            while out[t] < len(ops) and not ops[out[t]].definite:
                opened.add(ops[out[t]].id)
                out[t] += 1
        return tuple(out), frozenset(opened)

    def _earliest_answer(self, heads: tuple[int, ...], skip: int) -> int | None:
        """The earliest answer among the definite operations not yet placed, other than the
        head of thread ``skip`` (each thread's are in order: its head answered first)."""
        best: int | None = None
        for t, ops in enumerate(self.threads):
            if t != skip and heads[t] < len(ops):
                r = ops[heads[t]].returned
                if r is not None and (best is None or r < best):
                    best = r
        return best

    def run(self) -> Verdict:
        heads, pool = self._normal(tuple(0 for _ in self.threads), frozenset())
        sys_limit = sys.getrecursionlimit()
        total = len(self.ops)
        if total + 100 > sys_limit:
            sys.setrecursionlimit(total + 1000)
        try:
            order = self._search(heads, pool, self.model.initial(), ())
        except _Exhausted:
            return Verdict(
                False,
                (),
                self.explored,
                self.deepest,
                self.stuck,
                exhausted=True,
                message=f"gave up after {self.explored} search states (no verdict)",
            )
        finally:
            sys.setrecursionlimit(sys_limit)
        if order is not None:
            return Verdict(True, order, self.explored)
        return Verdict(False, (), self.explored, self.deepest, self.stuck, message=self._explain())

    def _explain(self) -> str:
        describe = self.model.describe
        placed = ", ".join(describe(self.ops[i]) for i in self.deepest) or "nothing"
        stuck = "; ".join(describe(self.ops[i]) for i in self.stuck) or "the final state"
        return (
            f"no order of the {len(self.ops)} operations is a run of the model: the longest "
            f"consistent prefix is [{placed}], after which none of [{stuck}] can come next"
        )

    def _search(
        self, heads: tuple[int, ...], pool: frozenset[int], state: S, done: tuple[int, ...]
    ) -> tuple[int, ...] | None:
        key = (heads, pool, state)
        if key in self.refuted:
            return None
        self.explored += 1
        if self.explored > self.limit:
            raise _Exhausted
        finished = all(h == len(ops) for h, ops in zip(heads, self.threads, strict=True))
        if finished and self.model.accepts(state):
            return done
        tried: list[int] = []
        # a definite head operation, real time permitting
        for t, ops in enumerate(self.threads):
            if heads[t] == len(ops):
                continue
            op = ops[heads[t]]
            first = self._earliest_answer(heads, t)
            if first is not None and first < op.invoked:
                continue
            tried.append(op.id)
            nxt = self.model.step(state, op)
            if nxt is None:
                continue
            # unknown operations answered before this one was invoked can no longer act
            kept = frozenset(
                i for i in pool if (r := self.ops[i].returned) is None or r > op.invoked
            )
            new_heads = (*heads[:t], heads[t] + 1, *heads[t + 1 :])
            new_heads, kept = self._normal(new_heads, kept)
            found = self._search(new_heads, kept, nxt, (*done, op.id))
            if found is not None:
                return found
        # an open unknown operation takes effect now
        first_any = self._earliest_answer(heads, -1)
        for i in sorted(pool):
            op = self.ops[i]
            if first_any is not None and first_any < op.invoked:
                continue
            nxt = self.model.effect(state, op)
            found = self._search(heads, pool - {i}, nxt, (*done, i))
            if found is not None:
                return found
        definite_done = tuple(i for i in done if self.ops[i].definite)
        if len(definite_done) > len(tuple(i for i in self.deepest if self.ops[i].definite)):
            self.deepest, self.stuck = done, tuple(tried)
        elif not self.deepest and not self.stuck:
            self.stuck = tuple(tried)
        self.refuted.add(key)
        return None


class _Exhausted(Exception):
    pass


def linearize(
    threads: Sequence[Sequence[Op]], model: SequentialModel[S], *, limit: int = DEFAULT_STATES
) -> Verdict:
    """Search for a linearization of ``threads`` (each a thread's operations in program
    order) under ``model`` (module docstring)."""
    return _Search(threads, model, limit).run()


class History:
    """A thread-safe recorder of operations on one global event clock: :meth:`invoke`
    before the call, :meth:`answer` after it."""

    def __init__(self) -> None:
        import itertools
        import threading

        self._lock = threading.Lock()
        self._clock = itertools.count()
        self._ops: dict[int, Op] = {}
        self._order: list[int] = []

    def tick(self) -> int:
        with self._lock:
            return next(self._clock)

    def invoke(self, thread: int, command: Hashable) -> int:
        """Record an invocation; returns the operation's id."""
        with self._lock:
            at = next(self._clock)
            op = Op(len(self._order), thread, command, None, at, None, False)
            self._ops[op.id] = op
            self._order.append(op.id)
            return op.id

    def answer(self, op_id: int, result: Hashable | None, definite: bool, settled: bool) -> Op:
        """Record the answer of ``op_id``: its result when ``definite``; ``settled``: an
        unknown effect cannot land after this moment (the call settled it)."""
        with self._lock:
            at = next(self._clock)
            op = self._ops[op_id]
            returned = at if definite or settled else None
            done = attrs.evolve(
                op, result=result if definite else None, returned=returned, definite=definite
            )
            self._ops[op_id] = done
            return done

    def threads(self, count: int) -> list[list[Op]]:
        """The operations per thread ``0..count-1``, in program order.  An operation that
        was never answered (its thread died) counts as unknown and open."""
        out: list[list[Op]] = [[] for _ in range(count)]
        with self._lock:
            for i in self._order:
                out[self._ops[i].thread].append(self._ops[i])
        return out

    def op(self, op_id: int) -> Op:
        with self._lock:
            return self._ops[op_id]


__all__ = [
    "DEFAULT_STATES",
    "Op",
    "SequentialModel",
    "Verdict",
    "linearize",
    "History",
]
