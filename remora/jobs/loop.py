"""The production loop of a worker incarnation: dispatch, tend, settle, heartbeat — and the
reconciler's schedule beside it.

Why a class of its own: the worker's spec steps (:mod:`remora.jobs.worker`) are what a
simulation schedules one at a time; :class:`WorkerLoop` is the production *driver* of those
steps, and it is built so that a driver other than a plain ``while`` loop can run it
unchanged:

* one iteration is one method, :meth:`WorkerLoop.turn`: it takes the iteration's steps and
  returns what to wait for next (:class:`Pause`); :meth:`WorkerLoop.run` repeats
  ``turn()`` and waits — every wait on the worker's injected context and clock — so a
  deterministic scheduler may instead call ``turn()`` itself and move its clock;
* handlers run through an :class:`~remora.jobs.executor.Executor` (production: daemon
  threads; a child-process executor or a simulation's own stepping executor plug in the
  same way);
* choosing and starting work is a :class:`Dispatcher` (one attempt per call; a batching
  dispatcher may reserve and authorize several per transaction), settling an attempt is the
  attempts' ``complete`` (:func:`remora.jobs.settlement.settle`; a batching completer may
  commit several outcomes per transaction);
* the reconciler's schedule is its own unit, :class:`ReconcileSchedule`, whose
  :meth:`~ReconcileSchedule.turn` is one pass (production runs it in a thread of its own,
  so a pass never holds up dispatch).
"""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Callable, Sequence

import attrs

from remora.errors import (
    NotEnabled,
    OutageExceeded,
    RemoraError,
    UnknownHandler,
    UnknownJob,
    WorkerDown,
)
from remora.jobs.attempt import AttemptContext
from remora.jobs.executor import Execution, Executor, ThreadExecutor
from remora.jobs.model import AttemptId
from remora.jobs.reconciler import Reconciler
from remora.jobs.settlement import BatchCompleter, Settle, quietly, settle
from remora.jobs.worker import AUTHORIZED, Worker
from remora.worker.outage import LONGEST_WAIT, OutageWatch, backoff


class Wait(enum.Enum):
    """What a :class:`Pause` waits for."""

    NOTHING = "nothing"  # take the next turn at once
    HANDLER = "handler"  # a handler finishing (the loop's wake event), at most ``seconds``
    WORK = "work"  # an Enqueue (the coordination store's wake-up), at most ``seconds``


@attrs.frozen
class Pause:
    """What the loop waits for before its next turn (:meth:`WorkerLoop.turn`)."""

    wait: Wait
    seconds: float = 0.0


AGAIN = Pause(Wait.NOTHING)

#: ``remora jobs worker``'s ``--batch`` (at most its ``--concurrency``): enough to fold the
#: transitions of a worker's slots freed together into one transaction each way
#: (docs/jobs.md, *Batched transitions*), small enough that a refused row's savepoint and
#: a batch's locks stay cheap; a library loop defaults to 1 (every transition alone).
DEFAULT_BATCH = 8


class Dispatcher:
    """Chooses and starts the worker's next attempts: an authorized attempt whose
    activation was refused first, then a queued job of the worker's queues whose handler it
    registers, highest priority first, then in submission order (reserve → authorize →
    activate).  At most ``batch`` attempts per call (never more than the free slots): with
    ``batch`` > 1 the jobs reserved in one call are authorized in **one** durable
    transaction (:meth:`Worker.authorize_batch <remora.jobs.worker.Worker.authorize_batch>`,
    each row guarded by its own reservation); reservations and activations write the
    coordination store, so they are never part of it (docs/jobs.md, *Batched
    transitions*)."""

    def __init__(self, worker: Worker, batch: int = 1) -> None:
        if batch < 1:
            raise ValueError(f"a batch of {batch} jobs")
        self.worker = worker
        #: At most this many jobs reserved and authorized per call.
        self.batch = batch
        #: When each authorized attempt's activation was last refused (tried again at
        #: most once a tick: :meth:`awaiting_activation`).
        self.refused: dict[AttemptId, float] = {}
        #: Each job's handler, once read (:meth:`registers`).
        self._handler_of: dict[str, str] = {}
        #: Reserved jobs whose authorization failed on an unavailable store, and when
        #: (:meth:`awaiting_authorization`).
        self.unauthorized: dict[str, float] = {}
        #: The candidates just read (:meth:`prefetch`), whose handlers :meth:`registers`
        #: reads together on its first miss.
        self._window: list[str] = []

    def dispatch(self, slots: int) -> list[AttemptId]:
        """Activate at most ``min(slots, batch)`` attempts; their handlers are the
        caller's to start."""
        w = self.worker
        n = max(1, min(slots, self.batch))
        # An attempt authorized earlier whose activation was refused first (the job is no
        # longer queued: nothing else would pick it up again).
        for a in self.awaiting_activation():
            if self.activate_again(a):
                return [a]
        # A reservation whose AuthorizeAttempt met an unavailable store: authorized now
        # that it may be back, rather than held idle until the reservation expires.
        pending = self.awaiting_authorization()
        if pending:
            return self.start(pending[:n])
        # A narrow read of the first few queued jobs of this worker's queues by rank
        # (highest priority first, then submission order), not the whole coordination
        # state.
        accept = None if w.registry is None else self.registers
        jobs = w.stores.coordination.candidates(
            w.actor, max(8, 2 * n), accept, w.queues, prefetch=self.prefetch
        )
        reserved: list[str] = []
        if self.batch > 1:
            # A batching loop reserves in one coordination call (each job its own guarded
            # Reserve step, in rank order): one round trip however many it tries.
            reserved = w.reserve_batch(jobs, n) if jobs else []
        else:
            for job in jobs:
                if len(reserved) >= n:
                    break
                if w.reserve(job) is None:
                    continue
                reserved.append(job)
        return self.start(reserved) if reserved else []

    def start(self, jobs: str | list[str]) -> list[AttemptId]:
        """Authorize and activate an attempt of each of ``jobs``, which this worker
        reserved: one job by its own transaction, several in one batched transaction."""
        w = self.worker
        batch = [jobs] if isinstance(jobs, str) else jobs
        authorized: list[AttemptId | RemoraError]
        try:
            if len(batch) == 1:
                authorized = [w.authorize(batch[0])]
            else:
                authorized = list(w.authorize_batch(batch))
        except NotEnabled as exc:
            authorized = [exc] * len(batch)
        except RemoraError:
            # The store is unavailable (or the result unknown): try again while the
            # reservations last (the guard refuses a reservation that is gone).
            for job in batch:
                self.unauthorized[job] = w.stores.clock.now()
            return []
        started: list[AttemptId] = []
        for job, got in zip(batch, authorized, strict=True):
            if isinstance(got, RemoraError):
                self.unauthorized.pop(job, None)
                quietly(functools.partial(w.release_reservation, job))
                continue
            self.unauthorized.pop(job, None)
            try:
                w.activate(got)
            except NotEnabled:
                # Usually the job's previous attempt still holds a live lease (its worker
                # has accepted its failure but not yet released the lease): activation is
                # only delayed, a later pass tries again (awaiting_activation).
                self.refused[got] = w.stores.clock.now()
                continue
            except RemoraError:
                # The coordination store is unavailable: the attempts activated so far are
                # started, the rest stay authorized (awaiting_activation tries them again).
                if not started:
                    raise
                break
            started.append(got)
        return started

    def awaiting_authorization(self) -> list[str]:
        """The jobs this worker still holds a reservation of whose ``AuthorizeAttempt``
        failed on an unavailable store, each tried at most once a tick."""
        w = self.worker
        due = w.stores.clock.now() - w.stores.config.tick_ms / 1000
        for job in [j for j in self.unauthorized if j not in w.reservations]:
            del self.unauthorized[job]
        return sorted(j for j, at in self.unauthorized.items() if at <= due)

    def registers(self, job: str) -> bool:
        """Whether this worker registers the handler of ``job`` (a job's handler never
        changes: read once from the durable store, then remembered).  A worker reserves
        only such jobs; the others stay queued for a worker that has their handler."""
        w = self.worker
        handler = self._handler_of.get(job)
        if handler is None and job in self._window:
            unknown = [j for j in self._window if j not in self._handler_of]
            self._window = []
            if len(self._handler_of) + len(unknown) >= 100_000:
                self._handler_of.clear()
            self._handler_of.update(w.stores.durable.handlers(unknown))
            handler = self._handler_of.get(job)
        if handler is None:
            try:
                handler = w.stores.durable.job(job).handler
            except UnknownJob:
                return False
            if len(self._handler_of) >= 100_000:
                self._handler_of.clear()
            self._handler_of[job] = handler
        return w.registry is not None and handler in w.registry.names()

    def prefetch(self, jobs: Sequence[str]) -> None:
        """The window of candidates :meth:`registers` is about to be asked about: on its
        first miss it reads the handlers of every job of the window not yet known in
        **one** durable read — about one statement per window, where one per job was."""
        self._window = list(jobs)

    def awaiting_activation(self) -> list[AttemptId]:
        """This worker's authorized attempts whose reservation it still holds: their
        activation was refused (``ActivateAttempt`` waits for another attempt's live lease
        to end, :meth:`~remora.jobs.guards.Guards.other_live_lease`) and may be tried
        again.  Given up, they would stay authorized until the reservation expired and the
        reaper took them back — a wasted attempt, and the checkpoint lost with it.  Each is
        tried at most once a tick (a try takes the job's durable lock)."""
        w = self.worker
        due = w.stores.clock.now() - w.stores.config.tick_ms / 1000
        with w._lock:
            return sorted(
                local.id
                for local in w.open_attempts()
                if local.state == AUTHORIZED
                and w.reservations.get(local.id.job) == local.rid
                and self.refused.get(local.id, due) <= due
            )

    def activate_again(self, a: AttemptId) -> bool:
        """Try a refused activation again; when the reservation is gone (it expired) stop
        trying: the attempt can never activate, the reaper takes it back."""
        w = self.worker
        try:
            w.activate(a)
            self.refused.pop(a, None)
            return True
        except NotEnabled:
            self.refused[a] = w.stores.clock.now()
        rid = w.attempts[a].rid
        held = w.stores.coordination.view(w.actor, a.job).reservations.get(a.job)
        if held is None or held.worker != w.id or held.rid != rid:
            with w._lock:
                if w.reservations.get(a.job) == rid:
                    del w.reservations[a.job]
                self.refused.pop(a, None)
        return False


class ReconcileSchedule:
    """The reconciler's ambient passes on a schedule: a full pass every ``full_every``
    passes (the first one too), incremental ones in between (they read only the work in
    flight; the full ones do the housekeeping of finished jobs the incremental ones may
    miss)."""

    def __init__(self, reconciler: Reconciler, every: float, full_every: int = 10) -> None:
        self.reconciler = reconciler
        self.every = every
        self.full_every = full_every
        self.passes = 0

    def turn(self) -> float:
        """One pass (a store failure is left for the next one); returns the seconds until
        the next."""
        full = self.passes % self.full_every == 0
        self.passes += 1
        quietly(functools.partial(self.reconciler.reconcile_once, full=full))
        return self.every

    def run(self, halt: threading.Event, failed: Callable[[BaseException], None]) -> None:
        """Pass after pass until ``halt`` is set (a thread's body); a failure that is not
        the stores' (a bug) is handed to ``failed`` and ends the schedule."""
        try:
            while not halt.is_set():
                self.reconciler.actor.ctx.sleep(self.turn(), wake=halt)
        except BaseException as exc:  # not a store failure: end the worker with it
            failed(exc)


class WorkerLoop:
    """The production loop of one incarnation (module docstring).

    Until ``stop`` is set: reserve → authorize → activate → handler (through the
    executor, at most ``concurrency`` at once), renew leases, report progress, react to
    cancel notices; every ``reconcile_every`` seconds run the reconciler's ambient
    actions (a full pass every ``full_every`` passes, incremental ones in between) — in a
    thread of its own, so a pass never holds up dispatch (with one slot, passes run in the
    loop took a quarter of its time with two worker processes: benchmarks/jobs_peers.py).
    An executing attempt is tended (lease renewed, cancel noticed) at most once a tick.

    Once ``stop`` is set no job is reserved any more; running attempts may finish for up
    to ``grace`` seconds (their leases still renewed), then the worker abandons the ones
    still running (a thread is left behind: a handler that does not return cannot be
    ended in a thread) and goes down (``CrashWorker``: their attempts stop).  A handler
    still running ``cancel_grace`` seconds (default: two ticks) after its attempt's cancel
    or lost lease was noticed is abandoned the same way, through ``CooperativeStop``: its
    slot is free again.  One that overruns its handler's ``timeout`` ends as a retryable
    failure (``SendOutcome`` + ``ProcessOutcome``) the same way, ``cancel_grace`` after it
    was asked to stop (``ctx.cancelled``); whatever the abandoned handler does afterwards
    is refused (its attempt is no longer executing), so nothing it stages is ever committed
    — and an executor that can end it does (:mod:`remora.jobs.processes` kills its child).

    Given an ``outage`` watch, the loop rides out a store outage: the watch hears of every
    call of the incarnation and of its reconciler (whichever thread made it); while one is
    under way the loop backs off (pauses doubling up to a tick), each step being tried
    again on a later turn (the settlement's steps by the worker's retry policy); an outage
    that lasts past the watch's budget ends the loop with
    :class:`~remora.errors.OutageExceeded`.

    ``batch`` > 1 batches the durable transitions (docs/jobs.md, *Batched transitions*):
    up to ``batch`` reserved jobs authorized in one transaction (:class:`Dispatcher`), up
    to ``batch`` finished attempts completed in one
    (:class:`~remora.jobs.settlement.BatchCompleter`)."""

    def __init__(
        self,
        worker: Worker,
        *,
        poll: float = 0.05,
        reconcile_every: float = 0.5,
        on_idle: Callable[[], None] | None = None,
        full_every: int = 10,
        grace: float = 30.0,
        cancel_grace: float | None = None,
        executor: Executor | None = None,
        dispatcher: Dispatcher | None = None,
        complete: Settle | None = None,
        reconciler: Reconciler | None = None,
        outage: OutageWatch | None = None,
        batch: int = 1,
    ) -> None:
        if worker.registry is None:
            raise UnknownHandler("a worker needs a handler registry (--app)")
        self.worker = worker
        stores = worker.stores
        self.poll = poll
        self.on_idle = on_idle
        self.grace = grace
        #: Seconds between two tendings of an executing attempt (a tick).
        self.tend_every = stores.config.tick_ms / 1000
        self.cancel_grace = 2 * self.tend_every if cancel_grace is None else cancel_grace
        #: The heartbeat: a few times per ``down_after`` (not per job).
        self.beat_every = stores.config.down_after_s / 3
        self.executor: Executor = executor or ThreadExecutor(worker.id)
        #: Jobs reserved and authorized per dispatch, finished attempts completed per
        #: transaction (1: each in a transaction of its own; capped by the free slots).
        if batch < 1:
            raise ValueError(f"a batch of {batch}")
        # Never more than the slots: with one slot there is nothing to batch, and the
        # loop takes exactly the unbatched path.
        self.batch = min(batch, worker.concurrency)
        self.dispatcher = dispatcher or Dispatcher(worker, self.batch)
        if complete is None:
            complete = settle if self.batch == 1 else BatchCompleter(self.batch)
        self.complete: Settle = complete
        self.schedule = ReconcileSchedule(
            reconciler
            or Reconciler(
                stores,
                f"{worker.id}.reconciler",
                recorder=worker.actor.recorder,
                incarnation=worker.id,
            ),
            reconcile_every,
            full_every,
        )
        #: Watches every call of the incarnation and its reconciler for an outage (None:
        #: the loop never gives up on an unavailable store).
        self.outage = outage
        if outage is not None:
            worker.actor.watch = outage
            self.schedule.reconciler.actor.watch = outage
        #: The attempts whose handlers run, with their executions.
        self.running: dict[AttemptId, tuple[AttemptContext, Execution]] = {}
        #: Set when a handler finishes: ends a :data:`Wait.HANDLER` pause early.
        self.wake = threading.Event()
        #: Set to stop (no new work; the running attempts get ``grace`` seconds).
        self.stop = threading.Event()
        #: When the grace period ends, once stopping.
        self.deadline: float | None = None
        #: Why the loop ended, when it failed (declared down, a bug in a reconcile pass).
        self.failed: list[BaseException] = []

    # -- production ------------------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None) -> None:
        """Turn after turn, waiting between them, until the loop ends (:meth:`turn`); the
        reconciler's schedule runs meanwhile in a thread of its own.  Then the attempts
        still running are abandoned and the incarnation shuts down.  Raises why the loop
        failed, if it did (:class:`~remora.errors.WorkerDown`, …)."""
        if stop is not None:
            self.stop = stop
        halt = threading.Event()

        def failed(exc: BaseException) -> None:
            self.failed.append(exc)
            self.stop.set()

        ambient = threading.Thread(
            target=self.schedule.run,
            args=(halt, failed),
            name=f"{self.worker.id}.reconciler",
            daemon=True,
        )
        ambient.start()
        try:
            while (pause := self.turn()) is not None:
                self.wait(pause)
        finally:
            halt.set()
            ambient.join()
            self.close()
        if self.failed:
            raise self.failed[0]

    def wait(self, pause: Pause) -> None:
        """Wait as ``pause`` says, on the worker's context (its injected clock)."""
        w = self.worker
        if pause.wait is Wait.WORK:
            # A free slot and nothing taken: wait for an Enqueue (Redis: a blocking pop of
            # its wake-up) rather than a whole ``poll`` — that pause was half of the median
            # latency (benchmarks/jobs_peers.py).
            if quietly(lambda: w.stores.coordination.await_work(w.actor, pause.seconds)) is None:
                w.ctx.sleep(pause.seconds, wake=self.wake)  # the store is unreachable
        elif pause.wait is Wait.HANDLER:
            w.ctx.sleep(pause.seconds, wake=self.wake)

    def close(self) -> None:
        """The loop ended: abandon the attempts still running, shut the incarnation down
        (``CrashWorker``: their attempts stop)."""
        for actx, execution in self.running.values():
            actx.abandon()  # still running after the grace period: left behind
            execution.abandon()
        quietly(self.worker.shutdown)

    # -- one iteration ---------------------------------------------------------------------------
    def turn(self) -> Pause | None:
        """One iteration: heartbeat when due, forget finished attempts, tend the running
        ones, end overdue ones, dispatch into a free slot; returns what to wait for before
        the next turn, or ``None`` when the loop has ended (stopped and drained, or the
        incarnation is down — then :attr:`failed` says so)."""
        w = self.worker
        self.wake.clear()
        now = w.stores.clock.now()
        if self.stop.is_set() and self.deadline is None:
            self.deadline = now + self.grace
        if self.deadline is not None and (not self.running or now >= self.deadline):
            return None
        gone = None if self.outage is None else self.outage.exceeded()
        if gone is not None:
            # A store stayed away past the budget: give up (the process exits 1).
            assert self.outage is not None
            self.failed.append(OutageExceeded(gone.describe(self.outage.now(), self.outage.budget)))
            return None
        if not w.up or (now - w.beat_at >= self.beat_every and quietly(w.heartbeat) is False):
            # Declared down by another incarnation (learned from the heartbeat or from a
            # down mark): stop at once; the process ends (a new one is a new incarnation).
            self.failed.append(WorkerDown(f"worker {w.id} was declared down"))
            return None
        for a, (actx, execution) in list(self.running.items()):
            if execution.done() and not actx.end_pending:  # a pending end is finished below
                del self.running[a]
        for actx, _ in self.running.values():
            if now - actx.tended >= self.tend_every:
                actx.tended = now
                quietly(actx.tend)
        for a, (actx, execution) in list(self.running.items()):
            if actx.overdue(now, self.cancel_grace) and quietly(actx.end_from_loop):
                self.running.pop(a, None)
                execution.abandon()
        poll = self.pause()
        if self.deadline is not None:
            # Stopping: no new work; wake when a handler finishes.
            return Pause(Wait.HANDLER, min(poll, max(self.deadline - now, 0.0)))
        free = w.concurrency - len(self.running)
        if free > 0 and quietly(lambda: self._dispatch(free)):
            return AGAIN
        if self.on_idle is not None:
            # The idle check reads the durable store: a link down is a pause, not the
            # worker's end (it exited on a PostgreSQL cut: tests/jobs/test_real_faults.py).
            quietly(self.on_idle)
        if len(self.running) < w.concurrency:
            return Pause(Wait.WORK, poll)
        # Every slot busy: wake as soon as a handler finishes (its execution's done
        # callback sets ``wake``) rather than after a whole ``poll``: with one slot, a
        # fixed pause per job capped a worker at 1/poll jobs per second
        # (benchmarks/jobs_peers.py).
        return Pause(Wait.HANDLER, poll)

    def pause(self) -> float:
        """The pause between turns: ``poll``, or while an outage is under way a backoff
        (as long as the outage has lasted, at most a tick so leases are still renewed as
        soon as the store is back, and at most :data:`LONGEST_WAIT`)."""
        outage = None if self.outage is None else self.outage.ongoing()
        if outage is None or self.outage is None:
            return self.poll
        longest = max(self.poll, min(LONGEST_WAIT, self.tend_every))
        return backoff(self.outage.now() - outage.since, shortest=self.poll, longest=longest)

    def _dispatch(self, slots: int) -> bool:
        started = self.dispatcher.dispatch(slots)
        for a in started:
            self.start(a)
        return bool(started)

    def start(self, a: AttemptId) -> AttemptContext:
        """Start the handler of the executing attempt ``a`` through the executor."""
        actx = AttemptContext(self.worker, a, complete=self.complete)
        self.running[a] = (actx, self.executor.start(actx, self.wake.set))
        return actx


__all__ = [
    "AGAIN",
    "DEFAULT_BATCH",
    "Dispatcher",
    "Pause",
    "ReconcileSchedule",
    "Wait",
    "WorkerLoop",
]
