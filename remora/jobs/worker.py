"""A worker incarnation: reserve, authorize, activate, run the handler, renew, report
progress, checkpoint, send the outcome, stop cooperatively, release.

Each public method below is **one runtime step** — at most one store operation — and
implements at most one spec action (named in its docstring); a simulation calls them one at
a time from a single scheduler, production calls them from :meth:`Worker.run`'s loop and
from the handler's thread (:class:`AttemptContext`).  What the worker keeps in memory per
attempt (:class:`LocalAttempt`) is the spec's worker-local part of the attempt state
(``AttemptAuthorized``/``AttemptExecuting``/``AttemptStopped``).

Local guards (the worker's own part of a spec guard, e.g. ``attemptState[a] =
AttemptExecuting`` before ``AdvanceAttempt``) are checked here; store guards in the stores.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar, cast

import attrs

from remora.context import Context
from remora.errors import RemoraError, Unavailable, UnknownResult
from remora.faults import NO_FAULTS, IOHook
from remora.jobs import guards
from remora.jobs.actions import Action
from remora.jobs.guards import Change
from remora.jobs.handlers import (
    Cancelled,
    Permanent,
    Registry,
    Retryable,
    UnknownHandler,
    encode_output,
)
from remora.jobs.io import NULL_RECORDER, Actor, Links, Recorder
from remora.jobs.model import (
    AttemptId,
    IntentId,
    JobRow,
    NotEnabled,
    Outcome,
    Phase,
    SecretState,
    Stop,
    UnknownJob,
)
from remora.jobs.stores import Stores

F = TypeVar("F", bound=Callable[..., Any])


class DaemonPool:
    """Runs each attempt's handler in a daemon thread of its own (at most ``concurrency``
    at once: the loop dispatches only into a free slot).  Unlike a ``ThreadPoolExecutor``,
    whose threads the interpreter joins at exit, a thread whose handler hangs can be
    abandoned: the worker stops waiting on it, and the process can still exit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._n = 0

    def submit(self, fn: Callable[[], None]) -> Future[None]:
        fut: Future[None] = Future()
        fut.set_running_or_notify_cancel()

        def body() -> None:
            try:
                fn()
            except BaseException as exc:  # reported through the future
                fut.set_exception(exc)
            else:
                fut.set_result(None)

        self._n += 1
        threading.Thread(target=body, name=f"{self.name}-{self._n}", daemon=True).start()
        return fut


def serial(method: F) -> F:
    """One store operation of this worker at a time (the loop and the handler threads share
    the incarnation): its steps' program order (``actor_seq``) is then their effect order."""

    @functools.wraps(method)
    def wrapper(self: Worker, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(F, wrapper)


class WorkerDown(RemoraError):
    """The incarnation is down (crashed or shut down): it takes no more steps."""


EXECUTING = "executing"
AUTHORIZED = "authorized"
STOPPED = "stopped"
COMMITTED = "committed"


@attrs.define
class LocalAttempt:
    """The worker's memory of one attempt."""

    id: AttemptId
    rid: str
    state: str = AUTHORIZED
    progress: int = 0  # attemptProgress as this worker knows it
    max_progress: int = 1
    outcome_sent: bool = False
    finished: bool = False  # processed (accepted or rejected) or given up
    stop_recorded: bool = False
    cancel_seen: bool = False
    handler_done: bool = False  # the handler returned: the lease is no longer renewed
    error: str = ""


class Worker:
    """One incarnation (its id is never reused)."""

    def __init__(
        self,
        stores: Stores,
        worker_id: str,
        *,
        concurrency: int = 1,
        hook: IOHook = NO_FAULTS,
        recorder: Recorder = NULL_RECORDER,
        links: Links | None = None,
        registry: Registry | None = None,
        durable_guard: bool = False,
    ) -> None:
        self.stores = stores
        #: Run ``ActivateAttempt``/``RenewLease``/``ReportProgress`` under the job's durable
        #: lock, refreshing the coordination mirror from the durable row first: needed when
        #: the coordination store is private to this process (the embedded default), where
        #: a cancel or a revocation by another process cannot raise the mirror beforehand.
        self.durable_guard = durable_guard
        self.id = worker_id
        self.concurrency = concurrency
        self.ctx = Context(stores.clock)
        self.actor = Actor(worker_id, self.ctx, hook=hook, recorder=recorder, links=links)
        self.registry = registry
        self.up = False
        self.attempts: dict[AttemptId, LocalAttempt] = {}
        self.reservations: dict[str, str] = {}  # job -> rid
        #: The job row each attempt was authorized on (handler, payload): read once.
        self.rows: dict[AttemptId, JobRow] = {}
        #: When each authorized attempt's activation was last refused (tried again at
        #: most once a tick: :meth:`_awaiting_activation`).
        self.refused: dict[AttemptId, float] = {}
        #: Set when a handler finishes: wakes the production loop (:meth:`run`).
        self.wake = threading.Event()
        #: When the heartbeat was last renewed (the injected clock).
        self.beat_at = 0.0
        #: The process is gone (simulation of a SIGKILL): it takes no more steps, and
        #: nothing records that — until another incarnation declares it down.
        self.killed = False
        self._lock = threading.RLock()
        #: Each job's handler, once read (:meth:`registers`).
        self._handler_of: dict[str, str] = {}

    # -- helpers ------------------------------------------------------------------------------
    def _need_up(self) -> None:
        if not self.up:
            raise WorkerDown(f"worker {self.id} is down")

    def _local(self, a: AttemptId) -> LocalAttempt:
        local = self.attempts.get(a)
        if local is None:
            raise NotEnabled(f"{self.id} does not run {a}")
        return local

    def _executing(self, a: AttemptId, *, in_flight_ok: bool = False) -> LocalAttempt:
        """The local guard ``attemptState[a] = AttemptExecuting``.  Once an outcome is in
        flight, anyone may process it (``ProcessOutcome`` is global) and stop or commit the
        attempt without this worker knowing: so no step that needs ``AttemptExecuting`` is
        taken until the worker has learned what became of it (:meth:`learn_outcome`)."""
        self._need_up()
        local = self._local(a)
        if local.state != EXECUTING:
            raise NotEnabled(f"{a} is {local.state}, not executing")
        if local.outcome_sent and not in_flight_ok:
            raise NotEnabled(f"{a}: an outcome is in flight")
        return local

    @serial
    def learn_outcome(self, a: AttemptId) -> bool:
        """Not a spec step: read what became of an in-flight outcome (processed by this
        worker, or by the reconciler); returns True when it is no longer in flight."""
        local = self._local(a)
        if not local.outcome_sent:
            return True
        row = self.stores.durable.read_locked(self.actor, a.job).attempts[a.token]
        if row.pending is not None:
            return False
        local.outcome_sent = False
        if row.committed:
            local.state, local.finished = COMMITTED, True
        elif row.stop is Stop.FAILED:
            local.state, local.finished, local.stop_recorded = STOPPED, True, True
        return True

    def executing_count(self) -> int:
        """``Cardinality(ExecutingFor(w))``."""
        return sum(1 for x in self.attempts.values() if x.state == EXECUTING)

    # -- incarnation ----------------------------------------------------------------------------
    @serial
    def start(self) -> None:
        """``StartIncarnation(w)``: register the fresh id durably (its heartbeat starts)."""
        now = self.stores.clock.now()
        self.stores.durable.register_worker(self.actor, self.id, now)
        self.beat_at = now
        self.up = True

    def crash(self) -> None:
        """A SIGKILL (simulation): the process is gone — no I/O, nothing recorded, and its
        memory is frozen as it was.  Not a spec step: the incarnation stays ``WorkerUp``
        (its attempts executing) until another incarnation declares it down
        (:meth:`Reconciler.declare_down`: that declaration is the ``CrashWorker(w)``)."""
        self._need_up()
        self.up = False
        self.killed = True
        self.ctx.cancel()

    @serial
    def heartbeat(self) -> bool:
        """Renew the incarnation's heartbeat in the durable store (not a spec step; one
        statement every few ticks, never per job).  False when the incarnation was
        declared down: it stops at once (:meth:`declared_down`) and must not act again —
        the process ends, and a new one starts as a fresh incarnation."""
        self._need_up()
        now = self.stores.clock.now()
        if self.stores.durable.heartbeat(self.actor, self.id, now):
            self.beat_at = now
            return True
        self.declared_down()
        return False

    def declared_down(self) -> None:
        """The incarnation learned it is down (declared by another one): its attempts are
        stopped in the spec already (``CrashWorker``), so this records nothing."""
        self.up = False
        for local in self.attempts.values():
            if local.state in (AUTHORIZED, EXECUTING):
                local.state = STOPPED

    @serial
    def shutdown(self) -> None:
        """A clean exit: the incarnation goes down durably (``CrashWorker(w)``); its
        attempts stop, so their staging becomes eligible for cleanup.  When it was
        declared down meanwhile, it only stops."""
        self._need_up()
        with contextlib.suppress(NotEnabled):
            self.stores.durable.retire_worker(self.actor, self.id)
        self.declared_down()

    # -- dispatch -----------------------------------------------------------------------------
    @serial
    def reserve(self, job: str) -> str | None:
        """``Reserve(j, w)``: the reservation id, or None when not enabled."""
        self._need_up()
        rid = self.stores.coordination.reserve(
            self.actor, job, self.id, self.executing_count(), self.concurrency
        )
        if rid is not None:
            self.reservations[job] = rid
        return rid

    @serial
    def authorize(self, job: str) -> AttemptId:
        """``AuthorizeAttempt(j, w)``: durable CAS allocating the next token; the
        reservation is read from the coordination store under the job's lock."""
        self._need_up()
        rid = self.reservations.get(job)
        if rid is None:
            raise NotEnabled(f"{self.id} holds no reservation of {job}")
        coord = self.stores.coordination

        def decide(lk: Any) -> Change:
            r = coord.view(self.actor, job).reservations.get(job)
            owner = lk.attempts.get(lk.job.checkpoint_owner)
            owner_stopped = owner is not None and guards.durably_stopped(
                owner, owner.worker not in lk.workers_down
            )
            return guards.authorize(
                lk.job,
                lk.attempts,
                self.id,
                rid,
                reserved=r is not None and r.worker == self.id and r.rid == rid,
                worker_up=self.up and self.id not in lk.workers_down,
                owner_stopped=owner_stopped,
            )

        change = self.stores.durable.transact(self.actor, job, decide)
        token = int(change.result)
        a = AttemptId(job, token)
        # The committed row came back with the change (re-read only after an unknown
        # result was resolved from the log).
        job_row = change.job if change.job is not None else self.stores.durable.job(job)
        start = job_row.checkpoint if job_row.checkpoint_owner == token else 0
        self.attempts[a] = LocalAttempt(a, rid, progress=start, max_progress=job_row.max_progress)
        self.rows[a] = job_row
        return a

    @serial
    def activate(self, a: AttemptId) -> None:
        """``ActivateAttempt(a)``: consume the reservation, take the lease, publish the
        progress; the coordination store compares the reservation id and the mirrored
        authority (see :mod:`remora.jobs.coordination`)."""
        self._need_up()
        local = self._local(a)
        if local.state != AUTHORIZED:
            raise NotEnabled(f"{a} is {local.state}")
        coord = self.stores.coordination
        ok = self._guarded(
            a, lambda: coord.activate(self.actor, a, self.id, local.rid, local.progress)
        )
        if not ok:
            raise NotEnabled(f"{a}: activation refused (reservation or authority lost)")
        local.state = EXECUTING
        self.reservations.pop(a.job, None)

    @serial
    def release_reservation(self, job: str) -> bool:
        """``ReleaseReservation(j)`` of this worker's own reservation, when the durable job
        is terminal or cancelling (checked under the job's lock)."""
        self._need_up()
        rid = self.reservations.get(job)
        if rid is None:
            return False

        def block(lk: Any) -> bool:
            row = lk.job
            if not (row.phase.terminal or row.phase is Phase.CANCELLING):
                return False
            return self.stores.coordination.release_reservation(self.actor, job, rid)

        done = self.stores.durable.with_lock(self.actor, job, block)
        if done:
            self.reservations.pop(job, None)
        return done

    # -- execution ------------------------------------------------------------------------------
    @serial
    def renew(self, a: AttemptId) -> bool:
        """``RenewLease(a)``."""
        self._executing(a)
        return bool(
            self._guarded(a, lambda: self.stores.coordination.renew(self.actor, a, self.id))
        )

    @serial
    def report_progress(self, a: AttemptId) -> bool:
        """``ReportProgress(a)``."""
        local = self._executing(a)
        coord = self.stores.coordination
        return bool(self._guarded(a, lambda: coord.report_progress(self.actor, a, local.progress)))

    def _guarded(self, a: AttemptId, op: Callable[[], bool]) -> bool:
        if not self.durable_guard:
            return op()
        coord = self.stores.coordination

        def block(lk: Any) -> bool:
            row = lk.job
            if self.id in lk.workers_down:
                coord.mark_down(self.actor, self.id)
            if not row.current_authority(a.token) or row.phase.terminal:
                coord.raise_floor(self.actor, a.job, a.token)
            if row.cancel_requested:
                coord.mark_cancel(self.actor, a.job)
            return op()

        return bool(self.stores.durable.with_lock(self.actor, a.job, block))

    @serial
    def advance(self, a: AttemptId, amount: int, data: bytes = b"") -> None:
        """``AdvanceAttempt(a, amount)``: stage the attempt's snapshot at ``amount``."""
        local = self._executing(a)
        if not (local.progress < amount <= local.max_progress):
            raise NotEnabled(
                f"{a}: amount {amount} not in {local.progress + 1}..{local.max_progress}"
            )
        seq = self.actor.next_seq()
        self.stores.target.write(self.actor, a, amount, data, worker=self.id)
        local.progress = amount
        self.actor.record(seq, Action.ADVANCE_ATTEMPT, {"a": str(a), "amount": amount})

    @serial
    def checkpoint(self, a: AttemptId) -> None:
        """``PersistCheckpoint(a)``."""
        local = self._executing(a)
        progress = local.progress
        self.stores.durable.transact(
            self.actor,
            a.job,
            lambda lk: guards.persist_checkpoint(
                lk.job, lk.attempts, a.token, progress, worker_up=self.id not in lk.workers_down
            ),
        )

    @serial
    def send_outcome(self, a: AttemptId, outcome: Outcome) -> None:
        """``SendOutcome(a, o)``: the request becomes durably pending."""
        local = self._executing(a)
        if outcome is Outcome.SUCCESS and local.progress != local.max_progress:
            raise NotEnabled(f"{a}: success needs a complete stage")
        self.stores.durable.transact(
            self.actor,
            a.job,
            lambda lk: guards.send_outcome(
                lk.job, lk.attempts, a.token, outcome, worker_up=self.id not in lk.workers_down
            ),
        )
        local.outcome_sent = True

    @serial
    def process_outcome(self, a: AttemptId, error: str = "") -> str:
        """``ProcessOutcome(a)``: the durable compare-and-swap (returns the action taken)."""
        self._need_up()
        change = process_outcome(self.stores, self.actor, a, error)
        local = self.attempts.get(a)
        if local is not None:
            local.outcome_sent = False
            if change.action == Action.ACCEPT_SUCCESS:
                local.state, local.finished = COMMITTED, True
            elif change.action.startswith("Accept"):
                local.state, local.finished = STOPPED, True
                local.stop_recorded = True  # the durable store knows: the attempt failed
        return change.action

    @serial
    def cooperative_stop(self, a: AttemptId) -> bool:
        """``CooperativeStop(a)`` when a stop condition holds: the lease expired, a cancel
        notice, the durable cancel request, or lost authority.  With an outcome in flight
        the worker first learns whether it was processed (its linearization point is that
        durable read: the stop is local, nobody else observes it)."""
        local = self._executing(a, in_flight_ok=True)
        if local.outcome_sent and self.learn_outcome(a) and local.state != EXECUTING:
            return False
        coord = self.stores.coordination.view(self.actor, a.job, (a,))
        if self.id in coord.down:
            # Declared down (the mark precedes the durable declaration): the attempt is
            # stopped in the spec already; the incarnation stops, recording nothing.
            self.declared_down()
            return False
        lease = coord.leases.get(a)
        reason = ""
        lk = None
        if lease is None or not lease.live:
            reason = "lease lost"
        elif a.job in coord.notices:
            reason = "cancel notice"
        else:
            try:
                lk = self.stores.durable.read_locked(self.actor, a.job)
            except Unavailable:
                lk = None
            if lk is not None and lk.job.cancel_requested:
                reason = "cancel requested"
            elif lk is not None and not lk.job.current_authority(a.token):
                reason = "authority lost"
        if not reason:
            return False
        if lk is None:
            # A stop read from the coordination store alone: its mark of this incarnation
            # may be gone (a wipe forgets the marks, and the view carries only the marks of
            # its leases' holders), so the durable store confirms the incarnation is still
            # up — else the stop waits (Unavailable) until it can tell.
            lk = self.stores.durable.read_locked(self.actor, a.job)
        if self.id in lk.workers_down:
            self.declared_down()  # declared down: stopped in the spec already
            return False
        local.state = STOPPED
        local.error = reason
        self.actor.record(self.actor.next_seq(), Action.COOPERATIVE_STOP, {"a": str(a)})
        return True

    @serial
    def record_stop(self, a: AttemptId) -> bool:
        """Not a spec step: tell the durable store the attempt is stopped (after
        ``CooperativeStop``, or for an attempt revoked before it was activated)."""
        self._need_up()
        local = self._local(a)
        if local.stop_recorded:
            return False
        if local.state == AUTHORIZED:
            lk = self.stores.durable.read_locked(self.actor, a.job)
            row = lk.attempts.get(a.token)
            if row is None or row.stop is not Stop.REVOKED:
                return False  # still Authorized in the spec: nothing to record
            local.state = STOPPED
        elif local.state != STOPPED:
            return False
        with contextlib.suppress(NotEnabled):  # already recorded
            self.stores.durable.transact(
                self.actor, a.job, lambda lk: guards.record_stop(lk.job, lk.attempts, a.token)
            )
        local.stop_recorded = True
        return True

    @serial
    def release_lease(self, a: AttemptId) -> bool:
        """``ReleaseLease(a)`` of a stopped or finished attempt."""
        self._need_up()
        local = self._local(a)
        if local.state != STOPPED and not local.finished:
            return False
        return self.stores.coordination.release_lease(self.actor, a)

    # -- credentials ------------------------------------------------------------------------------
    @serial
    def put_secret(self, a: AttemptId, secret: bytes) -> IntentId:
        """Write a credential for the job: ``PrepareCredentialIntent``,
        ``BeginCredentialWrite``, ``CompleteCredentialWrite`` (the vault write),
        ``RecordCredentialWrite``, ``CommitCredentialVersion``."""
        self._executing(a)
        return write_credential(self.stores, self.actor, a, secret)

    # -- production loop -------------------------------------------------------------------
    def run(
        self,
        *,
        stop: threading.Event,
        poll: float = 0.05,
        reconcile_every: float = 0.5,
        on_idle: Callable[[], None] | None = None,
        full_every: int = 10,
        grace: float = 30.0,
        cancel_grace: float | None = None,
    ) -> None:
        """Run until ``stop`` is set: reserve → authorize → activate → handler (in a thread
        pool of ``concurrency``), renew leases, report progress, react to cancel notices;
        every ``reconcile_every`` seconds run the reconciler's ambient actions (a full pass
        every ``full_every`` passes, incremental ones in between) — in a thread of its own,
        so a pass never holds up dispatch (with one slot, passes run in the loop took a
        quarter of its time with two worker processes: benchmarks/jobs_peers.py).  An
        executing attempt is tended (lease renewed, cancel noticed) at most once a tick.

        Once ``stop`` is set no job is reserved any more; running attempts may finish for
        up to ``grace`` seconds (their leases still renewed), then the worker abandons the
        ones still running (their threads are left behind: a handler that does not return
        cannot be ended in a thread) and goes down (``CrashWorker``: their attempts stop).
        A handler still running ``cancel_grace`` seconds (default: two ticks) after its
        attempt's cancel or lost lease was noticed is abandoned the same way, through
        ``CooperativeStop``: its slot is free again.  One that overruns its handler's
        ``timeout`` ends as a retryable failure (``SendOutcome`` + ``ProcessOutcome``);
        whatever the abandoned thread does afterwards is refused (its attempt is no
        longer executing), so nothing it stages is ever committed."""
        from remora.jobs.reconciler import Reconciler

        if self.registry is None:
            raise UnknownHandler("a worker needs a handler registry (--app)")
        reconciler = Reconciler(
            self.stores,
            f"{self.id}.reconciler",
            recorder=self.actor.recorder,
            incarnation=self.id,
        )
        # The heartbeat: a few times per ``down_after`` (not per job).
        beat_every = self.stores.config.down_after_s / 3
        pool = DaemonPool(self.id)
        running: dict[AttemptId, Future[None]] = {}
        contexts: dict[AttemptId, AttemptContext] = {}
        tend_every = self.stores.config.tick_ms / 1000
        if cancel_grace is None:
            cancel_grace = 2 * tend_every
        halt = threading.Event()
        deadline: float | None = None  # set once stopping: the end of the grace period
        failed: list[BaseException] = []

        def reconcile() -> None:
            passes = 0
            try:
                while not halt.is_set():
                    # Incremental passes read only the work in flight; every
                    # ``full_every``-th pass (the first one too) reads everything, for the
                    # housekeeping of finished jobs the incremental ones may miss.
                    full = passes % full_every == 0
                    passes += 1
                    _quietly(functools.partial(reconciler.reconcile_once, full=full))
                    reconciler.actor.ctx.sleep(reconcile_every, wake=halt)
            except BaseException as exc:  # not a store failure: end the worker with it
                failed.append(exc)
                stop.set()

        ambient = threading.Thread(target=reconcile, name=f"{self.id}.reconciler", daemon=True)
        ambient.start()
        try:
            while True:
                self.wake.clear()
                now = self.stores.clock.now()
                if stop.is_set() and deadline is None:
                    deadline = now + grace
                if deadline is not None and (not running or now >= deadline):
                    break
                if not self.up or (
                    now - self.beat_at >= beat_every and _quietly(self.heartbeat) is False
                ):
                    # Declared down by another incarnation (learned from the heartbeat or
                    # from a down mark): stop at once; the process ends (a new one is a new
                    # incarnation).
                    failed.append(WorkerDown(f"worker {self.id} was declared down"))
                    break
                for a, fut in list(running.items()):
                    if fut.done():
                        running.pop(a)
                        contexts.pop(a)
                for actx in contexts.values():
                    if now - actx.tended >= tend_every:
                        actx.tended = now
                        _quietly(actx.tend)
                for a, actx in list(contexts.items()):
                    if actx.overdue(now, cancel_grace) and _quietly(actx.end_from_loop):
                        running.pop(a, None)
                        contexts.pop(a, None)
                if deadline is not None:
                    # Stopping: no new work; wake when a handler finishes.
                    self.ctx.sleep(min(poll, max(deadline - now, 0.0)), wake=self.wake)
                    continue
                if len(running) < self.concurrency:
                    started = _quietly(lambda: self._dispatch_one(pool, running, contexts))
                    if started:
                        continue
                if on_idle is not None:
                    # The idle check reads the durable store: a link down is a pause, not
                    # the worker's end (it exited on a PostgreSQL cut: tests/jobs/
                    # test_real_faults.py).
                    _quietly(on_idle)
                if len(running) < self.concurrency:
                    # A free slot and nothing taken: wait for an Enqueue (Redis: a blocking
                    # pop of its wake-up) rather than a whole ``poll`` — that pause was
                    # half of the median latency (benchmarks/jobs_peers.py).
                    if (
                        _quietly(lambda: self.stores.coordination.await_work(self.actor, poll))
                        is None
                    ):
                        self.ctx.sleep(poll, wake=self.wake)  # the store is unreachable
                    continue
                # Every slot busy: wake as soon as a handler finishes (the future's
                # done-callback sets ``wake``) rather than after a whole ``poll``: with one
                # slot, a fixed pause per job capped a worker at 1/poll jobs per second
                # (benchmarks/jobs_peers.py).  On the injected clock, like every wait.
                self.ctx.sleep(poll, wake=self.wake)
        finally:
            halt.set()
            ambient.join()
            for actx in contexts.values():
                actx.abandon()  # still running after the grace period: left behind
            _quietly(self.shutdown)
        if failed:
            raise failed[0]

    def _dispatch_one(
        self,
        pool: Any,
        running: dict[AttemptId, Future[None]],
        contexts: dict[AttemptId, AttemptContext],
    ) -> bool:
        # An attempt authorized earlier whose activation was refused first (the job is no
        # longer queued: nothing else would pick it up again).
        for a in self._awaiting_activation():
            if self._activate_again(a):
                self._start(pool, running, contexts, a)
                return True
        # A narrow read of a few queued jobs (a random sample on Redis: workers do not all
        # contend for the same job), not the whole coordination state.
        accept = None if self.registry is None else self.registers
        for job in self.stores.coordination.candidates(self.actor, 8, accept):
            if self.reserve(job) is None:
                continue
            try:
                a = self.authorize(job)
            except (NotEnabled, RemoraError):
                _quietly(functools.partial(self.release_reservation, job))
                return False
            try:
                self.activate(a)
            except NotEnabled:
                # Usually the job's previous attempt still holds a live lease (its worker
                # has accepted its failure but not yet released the lease): activation is
                # only delayed, a later pass tries again (_awaiting_activation).
                self.refused[a] = self.stores.clock.now()
                return False
            self._start(pool, running, contexts, a)
            return True
        return False

    def registers(self, job: str) -> bool:
        """Whether this worker registers the handler of ``job`` (a job's handler never
        changes: read once from the durable store, then remembered).  A worker reserves
        only such jobs; the others stay queued for a worker that has their handler."""
        handler = self._handler_of.get(job)
        if handler is None:
            try:
                handler = self.stores.durable.job(job).handler
            except UnknownJob:
                return False
            if len(self._handler_of) >= 100_000:
                self._handler_of.clear()
            self._handler_of[job] = handler
        return self.registry is not None and handler in self.registry.names()

    def _start(
        self,
        pool: Any,
        running: dict[AttemptId, Future[None]],
        contexts: dict[AttemptId, AttemptContext],
        a: AttemptId,
    ) -> None:
        actx = AttemptContext(self, a)
        contexts[a] = actx
        fut = pool.submit(actx.execute)
        fut.add_done_callback(lambda _: self.wake.set())
        running[a] = fut

    def _awaiting_activation(self) -> list[AttemptId]:
        """This worker's authorized attempts whose reservation it still holds: their
        activation was refused (``ActivateAttempt`` waits for another attempt's live lease
        to end, :func:`~remora.jobs.guards.other_live_lease`) and may be tried again.
        Given up, they would stay authorized until the reservation expired and the reaper
        took them back — a wasted attempt, and the checkpoint lost with it.  Each is tried
        at most once a tick (a try takes the job's durable lock)."""
        due = self.stores.clock.now() - self.stores.config.tick_ms / 1000
        with self._lock:
            return sorted(
                a
                for a, local in self.attempts.items()
                if local.state == AUTHORIZED
                and self.reservations.get(a.job) == local.rid
                and self.refused.get(a, due) <= due
            )

    def _activate_again(self, a: AttemptId) -> bool:
        """Try a refused activation again; when the reservation is gone (it expired) stop
        trying: the attempt can never activate, the reaper takes it back."""
        try:
            self.activate(a)
            self.refused.pop(a, None)
            return True
        except NotEnabled:
            self.refused[a] = self.stores.clock.now()
        rid = self._local(a).rid
        held = self.stores.coordination.view(self.actor, a.job).reservations.get(a.job)
        if held is None or held.worker != self.id or held.rid != rid:
            with self._lock:
                if self.reservations.get(a.job) == rid:
                    del self.reservations[a.job]
                self.refused.pop(a, None)
        return False


class AttemptContext:
    """The handler's view of its attempt (see :class:`remora.jobs.handlers.JobContext`)."""

    def __init__(self, worker: Worker, a: AttemptId) -> None:
        self.worker = worker
        self.attempt = a
        self.job_id = a.job
        self.token = a.token
        row = worker.rows.pop(a, None) or worker.stores.durable.job(a.job)
        self.handler = row.handler
        self.payload: Any = _json(row.payload)
        self.max_progress = row.max_progress
        self.stop_requested = False
        self._resumed = worker.attempts[a].progress > 0
        self._lock = threading.Lock()
        #: When the loop last tended this attempt (it was activated just now).
        self.tended = worker.stores.clock.now()
        self.started = self.tended
        registry = worker.registry
        #: Seconds the handler may run before the attempt ends as a retryable failure.
        self.timeout = None if registry is None else registry.timeout(self.handler)
        #: The loop stopped waiting on this handler (its thread is left behind): the
        #: thread settles nothing when it returns.
        self.abandoned = False
        self._settling = False
        self._settle_lock = threading.Lock()
        self._stop_seen_at: float | None = None
        self._next_try = 0.0

    @property
    def local(self) -> LocalAttempt:
        return self.worker.attempts[self.attempt]

    @property
    def progress(self) -> int:
        return self.local.progress

    @property
    def resumed(self) -> bool:
        return self._resumed

    @property
    def resumed_data(self) -> bytes | None:
        if not self.local.progress:
            return None
        return staged_data(self.worker.stores, self.attempt, self.local.progress)

    @property
    def cancelled(self) -> bool:
        return self.stop_requested or self.local.cancel_seen or self.local.state != EXECUTING

    def advance(self, amount: int, data: bytes | str | None = None) -> None:
        with self._lock:
            self.worker.advance(self.attempt, amount, encode_output(data or b""))
            _quietly(lambda: self.worker.report_progress(self.attempt))

    def stage(self, output: Any) -> None:
        with self._lock:
            self.worker.advance(self.attempt, self.max_progress, encode_output(output))

    def checkpoint(self) -> None:
        with self._lock:
            self.worker.checkpoint(self.attempt)

    def put_secret(self, secret: bytes | str) -> int:
        raw = secret.encode() if isinstance(secret, str) else secret
        return self.worker.put_secret(self.attempt, raw).sequence

    # -- the worker's side ----------------------------------------------------------------------
    def tend(self) -> None:
        """Called from the worker loop: renew, notice cancellation, stop if needed."""
        local = self.local
        if local.state != EXECUTING:
            return
        w = self.worker
        snap = w.stores.coordination.view(w.actor, self.job_id, (self.attempt,))
        lease = snap.leases.get(self.attempt)
        if self.job_id in snap.notices or lease is None or not lease.live:
            local.cancel_seen = True
        elif not local.outcome_sent and not local.handler_done:
            w.renew(self.attempt)

    def timed_out(self, now: float) -> bool:
        return self.timeout is not None and now - self.started >= self.timeout

    def overdue(self, now: float, cancel_grace: float) -> bool:
        """Whether the loop should stop waiting on this handler: it overran its timeout,
        or it is still running ``cancel_grace`` seconds after a stop condition (cancel,
        lost lease) was noticed."""
        local = self.local
        if self._settling or self.abandoned or local.state != EXECUTING or now < self._next_try:
            return False
        if local.cancel_seen:
            if self._stop_seen_at is None:
                self._stop_seen_at = now
            return now - self._stop_seen_at >= cancel_grace
        return self.timed_out(now)

    def end_from_loop(self) -> bool:
        """End the attempt without its handler (which keeps its thread): a timeout as a
        retryable failure (``SendOutcome``, ``ProcessOutcome``); otherwise
        ``CooperativeStop`` on its stop condition, the stop recorded and the lease
        released.  True when the loop may forget the attempt (its slot is free)."""
        w, a = self.worker, self.attempt
        with self._settle_lock:
            if self._settling or self.abandoned:
                return False
            local = self.local
            now = w.stores.clock.now()
            self._next_try = now + w.stores.config.tick_ms / 1000
            self.stop_requested = True
            if not local.cancel_seen and not local.outcome_sent and self.timed_out(now):
                try:
                    w.send_outcome(a, Outcome.RETRYABLE)
                except RemoraError:
                    self.stop_requested = False
                    return False
                self.abandoned = True  # the outcome is durably pending: ours to process
                _retry(w, lambda: w.process_outcome(a, f"timed out after {self.timeout:g}s"))
                if local.state == STOPPED or local.finished:
                    _retry(w, lambda: w.release_lease(a))
                return True
            try:
                stopped = w.cooperative_stop(a)
            except RemoraError:
                stopped = False
            if not stopped:
                self.stop_requested = False
                return False
            self.abandoned = True
            _retry(w, lambda: w.record_stop(a))
            _retry(w, lambda: w.release_lease(a))
            return True

    def abandon(self) -> None:
        """The worker stops: a handler still running is left behind (it settles nothing)."""
        self.stop_requested = True
        with self._settle_lock:
            if not self._settling:
                self.abandoned = True

    def execute(self) -> None:
        """Run the handler and settle the attempt (thread body)."""
        w = self.worker
        a = self.attempt
        outcome: Outcome | None = None
        error = ""
        try:
            assert w.registry is not None
            fn = w.registry.get(self.handler)
            value = fn(self)
            if self.local.state == EXECUTING and self.local.progress < self.max_progress:
                self.stage(value)
            outcome = Outcome.SUCCESS
        except Cancelled:
            outcome = None
        except Permanent as exc:
            outcome, error = Outcome.PERMANENT, f"permanent: {exc}"
        except UnknownHandler as exc:
            outcome, error = Outcome.PERMANENT, str(exc)
        except Retryable as exc:
            outcome, error = Outcome.RETRYABLE, f"retryable: {exc}"
        except Exception as exc:  # any other failure of user code is retryable
            outcome = Outcome.RETRYABLE
            error = f"{type(exc).__name__}: {exc}"[:500]
            traceback.clear_frames(exc.__traceback__) if exc.__traceback__ else None
        self.local.handler_done = True
        with self._settle_lock:
            if self.abandoned:
                return  # the loop ended the attempt (timeout, cancel) or the worker stopped
            self._settling = True
        settle(w, a, outcome, error, lambda: self.stop_requested)


def settle(
    w: Worker,
    a: AttemptId,
    outcome: Outcome | None,
    error: str,
    shutting_down: Callable[[], bool] = lambda: False,
) -> None:
    """After the handler: send and process the outcome, or stop cooperatively; then record
    the stop and release the lease.  A step is retried while its store is unavailable (an
    unknown result was already resolved by re-reading, so a retry is never blind).

    Without a stop condition yet (the handler gave up on its own) the worker waits: it no
    longer renews the lease, so the lease expires within a lease period — unless the worker
    shuts down first, which stops the attempt anyway (``CrashWorker``)."""
    local = w.attempts[a]
    sending = outcome is not None and local.state == EXECUTING and not local.cancel_seen
    if sending and _retry(w, lambda: w.send_outcome(a, cast(Outcome, outcome))):
        _retry(w, lambda: w.process_outcome(a, error))
    while local.state == EXECUTING and not local.finished and w.up and not shutting_down():
        if _retry(w, lambda: w.cooperative_stop(a)):
            break
        w.ctx.sleep(0.05)
    if local.state == STOPPED:
        _retry(w, lambda: w.record_stop(a))
    if local.state == STOPPED or local.finished:
        _retry(w, lambda: w.release_lease(a))


def _retry(w: Worker, step: Callable[[], Any], attempts: int = 50) -> Any:
    for _ in range(attempts):
        if not w.up:
            return None
        try:
            result = step()
            return True if result is None else result
        except (Unavailable, UnknownResult):
            w.ctx.sleep(0.05)
        except NotEnabled:
            return None
    return None


def process_outcome(stores: Stores, actor: Actor, a: AttemptId, error: str = "") -> Change:
    """``ProcessOutcome(a)`` (by the attempt's worker, or the reconciler for an outcome whose
    sender went away): the target's record of the attempt is read under the job's lock."""

    # A target in the durable store's database (PostgresTarget on the same DSN) is read
    # with the job's locked read, in its round trip; any other target by its own call.
    locked_info = getattr(stores.target, "locked_info", None)
    also = None if locked_info is None else locked_info(stores.durable, a)

    def decide(lk: Any) -> Change:
        if also is None:
            stage = stores.target.info(actor, a)
        else:
            stage = stores.target.info_from(actor, a, lk.also)  # type: ignore[attr-defined]
        return guards.process_outcome(lk.job, lk.attempts, a.token, stage, error)

    return stores.durable.transact(actor, a.job, decide, also=also)


def prepare_credential(stores: Stores, actor: Actor, a: AttemptId) -> IntentId:
    """``PrepareCredentialIntent(c)``: the next intent of the job, owned by attempt ``a``."""
    change = stores.durable.transact(
        actor,
        a.job,
        lambda lk: guards.prepare_credential(
            lk.job, lk.credentials, a.token, stores.config.max_credential_intents
        ),
    )
    return IntentId(a.job, int(change.result))


def _secret(stores: Stores, actor: Actor, c: IntentId) -> tuple[bool, bool]:
    st = stores.vault.state(actor, c)
    return st is SecretState.LIVE, st is SecretState.DESTROYED


def begin_credential_write(stores: Stores, actor: Actor, c: IntentId) -> None:
    """``BeginCredentialWrite(c)``."""

    def decide(lk: Any) -> Change:
        live, gone = _secret(stores, actor, c)
        return guards.begin_credential_write(
            lk.credentials[c.sequence], secret_live=live, secret_gone=gone
        )

    stores.durable.transact(actor, c.job, decide)


def complete_credential_write(stores: Stores, actor: Actor, c: IntentId, secret: bytes) -> None:
    """``CompleteCredentialWrite(c)``: the vault write, under the job's durable lock (the
    intent must still be ``Writing``)."""

    def block(lk: Any) -> None:
        live, gone = _secret(stores, actor, c)
        if not guards.can_write_secret(
            lk.credentials[c.sequence], secret_live=live, secret_gone=gone
        ):
            raise NotEnabled(f"{c}: the vault write is not enabled")
        seq = actor.next_seq()
        stores.vault.write(actor, c, secret)
        actor.record(seq, Action.COMPLETE_CREDENTIAL_WRITE, {"c": str(c)})

    stores.durable.with_lock(actor, c.job, block)


def record_credential_write(stores: Stores, actor: Actor, c: IntentId) -> None:
    """``RecordCredentialWrite(c)``."""

    def decide(lk: Any) -> Change:
        live, _ = _secret(stores, actor, c)
        return guards.record_credential_write(lk.credentials[c.sequence], secret_live=live)

    stores.durable.transact(actor, c.job, decide)


def commit_credential_version(stores: Stores, actor: Actor, c: IntentId) -> None:
    """``CommitCredentialVersion(c)``."""

    def decide(lk: Any) -> Change:
        live, _ = _secret(stores, actor, c)
        return guards.commit_credential_version(lk.credentials[c.sequence], secret_live=live)

    stores.durable.transact(actor, c.job, decide)


def write_credential(stores: Stores, actor: Actor, a: AttemptId, secret: bytes) -> IntentId:
    """The whole write: prepare, begin, vault write, record, commit."""
    c = prepare_credential(stores, actor, a)
    begin_credential_write(stores, actor, c)
    complete_credential_write(stores, actor, c, secret)
    record_credential_write(stores, actor, c)
    commit_credential_version(stores, actor, c)
    return c


def staged_data(stores: Stores, a: AttemptId, progress: int) -> bytes | None:
    """See :meth:`Stores.staged_data`."""
    return stores.staged_data(a, progress)


def _json(text: str) -> Any:
    import json

    return json.loads(text)


def _quietly(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except RemoraError:
        return None


__all__ = [
    "AUTHORIZED",
    "EXECUTING",
    "STOPPED",
    "AttemptContext",
    "LocalAttempt",
    "Worker",
    "WorkerDown",
    "process_outcome",
    "settle",
    "staged_data",
    "write_credential",
]
