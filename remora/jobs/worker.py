"""A worker incarnation's steps: reserve, authorize, activate, renew, report progress,
checkpoint, send and process the outcome, stop cooperatively, release — the spec-step API.

Each public method below is **one runtime step** — at most one store operation — and
implements at most one spec action (named in its docstring); a simulation calls them one at
a time from a single scheduler, production calls them from the loop
(:class:`remora.jobs.loop.WorkerLoop`) and from the handler's side
(:class:`remora.jobs.attempt.AttemptContext`).  What the worker keeps in memory per attempt
(:class:`LocalAttempt`) is the spec's worker-local part of the attempt state
(``AttemptAuthorized``/``AttemptExecuting``/``AttemptStopped``).

Local guards (the worker's own part of a spec guard, e.g. ``attemptState[a] =
AttemptExecuting`` before ``AdvanceAttempt``) are checked here; store guards in the stores,
through the :class:`~remora.jobs.guards.Guards` the stores carry.

The incarnation runs while its context (:attr:`Worker.ctx`, given by whoever runs the
process) is live: a canceled context ends it as its process's end would — it takes no more
steps (:class:`~remora.errors.WorkerDown`).  A simulation kills an incarnation that way (a
SIGKILL); nothing here knows.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import attrs

from remora.context import Context
from remora.errors import NotEnabled, RemoraError, Unavailable, WorkerDown
from remora.faults import NO_FAULTS, IOHook
from remora.jobs.actions import Action
from remora.jobs.credentials import write_credential
from remora.jobs.guards import Change, durably_stopped
from remora.jobs.handlers import Registry
from remora.jobs.io import NULL_RECORDER, Actor, Links, Recorder
from remora.jobs.model import (
    DEFAULT_QUEUE,
    AttemptId,
    IntentId,
    JobRow,
    Outcome,
    Phase,
    Stop,
)
from remora.jobs.sql import Locked
from remora.jobs.stores import Stores
from remora.jobs.transactions import Batched, Decide
from remora.worker.retry import RetryPolicy

F = TypeVar("F", bound=Callable[..., Any])

#: How the production loop's steps retry a store that is unavailable, unless the worker is
#: given its own policy (``remora jobs worker``: the outage budget's,
#: :func:`remora.worker.outage.outage_policy`): 50 calls, 50 ms apart.
STEP_RETRY = RetryPolicy(max_calls=50, waits=(0.05,) * 49)


def serial(method: F) -> F:
    """One store operation of this worker at a time (the loop and the handler threads share
    the incarnation): its steps' program order (``actor_seq``) is then their effect order."""

    @functools.wraps(method)
    def wrapper(self: Worker, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(F, wrapper)


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
    #: When this worker activated it (its own clock; None: not activated): the attempt's
    #: durable steps report how long it has run (``ran``, a fact of the step).
    activated_at: float | None = None
    #: A successful handler's output not staged yet: the settlement stages it in the
    #: transaction that sends and accepts the outcome (:meth:`Worker.complete`).
    deferred_stage: bytes | None = None

    def ran(self, now: float) -> dict[str, float]:
        """The ``ran`` fact of a durable step of this attempt (seconds since activation,
        measured by this worker — a duration, so no clocks need to agree)."""
        if self.activated_at is None:
            return {}
        return {"ran": round(max(now - self.activated_at, 0.0), 3)}


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
        ctx: Context | None = None,
        retry: RetryPolicy = STEP_RETRY,
        queues: tuple[str, ...] = (DEFAULT_QUEUE,),
    ) -> None:
        """``ctx``: the incarnation's context (default: a fresh one on the stores' clock);
        canceling it ends the incarnation (module docstring).  ``retry``: how the production
        loop retries a step whose store is unavailable (:mod:`remora.jobs.settlement`).
        ``queues``: the named queues whose jobs the production loop reserves
        (:class:`remora.jobs.loop.Dispatcher`)."""
        self.stores = stores
        self.retry = retry
        #: Run ``ActivateAttempt``/``RenewLease``/``ReportProgress`` under the job's durable
        #: lock, refreshing the coordination mirror from the durable row first: needed when
        #: the coordination store is private to this process (the embedded default), where
        #: a cancel or a revocation by another process cannot raise the mirror beforehand.
        self.durable_guard = durable_guard
        self.id = worker_id
        self.concurrency = concurrency
        self.ctx = ctx if ctx is not None else Context(stores.clock)
        self.actor = Actor(worker_id, self.ctx, hook=hook, recorder=recorder, links=links)
        #: The handlers this incarnation runs (the production loop's; None in a simulation
        #: that steps the attempts itself).
        self.registry = registry
        self.queues = queues
        self._up = False
        self.attempts: dict[AttemptId, LocalAttempt] = {}
        #: The attempts that may still be authorized or executing (:meth:`open_attempts`):
        #: the loop's per-dispatch scans read these, not every attempt the incarnation
        #: ever ran (``attempts`` grows with the jobs run; these with the slots).
        self._open: dict[AttemptId, LocalAttempt] = {}
        self._open_lock = threading.Lock()
        self.reservations: dict[str, str] = {}  # job -> rid
        #: The job row each attempt was authorized on (handler, payload): read once.
        self.rows: dict[AttemptId, JobRow] = {}
        #: When the heartbeat was last renewed (the injected clock).
        self.beat_at = 0.0
        self._lock = threading.RLock()

    @property
    def up(self) -> bool:
        """The incarnation takes steps: it started, it was not declared down or shut
        down, and its context is live (module docstring)."""
        return self._up and not self.ctx.canceled

    @up.setter
    def up(self, value: bool) -> None:
        self._up = value

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
        return sum(1 for x in self.open_attempts() if x.state == EXECUTING)

    def open_attempts(self) -> list[LocalAttempt]:
        """The attempts still authorized or executing, in the order they were authorized.
        A stopped or committed attempt never becomes either again, so those found are
        dropped from the index as it is read."""
        with self._open_lock:
            live = [x for x in self._open.values() if x.state in (AUTHORIZED, EXECUTING)]
            if len(live) != len(self._open):
                self._open = {x.id: x for x in live}
            return live

    # -- incarnation ----------------------------------------------------------------------------
    @serial
    def start(self) -> None:
        """``StartIncarnation(w)``: register the fresh id durably (its heartbeat starts)."""
        now = self.stores.clock.now()
        self.stores.durable.register_worker(self.actor, self.id, now)
        self.beat_at = now
        self.up = True

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
        for local in self.open_attempts():
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
    def reserve_batch(self, jobs: Sequence[str], limit: int) -> list[str]:
        """``Reserve(j, w)`` for each of ``jobs`` in order until ``limit`` are reserved, in
        **one** coordination call (:meth:`~remora.jobs.coordination.Coordination.
        reserve_batch`: each job guarded on the state the earlier ones left, each its own
        ``Reserve`` step): the jobs reserved, in order."""
        self._need_up()
        got = self.stores.coordination.reserve_batch(
            self.actor, jobs, self.id, self.executing_count(), self.concurrency, limit
        )
        for job, rid in got:
            self.reservations[job] = rid
        return [job for job, _ in got]

    @serial
    def authorize(self, job: str) -> AttemptId:
        """``AuthorizeAttempt(j, w)``: durable CAS allocating the next token; the
        reservation is read from the coordination store under the job's lock."""
        self._need_up()
        rid = self._reserved(job)
        change = self.stores.durable.transact(self.actor, job, self._authorize_decision(job, rid))
        return self._authorized(job, rid, change)

    @serial
    def authorize_batch(self, jobs: Sequence[str]) -> list[AttemptId | NotEnabled]:
        """``AuthorizeAttempt(j, w)`` for each of ``jobs`` (each reserved by this worker) in
        **one** durable transaction, each row guarded by its own reservation compare
        (:meth:`~remora.jobs.transactions.Transactions.transact_batch`): per job its
        attempt, or the refusal (the other rows still commit).  A job this worker holds no
        reservation of is refused without a transaction row."""
        self._need_up()
        out: list[AttemptId | NotEnabled] = []
        items: list[Batched] = []
        where: list[tuple[int, str, str]] = []
        for job in jobs:
            rid = self.reservations.get(job)
            if rid is None:
                out.append(NotEnabled(f"{self.id} holds no reservation of {job}"))
                continue
            where.append((len(out), job, rid))
            out.append(NotEnabled("not run"))
            items.append(Batched(job, (self._authorize_decision(job, rid),)))
        if not items:
            return out
        results = self.stores.durable.transact_batch(self.actor, items)
        for (i, job, rid), got in zip(where, results, strict=True):
            out[i] = got if isinstance(got, NotEnabled) else self._authorized(job, rid, got[0])
        return out

    def _reserved(self, job: str) -> str:
        rid = self.reservations.get(job)
        if rid is None:
            raise NotEnabled(f"{self.id} holds no reservation of {job}")
        return rid

    def _authorize_decision(self, job: str, rid: str) -> Decide:
        """``AuthorizeAttempt``'s guard on the locked rows: the reservation ``rid`` is read
        from the coordination store under the job's lock."""
        coord = self.stores.coordination

        def decide(lk: Locked) -> Change:
            r = coord.view(self.actor, job).reservations.get(job)
            owner = lk.attempts.get(lk.job.checkpoint_owner)
            owner_stopped = owner is not None and durably_stopped(
                owner, owner.worker not in lk.workers_down
            )
            change = self.stores.guards.authorize(
                lk.job,
                lk.attempts,
                self.id,
                rid,
                reserved=r is not None and r.worker == self.id and r.rid == rid,
                worker_up=self.up and self.id not in lk.workers_down,
                owner_stopped=owner_stopped,
            )
            # How long the job waited to be taken (since it became queued, or was due).
            ready = max(lk.job.queued_at, lk.job.due)
            return attrs.evolve(change, facts={"waited": round(max(lk.now - ready, 0.0), 3)})

        return decide

    def _authorized(self, job: str, rid: str, change: Change) -> AttemptId:
        """The worker's side of a committed ``AuthorizeAttempt``: its local attempt."""
        token = int(change.result)
        a = AttemptId(job, token)
        # The committed row came back with the change (re-read when an unknown result was
        # resolved from the log, which holds the action and its result, not the rows).
        job_row = change.job if change.job is not None else self.stores.durable.job(job)
        start = job_row.checkpoint if job_row.checkpoint_owner == token else 0
        local = LocalAttempt(a, rid, progress=start, max_progress=job_row.max_progress)
        with self._open_lock:
            self.attempts[a] = self._open[a] = local
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
        local.activated_at = self.stores.clock.now()
        self.reservations.pop(a.job, None)

    @serial
    def release_reservation(self, job: str) -> bool:
        """``ReleaseReservation(j)`` of this worker's own reservation, when the durable job
        is terminal or cancelling (checked under the job's lock)."""
        self._need_up()
        rid = self.reservations.get(job)
        if rid is None:
            return False

        def block(lk: Locked) -> bool:
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

        def block(lk: Locked) -> bool:
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
        ran = local.ran(self.stores.clock.now())
        self.stores.durable.transact(
            self.actor,
            a.job,
            lambda lk: attrs.evolve(
                self.stores.guards.persist_checkpoint(
                    lk.job, lk.attempts, a.token, progress, worker_up=self.id not in lk.workers_down
                ),
                facts=ran,
            ),
        )

    @serial
    def send_outcome(self, a: AttemptId, outcome: Outcome, error: str = "") -> None:
        """``SendOutcome(a, o)``: the request becomes durably pending (a failure's
        ``error`` with it, :meth:`~remora.jobs.guards.Guards.send_outcome`)."""
        local = self._executing(a)
        if outcome is Outcome.SUCCESS and local.progress != local.max_progress:
            raise NotEnabled(f"{a}: success needs a complete stage")
        ran = local.ran(self.stores.clock.now())
        self.stores.durable.transact(
            self.actor,
            a.job,
            lambda lk: attrs.evolve(
                self.stores.guards.send_outcome(
                    lk.job,
                    lk.attempts,
                    a.token,
                    outcome,
                    worker_up=self.id not in lk.workers_down,
                    error=error,
                ),
                facts=ran,
            ),
        )
        local.outcome_sent = True

    @serial
    def process_outcome(self, a: AttemptId, error: str = "") -> str:
        """``ProcessOutcome(a)``: the durable compare-and-swap (returns the action taken)."""
        self._need_up()
        change = self.stores.process_outcome(self.actor, a, error)
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
    def complete(
        self, a: AttemptId, outcome: Outcome, error: str = "", stage: bytes | None = None
    ) -> str:
        """``SendOutcome(a, o)`` then ``ProcessOutcome(a)`` — the sending worker accepts its
        own outcome — in **one** durable transaction (two spec steps, each decided by its
        own guard, logged and recorded in order:
        :meth:`~remora.jobs.transactions.Transactions.transact_steps`); returns the action
        ``ProcessOutcome`` took.  With ``stage`` (a success whose stage is not complete
        yet) ``AdvanceAttempt(a, MaxProgress)`` comes first: in the same transaction when
        the target lives in the durable store's database (``PostgresTarget.locked_write``),
        else as its own write before.  Nothing is sent when a step is refused (the whole
        transaction rolls back): the caller may send a failure instead."""
        item = self._completion(a, outcome, error, stage)
        _, processed = self.stores.durable.transact_steps(
            self.actor,
            a.job,
            item.decides,
            also=item.also,
            prepare=item.prepare,
            prepared=item.prepared,
        )
        return self._completed(a, item, processed)

    @serial
    def complete_batch(
        self, finished: Sequence[tuple[AttemptId, Outcome, str, bytes | None]]
    ) -> list[str | RemoraError]:
        """:meth:`complete` for several finished attempts (each of its own job) in **one**
        durable transaction, each row's steps guarded by its own attempt token
        (:meth:`~remora.jobs.transactions.Transactions.transact_batch`): per attempt the
        action ``ProcessOutcome`` took, or why nothing was sent for it (its row refused —
        a stale attempt changes nothing and the others still commit — or its own stage
        write failed).  A failure of the whole transaction (the store unavailable) is
        raised."""
        out: list[str | RemoraError] = []
        items: list[tuple[int, AttemptId, Batched]] = []
        for a, outcome, error, stage in finished:
            try:
                item = self._completion(a, outcome, error, stage)
            except RemoraError as exc:
                out.append(exc)
                continue
            items.append((len(out), a, item))
            out.append(NotEnabled("not run"))
        if not items:
            return out
        results = self.stores.durable.transact_batch(self.actor, [it for _, _, it in items])
        for (i, a, item), got in zip(items, results, strict=True):
            out[i] = got if isinstance(got, NotEnabled) else self._completed(a, item, got[-1])
        return out

    def _completion(
        self, a: AttemptId, outcome: Outcome, error: str, stage: bytes | None
    ) -> Batched:
        """The steps of :meth:`complete` on ``a``'s job (the local guards checked; a stage
        outside the durable store's database written first)."""
        local = self._executing(a)
        prepare = None
        if (
            stage is not None
            and outcome is Outcome.SUCCESS
            and local.progress >= local.max_progress
        ):
            # An earlier try of this completion staged it (its own write, before a
            # transaction that failed and is now tried again): the success goes as it is
            # — refusing it would throw the staged work away and spend an attempt.
            stage = None
        if stage is not None:
            if outcome is not Outcome.SUCCESS:
                raise NotEnabled(f"{a}: nothing to stage")
            locked_write = getattr(self.stores.target, "locked_write", None)
            if locked_write is not None:
                prepare = locked_write(self.stores.durable, a, local.max_progress, stage, self.id)
            if prepare is None:
                self.advance(a, local.max_progress, stage)
        elif outcome is Outcome.SUCCESS and local.progress != local.max_progress:
            raise NotEnabled(f"{a}: success needs a complete stage")
        ran = local.ran(self.stores.clock.now())
        worker = self.id

        def send(lk: Locked) -> Change:
            change = self.stores.guards.send_outcome(
                lk.job,
                lk.attempts,
                a.token,
                outcome,
                worker_up=worker not in lk.workers_down,
                error=error,
            )
            return attrs.evolve(change, facts=ran)

        decide, also = self.stores.outcome_decision(self.actor, a, error)
        prepared = None
        if prepare is not None:
            prepared = (Action.ADVANCE_ATTEMPT, {"a": str(a), "amount": local.max_progress})
        return Batched(a.job, (send, decide), also=also, prepare=prepare, prepared=prepared)

    def _completed(self, a: AttemptId, item: Batched, processed: Change) -> str:
        """The worker's side of a committed :meth:`complete` of ``a``."""
        local = self._local(a)
        if item.prepare is not None:
            local.progress = local.max_progress
        local.outcome_sent = False
        if processed.action == Action.ACCEPT_SUCCESS:
            local.state, local.finished = COMMITTED, True
        elif processed.action.startswith("Accept"):
            local.state, local.finished = STOPPED, True
            local.stop_recorded = True  # the durable store knows: the attempt failed
        return processed.action

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
        lk = None
        if self.id in coord.down:
            # Marked down.  The mark precedes the durable declaration, which may not have
            # committed (its declarer killed between the two, or its reply lost): only the
            # durable store says whether this incarnation is down.  Down: the attempt is
            # stopped in the spec already; the incarnation stops, recording nothing.  Up:
            # the mark is stale (the declarer's next full pass sweeps it) and the stop is
            # decided as any other — an incarnation that stopped itself on a stale mark
            # left an attempt executing in the spec with nobody to run it.
            lk = self.stores.durable.read_locked(self.actor, a.job)
            if self.id in lk.workers_down:
                self.declared_down()
                return False
        lease = coord.leases.get(a)
        reason = ""
        if lease is None or not lease.live:
            reason = "lease lost"
        elif a.job in coord.notices:
            reason = "cancel notice"
        else:
            if lk is None:  # not read yet (a marked incarnation's was read above)
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
        # Why the worker stopped (its CooperativeStop's reason) and how long it had run.
        facts: dict[str, Any] = {**local.ran(self.stores.clock.now())}
        if local.error:
            facts["stop"] = local.error
        with contextlib.suppress(NotEnabled):  # already recorded
            self.stores.durable.transact(
                self.actor,
                a.job,
                lambda lk: attrs.evolve(
                    self.stores.guards.record_stop(lk.job, lk.attempts, a.token), facts=facts
                ),
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

    # -- the production loop -------------------------------------------------------------------
    def run(self, *, stop: threading.Event, **options: Any) -> None:
        """Run this incarnation's production loop until ``stop`` is set: a convenience for
        ``WorkerLoop(self, **options).run(stop)`` (:class:`remora.jobs.loop.WorkerLoop`,
        where the options are described)."""
        from remora.jobs.loop import WorkerLoop

        WorkerLoop(self, **options).run(stop)


__all__ = [
    "AUTHORIZED",
    "COMMITTED",
    "EXECUTING",
    "STEP_RETRY",
    "STOPPED",
    "LocalAttempt",
    "Worker",
    "WorkerDown",
    "serial",
    "write_credential",
]
