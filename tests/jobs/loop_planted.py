"""Planted bugs in the production worker loop's driving code (:mod:`remora.jobs.loop`, the
worker's heartbeat), each a small subclass given to the loop machine through the
simulation's seams (:class:`~remora.sim.jobs.simulation.Parts`,
:class:`~remora.sim.jobs.loops.LoopParts`) — never a production flag.  None of them breaks
a spec step: the guards refuse what they lead to, or nothing the spec sees happens at all;
only the loop's own promises (:meth:`remora.sim.jobs.loops.SimLoops.problems`) see them.
``tests/jobs/test_job_loop_planted.py`` shows the job machines kill each, and that each
survives the same budget without the loop rules."""

from __future__ import annotations

import functools
from typing import Any

from remora.jobs.loop import ReconcileSchedule, WorkerLoop
from remora.jobs.settlement import quietly
from remora.jobs.worker import Worker
from remora.sim.jobs.loops import LoopParts
from remora.sim.jobs.simulation import Parts


class EagerHeartbeat(Worker):
    """(a) The heartbeat counted as renewed before its write is known to have landed: a
    renewal that failed (an unavailable store, a lost reply) is not tried again for a whole
    beat period, and the incarnation's heartbeat ages past it."""

    def heartbeat(self) -> bool:
        self.beat_at = self.stores.clock.now()
        return super().heartbeat()


class _KeepsFinished(dict[Any, Any]):
    """A slot table whose entries a finished handler does not free (``del`` forgets
    nothing)."""

    def __delitem__(self, key: Any) -> None:
        pass


class StickySlots(WorkerLoop):
    """(b) A finished attempt's slot is never freed: once its handlers are done, the loop
    waits for a handler to finish forever and takes no more work."""

    def __init__(self, worker: Worker, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.running = _KeepsFinished()


class GivesUpSchedule(ReconcileSchedule):
    """(c) One failed pass (a store unavailable) ends the reconciler's schedule: every pass
    after it is skipped."""

    failed = False

    def turn(self) -> float:
        if self.failed:
            return self.every
        full = self.passes % self.full_every == 0
        self.passes += 1
        if quietly(functools.partial(self.reconciler.reconcile_once, full=full)) is None:
            self.failed = True
        return self.every


PLANTED: dict[str, tuple[Parts | None, LoopParts]] = {
    "eager-heartbeat": (Parts(worker=EagerHeartbeat), LoopParts()),
    "sticky-slots": (None, LoopParts(loop=StickySlots)),
    "schedule-gives-up": (None, LoopParts(schedule=GivesUpSchedule)),
}
"""Each planted bug: the runtime's parts and the loop's (None: the spec's)."""
