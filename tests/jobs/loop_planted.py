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
from collections.abc import Callable
from typing import Any

from remora.errors import NotEnabled, RemoraError, Unavailable, UnknownResult, WorkerDown
from remora.jobs.attempt import AttemptContext
from remora.jobs.child import ChildContext
from remora.jobs.handlers import HandlerResult
from remora.jobs.loop import Dispatcher, Pause, ReconcileSchedule, Wait, WorkerLoop
from remora.jobs.model import AttemptId, Outcome
from remora.jobs.processes import Child, ChildGone, ProcessExecution
from remora.jobs.reconciler import Reconciler
from remora.jobs.settlement import STOP_POLL, complete, quietly, retry_step
from remora.jobs.worker import EXECUTING, STOPPED, Worker
from remora.sim.jobs.loops import LoopParts
from remora.sim.jobs.simulation import Parts
from remora.worker.outage import OutageWatch


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


def _settle_keeping_stopped_leases(
    w: Worker,
    a: AttemptId,
    outcome: Outcome | None,
    error: str,
    shutting_down: Callable[[], bool] = lambda: False,
) -> None:
    """:func:`remora.jobs.settlement.settle` with (d)'s release: the stop is recorded, but
    the lease is released only when the attempt finished."""
    local = w.attempts[a]
    stage = local.deferred_stage if outcome is Outcome.SUCCESS else None
    local.deferred_stage = None
    if outcome is not None and local.state == EXECUTING and not local.cancel_seen:
        complete(w, a, outcome, error, stage)
    while local.state == EXECUTING and not local.finished and w.up and not shutting_down():
        if retry_step(w, lambda: w.cooperative_stop(a)):
            break
        w.ctx.sleep(STOP_POLL)
    if local.state == STOPPED:
        retry_step(w, lambda: w.record_stop(a))
    if local.finished:  # the bug: a stopped attempt's lease is kept until it expires
        retry_step(w, lambda: w.release_lease(a))


class KeepsStoppedLeases(WorkerLoop):
    """(d) A cancelled (cooperatively stopped) attempt's lease is not released after its
    stop is recorded: the job's cancellation waits a whole lease period for nothing.  No
    spec step is wrong — ``ReleaseLease`` is merely never taken — so only the settlement's
    promise (a settled attempt holds no lease) sees it."""

    def __init__(self, worker: Worker, **kwargs: Any) -> None:
        kwargs["complete"] = _settle_keeping_stopped_leases
        super().__init__(worker, **kwargs)


class _MissesLostLeases(AttemptContext):
    """:meth:`AttemptContext.tend` without ``or not lease.live``: an expired lease (its
    holder stalled past it, the reaper marked it dead) is renewed no more, but the attempt
    is not told to stop."""

    def tend(self) -> None:
        local = self.local
        if local.state != EXECUTING:
            return
        w = self.worker
        snap = w.stores.coordination.view(w.actor, self.job_id, (self.attempt,))
        lease = snap.leases.get(self.attempt)
        if self.job_id in snap.notices or lease is None:  # the bug: a dead lease goes unseen
            local.cancel_seen = True
        elif not local.outcome_sent and not local.handler_done:
            w.renew(self.attempt)


class MissesLostLeases(WorkerLoop):
    """(e) A tend that misses a lost lease: the handler of an attempt whose lease expired
    while its process stalled runs on, never told to stop (``ctx.cancelled`` stays false),
    while the job goes to another attempt.  No spec step is wrong — the renewal is refused,
    the fenced writes are refused — so only the tend's promise (an executing attempt whose
    lease is not live knows it must stop) sees it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _MissesLostLeases(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class QuitsOnBlips(Worker):
    """(f) A heartbeat that fails (a store unavailable, a lost reply) answered as "declared
    down": the loop ends and the process exits, its handlers abandoned, while nothing
    declared the incarnation down — a transient blip takes a healthy worker out.  No spec
    step is wrong (a worker may always go down), so only the loop's promise that an end has
    its reason sees it."""

    def heartbeat(self) -> bool:
        try:
            return super().heartbeat()
        except RemoraError:
            return False


class DeclaresEarly(Reconciler):
    """(g) A declarer that does not wait for the whole ``down_after``: it declares an
    incarnation down once its heartbeat is half of it old, while a healthy loop renews it
    only every third of it — so a loop that misses a turn or two (a slow handler start, a
    long GC pause) is declared down, its handlers abandoned and its jobs retried.  No spec
    step is wrong (a worker may always go down); only the contract's margin
    (:meth:`remora.sim.jobs.loops.SimLoops.spurious_declarations`) sees it."""

    def declare_expired(self) -> int:
        stores = self.stores
        at, rows = stores.durable.liveness(stores.clock.now())
        self._durable_now = at
        after = stores.config.down_after_s / 2  # the bug: half the period
        steps = 0
        for w, _, seen in rows:
            if w != self.incarnation and at - seen >= after:
                steps += bool(quietly(functools.partial(self.declare_down, w, down_after=after)))
        return steps


class DeafHeartbeat(Worker):
    """(h) A heartbeat that matched no row (its incarnation declared down) not taken as
    the declaration: the incarnation runs on as a zombie — its steps refused by the fences,
    its slots held, its process never exiting so that no supervisor starts a fresh one.
    The down marks usually tell it anyway; after a wipe, before they are republished,
    nothing does.  No spec step is wrong; only the promise that a declared incarnation
    learns within a heartbeat period sees it."""

    def heartbeat(self) -> bool:
        self._need_up()
        now = self.stores.clock.now()
        if self.stores.durable.heartbeat(self.actor, self.id, now):
            self.beat_at = now
        return True  # the bug: no row matched, and the loop is told all is well


class KeepsRefusedReservations(Worker):
    """(i) A reservation whose authorization was refused is never given back: the
    dispatcher's release does nothing, so a job cancelled between its reservation and its
    authorization waits a whole reservation period before the cancellation finishes — and
    nothing else may reserve it meanwhile.  No spec step is wrong (a reservation may
    always expire); only the dispatch's promise (a reservation a clean turn took is in the
    loop's hands) sees it."""

    def release_reservation(self, job: str) -> bool:
        return False


class _TriesOnce(Dispatcher):
    """A dispatcher that tries an activation again only if it was never refused."""

    def awaiting_activation(self) -> list[AttemptId]:
        return [a for a in super().awaiting_activation() if a not in self.refused]


class ForgetsRefusedActivations(WorkerLoop):
    """(j) A refused activation is never tried again: the job's previous attempt still
    held a live lease when its new attempt was authorized (its worker had accepted the
    failure, not yet released the lease), and once that lease is gone nothing activates
    the new attempt — it stays authorized until its reservation expires and the reaper
    takes it back, its checkpoint's resumption lost and the job a reservation period late.
    No spec step is wrong (a reservation may always expire); only the activation's promise
    (an attempt ready for a tick is activated by a turn with a slot free) sees it."""

    def __init__(self, worker: Worker, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.dispatcher = _TriesOnce(worker, self.batch)


class _ForgetsOutages(OutageWatch):
    """(k) An outage watch for which any call answered ends every outage under way, not
    only its own service's: with the durable store away and the coordination store
    answering (a PostgreSQL failover, Redis fine), the outage never lasts past the
    budget, and the loop rides it out forever — its slots and reservations held while it
    can commit nothing, and nobody told.  No spec step is wrong; only the outage budget's
    promise (judged from the simulation's own record of the links) sees it."""

    def answered(self, service: str, started: float) -> None:
        for other in list(self._outages):
            super().answered(other, started)


class WaitsOutGrace(WorkerLoop):
    """(l) A stopping loop that has drained waits out its whole grace period anyway: a
    SIGTERM'd worker with nothing running takes ``--grace`` seconds to exit (a deploy
    waits on every idle worker), its incarnation still up and its slots unused meanwhile.
    No spec step is wrong; only the stop's promise (a stopping loop ends at its first turn
    after it drained) sees it."""

    def turn(self) -> Pause | None:
        now = self.worker.stores.clock.now()
        if self.stop.is_set() and self.deadline is None:
            self.deadline = now + self.grace
        if self.deadline is not None and not self.running and now < self.deadline:
            return Pause(Wait.HANDLER, self.poll)  # the bug: drained, yet it waits
        return super().turn()


class TakesWorkWhileStopping(WorkerLoop):
    """(m) A stopping loop that still dispatches into its free slots — its stop check
    placed after the dispatch: a SIGTERM'd worker keeps reserving and starting jobs
    during its grace period (and a drained one never ends while work is queued), then
    abandons them at the deadline — each an attempt wasted and a job retried.  No spec
    step is wrong (a worker may always go down); only the stop's promise (no new work once
    asked) sees it."""

    def turn(self) -> Pause | None:
        if self.stop.is_set():
            free = self.worker.concurrency - len(self.running)
            if free > 0:
                quietly(lambda: self._dispatch(free))  # the bug: dispatch while stopping
        return super().turn()


class _RetriesPermanent(AttemptContext):
    """An attempt context that concludes a handler's permanent failure as a retryable
    one."""

    def conclude(self, result: HandlerResult, output: bytes | None) -> HandlerResult:
        if result.outcome is Outcome.PERMANENT:
            result = HandlerResult(Outcome.RETRYABLE, result.error)  # the bug
        return super().conclude(result, output)


class RetriesPermanentFailures(WorkerLoop):
    """(n) A handler's permanent failure settled as a retryable one (a wrong branch where
    the handler's end is classified): a job its handler refused for good runs again and
    again until its retry budget is spent, each run doing its side effects again.  Every
    spec step is allowed (a worker may send any outcome); only the handler's own account
    of how it ended (:meth:`~remora.sim.jobs.loops.SimLoops.missent`) tells."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _RetriesPermanent(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class _Gone(Exception):
    """A child that died, already discarded (:class:`SettlesNothingForDeadChildren`)."""


class SettlesNothingForDeadChildren(ProcessExecution):
    """(o) A handler process that died on its own settles nothing, as a killed one does
    (the ``killed`` test dropped where the parent reads end-of-file): the attempt is left
    executing with no outcome — its lease no longer renewed, the reaper takes it a lease
    period later, and the handler's crash is gone from the job's history (it shows the
    attempt reaped).  Every spec step is
    allowed; only the settlement's promise (an outcome the handler asked for, here a
    retryable failure, is sent while the spec enables it:
    :meth:`~remora.sim.jobs.loops.SimLoops._unsent`) sees it."""

    def _serve(self, child: Child) -> tuple[HandlerResult, bytes | None]:
        try:
            return super()._serve(child)
        except ChildGone:
            self.pool.discard(child)
            raise _Gone from None

    def _run(self) -> HandlerResult:
        try:
            return super()._run()
        except _Gone:
            return HandlerResult(None)  # the bug: died on its own, settled as killed


class CachesCancelled(ChildContext):
    """(p) A child's ``ctx.cancelled`` asked of the worker once and remembered (one round
    trip per attempt instead of one per check): a handler in a child process that polls it
    to stop cleanly never learns of a cancel or a lost lease, runs on until its loop gives
    up and kills it mid-work, and its attempt ends late and uncleanly.  Every spec step is
    allowed; only the handler's view (:meth:`~remora.sim.jobs.loops.SimLoops.
    _told_cancelled`: once the loop noticed a stop condition, the handler is told) sees
    it."""

    _remembered: bool | None = None

    @property
    def cancelled(self) -> bool:
        if self._remembered is None:
            self._remembered = bool(self._link.call("cancelled"))
        return self._remembered


class RestagesOnRetry(Worker):
    """(q) A completion tried again after its transaction failed stages its success's
    output again: the first try wrote the stage (a target outside the durable store's
    database takes its own write), so the second finds nothing to stage, is refused, and
    the settlement sends the documented retryable failure — the staged work thrown away
    and one of the job's attempts spent.  (The bug the batched loops found at stop 36,
    in the default settlement too.)  Every spec step is allowed; only what the loop sent
    against what its handler asked for, from a state where the success was enabled
    (:meth:`~remora.sim.jobs.loops.SimLoops.missent`), sees it."""

    def _completion(self, a: AttemptId, outcome: Outcome, error: str, stage: bytes | None) -> Any:
        local = self.attempts[a]
        if stage is not None and local.progress >= local.max_progress:
            raise NotEnabled(f"{a}: nothing to stage")
        return super()._completion(a, outcome, error, stage)


class _TimedFromLastTend(AttemptContext):
    """An attempt context that measures its run from its last tend."""

    def timed_out(self, now: float) -> bool:
        return self.timeout is not None and now - self.tended >= self.timeout  # the bug


class NeverTimesOut(WorkerLoop):
    """(r) An attempt's run measured from its loop's last tend of it, not from its start
    (``tended`` for ``started``: both are set at the start): every turn tends it, so it
    never overruns — a job's timeout never ends a hung handler, which holds its slot and
    its job's lease for as long as it hangs.  Every spec step is allowed; only the loop's
    timeout promise (:meth:`~remora.sim.jobs.loops.SimLoops._overrun`) sees it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _TimedFromLastTend(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class _TimedFromFirstStart(AttemptContext):
    """An attempt context whose run starts when its job first started."""

    def __init__(self, worker: Worker, a: AttemptId, **kwargs: Any) -> None:
        super().__init__(worker, a, **kwargs)
        row = worker.stores.durable.job(a.job)
        self.started = row.started_at or self.started  # the bug: the job's, not the attempt's


class TimesOutFromFirstStart(WorkerLoop):
    """(s) An attempt's timeout counted from its job's first start (the row's
    ``started_at``, its first ``AuthorizeAttempt``) rather than its own: a retry inherits
    the time its predecessors ran and is ended as timed out early — a job that would have
    succeeded spends its attempts and fails.  Every spec step is allowed (a worker may
    send a retryable failure at any time); only the sent-outcome promise, which allows a
    timeout's failure from the attempt's activation plus its timeout on
    (:meth:`~remora.sim.jobs.loops.SimLoops.missent`), sees it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _TimedFromFirstStart(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class _KeepsTimedOutLease(AttemptContext):
    """An attempt context whose loop's end of a timed-out attempt releases no lease."""

    def end_from_loop(self) -> bool:
        if not self.expired or self.local.cancel_seen:
            return super().end_from_loop()
        w = self.worker
        w.release_lease = lambda a: None  # type: ignore[method-assign]  # the bug
        try:
            return super().end_from_loop()
        finally:
            del w.release_lease


class KeepsTimedOutLeases(WorkerLoop):
    """(t) The loop's end of an attempt that overran its timeout sends and processes the
    retryable failure but leaves the lease for the reconciler's next pass to release ("one
    write fewer on the loop's thread"): the job's retry cannot activate until that pass or
    the lease's expiry.  My realistic bug of stop 37: the job machines alone survived it
    (16 passed) — the settlement's release promise judged only attempts whose handler
    settled them.  Every spec step is allowed; only the release promise of a turn that
    ended an attempt itself (:meth:`~remora.sim.jobs.loops.SimLoops._unreleased`) sees
    it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _KeepsTimedOutLease(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class _JobTimeoutFirst(AttemptContext):
    """An attempt context whose job's timeout, when it has one, replaces its handler's."""

    def __init__(self, worker: Worker, a: AttemptId, **kwargs: Any) -> None:
        super().__init__(worker, a, **kwargs)
        row = worker.stores.durable.job(a.job)
        registry = worker.registry
        handler = registry.timeout(self.handler) if registry is not None else None
        self.timeout = row.timeout or handler  # the bug: the job's wins, even when larger


class JobTimeoutOverridesHandler(WorkerLoop):
    """(u) A job's own timeout (``submit --timeout``) replaces its handler's
    (``@handler(..., timeout=)``) instead of the smaller of the two applying ("the job's is
    the more specific"): a handler that must never run past 2 s runs as long as any job
    asks.  My realistic bug 2 of stop 37, which the job machines alone survived — no run's
    handler had a timeout of its own.  Every spec step is allowed; only the loop's timeout
    promise, judged with the smaller of the two
    (:meth:`~remora.sim.jobs.loops.SimLoops.timeout_of`), sees it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _JobTimeoutFirst(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class _RenewsUntilSent(AttemptContext):
    """An attempt context whose tend renews the lease until the outcome is sent."""

    def tend(self) -> None:
        local = self.local
        done, local.handler_done = local.handler_done, False  # the bug: its end forgotten
        try:
            super().tend()
        finally:
            local.handler_done = done


class RenewsEndedHandlers(WorkerLoop):
    """(v) The heartbeat renews an attempt's lease until its outcome is sent ("the attempt
    is ours until then"), its handler's end forgotten: a handler that gave up on its own
    (``Cancelled`` unasked) waits for a stop condition that never comes — its lease stays
    live, its slot taken, its job stuck for as long as the incarnation runs.  My realistic
    bug of stop 38: the job machines alone survived it before they generated handlers
    that give up (no handler ever did) and judged renewals after a handler's end.  Every
    spec step is allowed; only the heartbeat's promise
    (:meth:`~remora.sim.jobs.loops.SimLoops._renewed_ended`) sees it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _RenewsUntilSent(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class _UnlearnedEnd(AttemptContext):
    """An attempt context whose loop's end gives up a step another took first, as the
    product's ``retry_step`` did before stop 38: nothing learned, nothing stopped."""

    def _end_steps(self) -> bool:
        w, a, local = self.worker, self.attempt, self.local
        steps = self._ending
        assert steps is not None
        calls = {
            "process": lambda: w.process_outcome(a, self.timed_out_error),
            "record": lambda: w.record_stop(a),
            "release": lambda: w.release_lease(a),
        }
        while steps:
            if steps[0] == "release" and not (local.state == STOPPED or local.finished):
                steps.pop(0)
                continue
            try:
                calls[steps[0]]()
            except (Unavailable, UnknownResult):
                return False
            except (NotEnabled, WorkerDown):
                pass  # the bug: an outcome taken by another never learned
            steps.pop(0)
        return True


class ForgetsReconciledOutcomes(WorkerLoop):
    """(w) The loop's end of a timed-out attempt gives up its ``ProcessOutcome`` when the
    reconciler processed the outcome first (refused: not enabled), without learning what
    became of it — the release is skipped (the record still says executing) and the loop
    forgets the attempt: the incarnation counts it against its concurrency for good.  The
    product's own code before stop 38 (its ``retry_step`` gave the step up the same way),
    found with the loop's end that waits out no store.  Every spec step is allowed; only
    the orphan promise (:meth:`~remora.sim.jobs.loops.SimLoops._orphaned`) sees it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _UnlearnedEnd(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class GivesUpWaitingForAStop(Worker):
    """(x) A settlement's wait for a stop condition answered "stopped" when none holds —
    ``cooperative_stop`` returns True without recording anything ("nothing to stop"): a
    handler that gave up on its own ends its settlement at once with its attempt still
    executing; the loop drops the finished handler, and the incarnation counts the attempt
    against its concurrency for good.  The class of a surviving mutant of stop 37's sample
    (``worker.py``: the no-reason branch answering True).  Every spec step is allowed;
    only the orphan promise (:meth:`~remora.sim.jobs.loops.SimLoops._orphaned`) sees it."""

    def cooperative_stop(self, a: AttemptId) -> bool:
        local = self.attempts[a]
        coord = self.stores.coordination.view(self.actor, a.job, (a,))
        lease = coord.leases.get(a)
        if lease is not None and lease.live and a.job not in coord.notices:
            row = self.stores.durable.read_locked(self.actor, a.job).job
            if not row.cancel_requested and row.current_authority(a.token):
                return local.state == EXECUTING  # the bug: "nothing to stop" read as done
        return super().cooperative_stop(a)


class _OneStepPerTurn(AttemptContext):
    """An attempt context whose loop's end takes one of its steps per turn."""

    def _end_steps(self) -> bool:
        steps = self._ending
        assert steps is not None
        rest = steps[1:]
        del steps[1:]
        super()._end_steps()
        steps.extend(rest)  # the bug: the others wait for the next turns
        return not steps


class EndsOneStepPerTurn(WorkerLoop):
    """(y) The loop's end of an attempt takes one step per turn ("spread the I/O"), not
    every step in the turn it is tried: a stopped attempt's stop is recorded a turn later
    and its lease released a turn after that, its slot held meanwhile — though no store
    was away (the contract: a step is left for a later turn only when its store is away).
    The class of a surviving mutant of stop 42's sample (``_end_steps``' ``and`` ->
    ``or``: a step that answered "nothing to do" kept for the next turn).  Every spec step
    is allowed and the slot held by an end under way is one the loop's other promises
    accept; only the stuck-end promise
    (:meth:`~remora.sim.jobs.loops.SimLoops._stuck_ends`) sees it."""

    def start(self, a: AttemptId) -> AttemptContext:
        actx = _OneStepPerTurn(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


class TendsEveryOtherTick(WorkerLoop):
    """(z) The loop tends an attempt only once more than a tick has passed since its last
    tending (``>`` for ``>=`` in the turn's cadence test; planted as the period it
    amounts to: two ticks): a running handler's lease is renewed every other tick, so it
    ages towards its expiry though its worker is well — with a lease a few ticks long, a
    loop that misses a turn loses it, and the attempt is reaped and retried.  Every spec
    step is allowed (a lease may always expire), and the lease is never older than a tick
    after the turn that renews it; only the renewal cadence's promise
    (:meth:`~remora.sim.jobs.loops.SimLoops._unrenewed`) sees it.  Written as the
    session's own realistic bug at stop 46; the job machines did not kill it before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tend_every *= 2


PLANTED: dict[str, tuple[Parts | None, LoopParts]] = {
    "eager-heartbeat": (Parts(worker=EagerHeartbeat), LoopParts()),
    "sticky-slots": (None, LoopParts(loop=StickySlots)),
    "schedule-gives-up": (None, LoopParts(schedule=GivesUpSchedule)),
    "keeps-stopped-leases": (None, LoopParts(loop=KeepsStoppedLeases)),
    "misses-lost-leases": (None, LoopParts(loop=MissesLostLeases)),
    "quits-on-blips": (Parts(worker=QuitsOnBlips), LoopParts()),
    "declares-early": (Parts(reconciler=DeclaresEarly), LoopParts()),
    "deaf-heartbeat": (Parts(worker=DeafHeartbeat), LoopParts()),
    "keeps-refused-reservations": (Parts(worker=KeepsRefusedReservations), LoopParts()),
    "forgets-refused-activations": (None, LoopParts(loop=ForgetsRefusedActivations)),
    "forgets-outages": (None, LoopParts(watch=_ForgetsOutages)),
    "waits-out-grace": (None, LoopParts(loop=WaitsOutGrace)),
    "takes-work-while-stopping": (None, LoopParts(loop=TakesWorkWhileStopping)),
    "retries-permanent-failures": (None, LoopParts(loop=RetriesPermanentFailures)),
    "settles-nothing-for-dead-children": (
        None,
        LoopParts(process_execution=SettlesNothingForDeadChildren),
    ),
    "caches-cancelled": (None, LoopParts(child_context=CachesCancelled)),
    "restages-on-retry": (Parts(worker=RestagesOnRetry), LoopParts()),
    "never-times-out": (None, LoopParts(loop=NeverTimesOut)),
    "times-out-from-first-start": (None, LoopParts(loop=TimesOutFromFirstStart)),
    "keeps-timed-out-leases": (None, LoopParts(loop=KeepsTimedOutLeases)),
    "job-timeout-overrides-handler": (None, LoopParts(loop=JobTimeoutOverridesHandler)),
    "renews-ended-handlers": (None, LoopParts(loop=RenewsEndedHandlers)),
    "gives-up-waiting-for-a-stop": (Parts(worker=GivesUpWaitingForAStop), LoopParts()),
    "ends-one-step-per-turn": (None, LoopParts(loop=EndsOneStepPerTurn)),
    "tends-every-other-tick": (None, LoopParts(loop=TendsEveryOtherTick)),
}
"""Each planted bug: the runtime's parts and the loop's (None: the spec's)."""
