"""Planted bugs between the two stores (issue 21, item 3): reconcilers that cut
``CrashWorker``'s cross-store step wrongly.  Each is a :class:`Reconciler` subclass given
through :class:`~remora.sim.jobs.simulation.Parts` (nothing is patched); the tests in
``tests/jobs/test_between_stores.py`` show the job machines kill each."""

from __future__ import annotations

from collections.abc import Iterable

from remora.jobs.model import NotEnabled
from remora.jobs.reconciler import Reconciler
from remora.sim.jobs.simulation import Parts


class CommitBeforeMark(Reconciler):
    """``declare_down`` in the reverse of the documented order: the durable declaration
    commits first, the coordination mark and the target fence are raised after it.  Cut
    between the two (the mark's write fails, or the process is killed after the commit),
    the incarnation is durably down but not marked: if it still runs, the coordination
    script lets it reserve, activate, renew — steps of an incarnation the spec has down."""

    def declare_down(self, worker: str, *, down_after: float | None = None) -> bool:
        stores = self.stores
        after = stores.config.down_after_s if down_after is None else down_after
        by = self.incarnation or self.actor.name
        now = stores.clock.now()
        at, rows = stores.durable.liveness(now)
        seen = {w: s for w, _, s in rows}
        try:
            stores.guards.declare_down(
                worker,
                by,
                up=worker in seen,
                seen=seen.get(worker, 0.0),
                now=at,
                down_after=after,
                others_up=any(w != worker for w in seen),
            )
            stores.durable.declare_down(
                self.actor, worker, by, after, now, guard=stores.guards.declare_down
            )
        except NotEnabled:
            return False
        stores.coordination.mark_down(self.actor, worker)  # planted: after the commit
        stores.target.fence(self.actor, worker)
        return True


class ForgetfulDeclarer(Reconciler):
    """The runtime before the fix: a declaration that did not commit leaves its mark
    (no let-go, no sweep) — the finding ``ERROR not-quiescent: the down mark of w1 is not
    durable``."""

    def _let_go(self, workers: Iterable[str], fenced: bool = True) -> None:
        return None


class NoSweep(Reconciler):
    """A declarer that lets go of its mark when its declaration fails, but whose passes
    never sweep a stale mark: a kill between the mark and the commit (or an unresolved
    reply, or a let-go whose own write failed) leaves it.  A failed declaration alone
    does not: its let-go lifts the mark — it takes a kill point before the let-go, or
    the let-go's own write failing (the cut machine's search finds the bug even with
    its kill points off)."""

    def sweep_marks(
        self, marked: Iterable[str], down: Iterable[str], fenced: Iterable[str] = ()
    ) -> None:
        return None


class FenceKeeper(Reconciler):
    """The runtime before stop 47: a declaration that did not commit lets go of its
    coordination mark but never of its target fence, and no pass sweeps a fence.  The
    incarnation, durably up, has every stage write refused for good — each of its
    attempts fails at its first checkpoint (an excused refusal: the ``fenced`` reason)."""

    def _let_go(self, workers: Iterable[str], fenced: bool = True) -> None:
        super()._let_go(workers, fenced=False)

    def own_fences(self) -> frozenset[str]:
        return frozenset()


class FenceNotSwept(Reconciler):
    """A declarer that lets go of its fence when its declaration fails, and sweeps its
    stale marks, but never its stale fences: a kill between the fence and the commit
    leaves the fence of an incarnation the durable store holds up."""

    def own_fences(self) -> frozenset[str]:
        return frozenset()


PLANTED: dict[str, Parts] = {
    "commit-before-mark": Parts(reconciler=CommitBeforeMark),
    "forgetful-declarer": Parts(reconciler=ForgetfulDeclarer),
    "no-sweep": Parts(reconciler=NoSweep),
    "fence-kept": Parts(reconciler=FenceKeeper),
    "fence-not-swept": Parts(reconciler=FenceNotSwept),
}
"""Each planted bug, as the parts a machine or a run is built from."""
