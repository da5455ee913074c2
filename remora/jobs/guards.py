"""Every guard of the job runtime, in one place: :class:`Guards`.

Each durable spec action is a pure method from the *locked* durable rows of one job (and
the facts of the other stores the action needs, read while that lock is held) to a
:class:`Change` — the new rows and the spec action it implements — or :class:`NotEnabled`
when the spec's guard is false.  The durable store (:mod:`remora.jobs.durable`) runs each of
these inside one transaction on SQLite or PostgreSQL, so every durable step is a
compare-and-swap whose condition is exactly the method below.

The coordination guards (``can_*``) are the conditions of the coordination store's atomic
operations: :class:`~remora.jobs.coordination.MemoryCoordination` evaluates these methods;
the Redis store's Lua scripts (:mod:`remora.jobs.redis_coordination`) implement the same
conditions and the shared contract suite keeps them equal.

Why an object: the guards are a capability the runtime is *given* — :class:`Stores` carries
one (:data:`SPEC_GUARDS`, the spec's, by default) and every store and step evaluates its
guards through it, the guards calling one another through ``self``.  A simulation that
plants a bug (a guard mutation, :mod:`remora.sim.jobs.mutations`) supplies a
:class:`Guards` with one method replaced; the runtime cannot tell, and nothing global is
patched.  The facts the checkers also need (:func:`stage_progress`, :func:`stage_present`,
:func:`stage_complete`, :func:`durably_stopped`, :func:`age`) stay plain functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from remora.jobs.actions import Action
from remora.jobs.model import (
    AttemptId,
    AttemptRow,
    CoordSnapshot,
    CredentialRow,
    CredentialState,
    JobRow,
    NotEnabled,
    Outcome,
    Phase,
    StageInfo,
    Stop,
)

Attempts = Mapping[int, AttemptRow]


@attrs.frozen
class Change:
    """The outcome of one durable transition: rows to write and the spec action taken."""

    action: str
    params: dict[str, Any]
    job: JobRow | None = None
    attempts: tuple[AttemptRow, ...] = ()
    credentials: tuple[CredentialRow, ...] = ()
    result: str = ""
    #: What the step observed beside the spec's parameters — an accepted failure's error,
    #: how long the attempt had run, how long the job waited — kept in the durable log's
    #: ``facts`` and in the step's record (history, metrics); never part of a guard.
    facts: dict[str, Any] = attrs.field(factory=dict)


def _attempt(attempts: Attempts, token: int) -> AttemptRow:
    row = attempts.get(token)
    if row is None:
        raise NotEnabled(f"attempt {token} does not exist")
    return row


# -- staging as the durable store and the target jointly know it -------------------------


def stage_progress(row: AttemptRow, info: StageInfo | None) -> int:
    """``attemptProgress[a]``: the target's progress for the attempt, or the checkpoint it
    resumed from."""
    return max(row.initial_progress, info.progress if info is not None else 0)


def stage_complete(job: JobRow, row: AttemptRow, info: StageInfo | None) -> bool:
    """``stageState[a] = StageComplete``."""
    if row.transferred or (info is not None and info.cleaned):
        return False
    return stage_progress(row, info) == job.max_progress


def stage_present(row: AttemptRow, info: StageInfo | None) -> bool:
    """``stageState[a] \\in {StagePartial, StageComplete}``."""
    if row.transferred or (info is not None and info.cleaned):
        return False
    return row.adopted_from > 0 or (info is not None and info.progress > 0)


def durably_stopped(row: AttemptRow, worker_up: bool) -> bool:
    """The durable store *knows* the attempt is stopped (a lower bound of
    ``attemptState[a] = AttemptStopped \\/ workerState[w] = WorkerDown``)."""
    return row.stop is Stop.FAILED or row.stopped or (not row.committed and not worker_up)


def _cred(row: CredentialRow, action: str, state: CredentialState, **kw: Any) -> Change:
    return Change(action, {"c": str(row.id)}, credentials=(attrs.evolve(row, state=state, **kw),))


def age(now_ms: int, at_ms: int, tick_ms: int, limit: int) -> int:
    """Ticks since ``at_ms``, capped at ``limit`` (``leaseAge`` / ``reservationAge``)."""
    return max(0, min(limit, (now_ms - at_ms) // tick_ms))


class Guards:
    """The guards the runtime evaluates (module docstring).  Stateless: one instance serves
    every store and thread."""

    def need(self, cond: bool, why: str) -> None:
        """Raise :class:`NotEnabled` with ``why`` unless ``cond``: every guard's conjuncts."""
        if not cond:
            raise NotEnabled(why)

    # -- incarnations --------------------------------------------------------

    def declare_down(
        self,
        worker: str,
        by: str,
        *,
        up: bool,
        seen: float,
        now: float,
        down_after: float,
        others_up: bool,
    ) -> None:
        """``CrashWorker(w)`` declared by another incarnation ``by``: ``workerState[w] =
        WorkerUp`` (``up``), ``OtherCapacity(w)`` (``others_up``: another incarnation is up
        durably — the declaring one, when it is an incarnation), and the runtime's own
        condition that ``w`` has not renewed its heartbeat for ``down_after`` seconds (``seen``
        and ``now`` on one clock: PostgreSQL's, or the injected one).  Raises
        :class:`NotEnabled` when the guard is false."""
        self.need(worker != by, "an incarnation does not declare itself down")
        self.need(up, f"worker {worker} is not up")
        self.need(others_up, f"OtherCapacity({worker}): no other incarnation is up")
        self.need(now - seen >= down_after, f"the heartbeat of {worker} is fresh")

    # -- durable job actions -------------------------------------------------

    def authorize(
        self,
        job: JobRow,
        attempts: Attempts,
        worker: str,
        rid: str,
        *,
        reserved: bool,
        worker_up: bool,
        owner_stopped: bool,
    ) -> Change:
        """``AuthorizeAttempt(j, w)``: allocate the next token; resume from a valid checkpoint
        by taking over its owner's staging.  ``reserved``: the coordination store holds the
        reservation ``rid`` of ``worker`` for this job (read under the job's lock)."""
        token = job.current_token + 1
        self.need(job.phase is Phase.QUEUED, f"phase is {job.phase.value}, not Queued")
        self.need(job.dispatch_needed, "dispatch is not needed")
        self.need(reserved, f"{worker} does not hold the reservation")
        self.need(worker_up, f"worker {worker} is not up")
        self.need(job.current_token < job.max_attempts, "the attempt budget is spent")
        self.need(token not in attempts, f"attempt {token} already exists")
        changed: list[AttemptRow] = []
        if job.checkpoint_valid:
            owner = _attempt(attempts, job.checkpoint_owner)
            self.need(
                owner_stopped, f"checkpoint owner {job.checkpoint_owner} is not known stopped"
            )
            changed.append(attrs.evolve(owner, transferred=True))
            start = job.checkpoint
            new = AttemptRow(
                job.id,
                token,
                worker,
                rid,
                initial_progress=start,
                resumed=start > 0,
                adopted_from=owner.token,
            )
        else:
            new = AttemptRow(job.id, token, worker, rid)
        changed.append(new)
        return Change(
            Action.AUTHORIZE_ATTEMPT,
            {"j": job.id, "w": worker},
            job=attrs.evolve(
                job,
                phase=Phase.RUNNING,
                current_token=token,
                authority=token,
                dispatch_needed=False,
                checkpoint_owner=token if job.checkpoint_valid else 0,
            ),
            attempts=tuple(changed),
            result=str(token),
        )

    def persist_checkpoint(
        self, job: JobRow, attempts: Attempts, token: int, progress: int, *, worker_up: bool = True
    ) -> Change:
        """``PersistCheckpoint(a)`` (the worker checked ``AttemptExecuting`` locally;
        ``worker_up``: its incarnation is not declared down, read under the job's lock)."""
        row = _attempt(attempts, token)
        self.need(worker_up, f"worker {row.worker} is not up")
        self.need(job.current_authority(token), f"attempt {token} is not the current authority")
        self.need(job.phase is Phase.RUNNING, f"phase is {job.phase.value}, not Running")
        self.need(progress > 0, "no progress to checkpoint")
        self.need(
            not job.checkpoint_valid or job.checkpoint != progress,
            "the checkpoint already holds this progress",
        )
        return Change(
            Action.PERSIST_CHECKPOINT,
            {"a": str(job.attempt(token))},
            job=attrs.evolve(
                job, checkpoint=progress, checkpoint_owner=token, checkpoint_valid=True
            ),
        )

    def invalidate_checkpoint(self, job: JobRow) -> Change:
        """``InvalidateCheckpoint(j)``."""
        self.need(not job.phase.terminal, "the job is terminal")
        self.need(job.checkpoint_valid, "no valid checkpoint")
        return Change(
            Action.INVALIDATE_CHECKPOINT,
            {"j": job.id},
            job=attrs.evolve(job, checkpoint_valid=False, checkpoint_owner=0),
        )

    def send_outcome(
        self,
        job: JobRow,
        attempts: Attempts,
        token: int,
        outcome: Outcome,
        *,
        worker_up: bool = True,
        error: str = "",
    ) -> Change:
        """``SendOutcome(a, o)``: the request is durably in flight (the worker checked
        ``AttemptExecuting`` and, for success, a complete stage; ``worker_up``: its incarnation
        is not declared down, read under the job's lock).  A failure's ``error`` is kept on
        the job's row with the request (not a spec variable), so the job shows it whoever
        processes the outcome — the reconciler's ``ProcessOutcome`` knows no error."""
        row = _attempt(attempts, token)
        self.need(worker_up, f"worker {row.worker} is not up")
        self.need(row.pending is None, "an outcome is already in flight")
        self.need(not row.committed and row.stop is not Stop.FAILED, "the attempt is finished")
        return Change(
            Action.SEND_OUTCOME,
            {"a": str(row.id), "outcome": outcome.value},
            job=attrs.evolve(job, error=error) if error else None,
            attempts=(attrs.evolve(row, pending=outcome),),
        )

    def commit_eligible(self, job: JobRow, row: AttemptRow, stage: StageInfo | None) -> bool:
        """``CommitEligible(a)``."""
        return (
            row.pending is Outcome.SUCCESS
            and job.current_authority(row.token)
            and job.phase is Phase.RUNNING
            and not job.cancel_requested
            and stage_complete(job, row, stage)
        )

    def failure_eligible(self, job: JobRow, row: AttemptRow) -> bool:
        """``FailureEligible(a)``."""
        return (
            row.pending in (Outcome.RETRYABLE, Outcome.PERMANENT)
            and job.current_authority(row.token)
            and job.phase is Phase.RUNNING
            and not job.cancel_requested
        )

    def process_outcome(
        self, job: JobRow, attempts: Attempts, token: int, stage: StageInfo | None, error: str = ""
    ) -> Change:
        """``ProcessOutcome(a)``: AcceptSuccess, AcceptPermanentFailure,
        AcceptRetryableFailureWithBudget/Exhausted, or RejectOutcome — the durable
        compare-and-swap.  ``stage``: the target's record of the attempt (read under the lock)."""
        row = _attempt(attempts, token)
        a = {"a": str(row.id)}
        self.need(row.pending is not None, "no outcome in flight")
        if self.commit_eligible(job, row, stage):
            return Change(
                Action.ACCEPT_SUCCESS,
                a,
                job=attrs.evolve(
                    job,
                    phase=Phase.SUCCEEDED,
                    authority=0,
                    committed=token,
                    checkpoint=job.max_progress,
                    checkpoint_owner=token,
                    checkpoint_valid=True,
                ),
                attempts=(attrs.evolve(row, committed=True, pending=None),),
                result=Action.ACCEPT_SUCCESS,
            )
        if self.failure_eligible(job, row):
            if row.pending is Outcome.PERMANENT:
                action, phase = Action.ACCEPT_PERMANENT_FAILURE, Phase.FAILED
            elif job.current_token < job.max_attempts:
                action, phase = Action.ACCEPT_RETRYABLE_FAILURE_WITH_BUDGET, Phase.RETRY_WAIT
            else:
                action, phase = Action.ACCEPT_RETRYABLE_FAILURE_EXHAUSTED, Phase.FAILED
            return Change(
                action,
                a,
                job=attrs.evolve(job, phase=phase, authority=0, error=error or job.error),
                attempts=(attrs.evolve(row, stop=Stop.FAILED, pending=None),),
                result=action,
            )
        return Change(
            Action.REJECT_OUTCOME,
            a,
            attempts=(attrs.evolve(row, pending=None),),
            result=Action.REJECT_OUTCOME,
        )

    def reap(
        self, job: JobRow, attempts: Attempts, token: int, *, lease_live: bool, reserved: bool
    ) -> Change:
        """``ReapLostAttempt(a)``: revoke the authority of an attempt without a live lease.
        The runtime also requires that no reservation is held for the job (stronger than the
        spec's ``attemptState[a] # AttemptAuthorized \\/ reservation[j] = NoWorker``, which it
        cannot observe: activation is known only to the attempt's worker)."""
        row = _attempt(attempts, token)
        self.need(job.current_authority(token), f"attempt {token} is not the current authority")
        self.need(job.phase is Phase.RUNNING, f"phase is {job.phase.value}, not Running")
        self.need(not lease_live, "the lease is live")
        self.need(not reserved, "a reservation is held")
        phase = Phase.RETRY_WAIT if job.current_token < job.max_attempts else Phase.FAILED
        return Change(
            Action.REAP_LOST_ATTEMPT,
            {"a": str(row.id)},
            job=attrs.evolve(job, phase=phase, authority=0, error=job.error or "lease lost"),
            attempts=(attrs.evolve(row, stop=Stop.REVOKED),),
        )

    def schedule_retry(self, job: JobRow) -> Change:
        """``ScheduleRetry(j)``."""
        self.need(job.phase is Phase.RETRY_WAIT, f"phase is {job.phase.value}, not RetryWait")
        return Change(
            Action.SCHEDULE_RETRY,
            {"j": job.id},
            job=attrs.evolve(job, phase=Phase.QUEUED, dispatch_needed=True),
        )

    def request_cancel(self, job: JobRow) -> Change:
        """``RequestCancel(j)``."""
        self.need(
            job.phase in (Phase.QUEUED, Phase.RUNNING, Phase.RETRY_WAIT),
            f"phase is {job.phase.value}: nothing to cancel",
        )
        running = job.phase is Phase.RUNNING
        return Change(
            Action.REQUEST_CANCEL,
            {"j": job.id},
            job=attrs.evolve(
                job,
                cancel_requested=True,
                phase=Phase.CANCELLING if running else Phase.CANCELLED,
                authority=job.authority if running else 0,
                dispatch_needed=False,
            ),
        )

    def finalize_cancel(self, job: JobRow, attempts: Attempts) -> Change:
        """``FinalizeCancel(j)``: authorized-never-activated attempts stop (the authority's row
        is marked revoked; activated ones are unaffected)."""
        self.need(job.phase is Phase.CANCELLING, f"phase is {job.phase.value}, not Cancelling")
        changed: tuple[AttemptRow, ...] = ()
        if job.authority in attempts:
            changed = (attrs.evolve(attempts[job.authority], stop=Stop.REVOKED),)
        return Change(
            Action.FINALIZE_CANCEL,
            {"j": job.id},
            job=attrs.evolve(job, phase=Phase.CANCELLED, authority=0),
            attempts=changed,
        )

    def record_stop(self, job: JobRow, attempts: Attempts, token: int) -> Change:
        """Not a spec action: the worker records that it stopped an attempt (after
        ``CooperativeStop``, or after giving up an attempt revoked before activation), so
        that the durable store knows it — for ``CleanupStage`` and a resumed
        ``AuthorizeAttempt``."""
        row = _attempt(attempts, token)
        self.need(not row.stopped, "already recorded")
        return Change("", {"a": str(row.id)}, attempts=(attrs.evolve(row, stopped=True),))

    def lease_releasable(self, job: JobRow, row: AttemptRow, *, worker_up: bool) -> bool:
        """``ReleaseLease(a)``'s condition as the durable store knows it: the attempt is
        committed or known stopped (failed, recorded stopped, or its incarnation went down), or
        it lost its authority, or the job is terminal."""
        return (
            row.committed
            or row.stop is Stop.FAILED
            or row.stopped
            or not worker_up
            or not job.current_authority(row.token)
            or job.phase.terminal
        )

    def cleanup_eligible(
        self, job: JobRow, row: AttemptRow, stage: StageInfo | None, *, worker_up: bool
    ) -> bool:
        """``CleanupStage(a)``'s guard, with ``attemptState[a] = AttemptStopped`` replaced by
        what the durable store knows (a failed, recorded-stopped attempt, or a worker that
        went down)."""
        return (
            stage_present(row, stage)
            and job.committed != row.token
            and not job.current_authority(row.token)
            and (
                job.phase.terminal or not job.checkpoint_valid or job.checkpoint_owner != row.token
            )
            and (row.stop is Stop.FAILED or row.stopped or not worker_up)
        )

    # -- durable credential actions ------------------------------------------

    def prepare_credential(
        self, job: JobRow, existing: Mapping[int, CredentialRow], token: int, limit: int
    ) -> Change:
        """``PrepareCredentialIntent(c)`` for the next sequence number of the job (at most
        ``limit`` = ``MaxCredentialIntents`` per job)."""
        sequence = len(existing) + 1
        self.need(sequence <= limit, f"the job already has {limit} credential intents")
        self.need(sequence not in existing, "intent exists")
        row = CredentialRow(job.id, sequence, CredentialState.PREPARED, False, token)
        return Change(
            Action.PREPARE_CREDENTIAL_INTENT,
            {"c": str(row.id)},
            credentials=(row,),
            result=str(sequence),
        )

    def begin_credential_write(
        self, row: CredentialRow, *, secret_live: bool, secret_gone: bool
    ) -> Change:
        self.need(row.state is CredentialState.PREPARED, f"intent is {row.state.value}")
        self.need(not secret_live and not secret_gone, "the vault already holds a secret")
        return _cred(row, Action.BEGIN_CREDENTIAL_WRITE, CredentialState.WRITING)

    def can_write_secret(self, row: CredentialRow, *, secret_live: bool, secret_gone: bool) -> bool:
        """``CompleteCredentialWrite(c)``'s guard (the vault write itself)."""
        return row.state is CredentialState.WRITING and not secret_live and not secret_gone

    def record_credential_write(self, row: CredentialRow, *, secret_live: bool) -> Change:
        self.need(row.state is CredentialState.WRITING, f"intent is {row.state.value}")
        self.need(secret_live, "the vault holds no live secret")
        return _cred(row, Action.RECORD_CREDENTIAL_WRITE, CredentialState.WRITTEN)

    def fence_failed_credential_write(
        self, row: CredentialRow, *, secret_live: bool, secret_gone: bool
    ) -> Change:
        self.need(row.state is CredentialState.WRITING, f"intent is {row.state.value}")
        self.need(not secret_live and not secret_gone, "the vault holds a secret")
        return _cred(row, Action.FENCE_FAILED_CREDENTIAL_WRITE, CredentialState.PREPARED)

    def commit_credential_version(self, row: CredentialRow, *, secret_live: bool) -> Change:
        self.need(row.state is CredentialState.WRITTEN, f"intent is {row.state.value}")
        self.need(secret_live, "the vault holds no live secret")
        return _cred(row, Action.COMMIT_CREDENTIAL_VERSION, CredentialState.COMMITTED, durable=True)

    def claim_credential_cleanup(self, row: CredentialRow, *, secret_live: bool) -> Change:
        self.need(
            row.state in (CredentialState.WRITING, CredentialState.WRITTEN),
            f"intent is {row.state.value}",
        )
        self.need(secret_live, "the vault holds no live secret")
        self.need(not row.durable, "the version is durable")
        return _cred(row, Action.CLAIM_CREDENTIAL_CLEANUP, CredentialState.ABANDONING)

    def can_destroy_secret(self, row: CredentialRow, *, secret_live: bool) -> bool:
        """``DestroyClaimedCredentialSecret(c)``'s guard."""
        return row.state is CredentialState.ABANDONING and secret_live and not row.durable

    def abandon_fenced_credential_intent(
        self, row: CredentialRow, *, secret_live: bool, secret_gone: bool
    ) -> Change:
        self.need(row.state is CredentialState.PREPARED, f"intent is {row.state.value}")
        self.need(not secret_live and not secret_gone, "the vault holds a secret")
        return _cred(row, Action.ABANDON_FENCED_CREDENTIAL_INTENT, CredentialState.ABANDONED)

    # -- coordination guards -------------------------------------------------

    def live_count(self, c: CoordSnapshot) -> int:
        """``Cardinality(ReservedJobs) + Cardinality(LiveLeases)``."""
        return len(c.reservations) + sum(1 for lease in c.leases.values() if lease.live)

    def can_enqueue(self, c: CoordSnapshot, job: str, *, marked: bool = True) -> bool:
        """``Enqueue(j)``'s coordination conjuncts (the durable ones are read under the job's
        lock by the reconciler).  ``marked``: the mirror's down marks are in place (a wipe
        forgets them; nothing is enqueued again until they are republished, so a declared-down
        incarnation cannot ``Reserve`` a job after a wipe)."""
        return marked and job not in c.queued and job not in c.reservations

    def is_due(self, job: JobRow, now: float) -> bool:
        """``Enqueue(j)``'s runtime condition beyond the spec's: a delayed job
        (``submit --at/--in``) is not enqueued before its due time, ``now`` being the durable
        store's clock read under the job's lock.  Stronger than the spec (whose ``Enqueue``
        has no time): a refusal it causes is documented (``REFUSAL_REASONS``)."""
        return job.due <= now

    def can_reserve(
        self,
        c: CoordSnapshot,
        job: str,
        worker: str,
        executing: int,
        local_limit: int,
        global_limit: int,
    ) -> bool:
        """``Reserve(j, w)``: ``queued[j]``, no reservation, ``CapacityAvailable(w)``
        (``executing`` is ``Cardinality(ExecutingFor(w))``, the worker's own count)."""
        mine = sum(1 for r in c.reservations.values() if r.worker == worker)
        return (
            worker not in c.down
            and job in c.queued
            and job not in c.reservations
            and self.live_count(c) < global_limit
            and mine + executing < local_limit
        )

    def mirror_allows(self, c: CoordSnapshot, a: AttemptId, *, running: bool) -> bool:
        """The mirrored durable facts: ``a`` is not revoked (its token is above the floor) and,
        when ``running`` is needed, no cancel was requested.  Revocations raise the mirror
        *before* they commit durably, so this never claims more than the durable store holds."""
        if a.token <= c.floors.get(a.job, 0):
            return False
        return not (running and a.job in c.cancels)

    def can_activate(self, c: CoordSnapshot, a: AttemptId, worker: str, rid: str) -> bool:
        """``ActivateAttempt(a)``: the reservation ``rid`` is this worker's, and the mirror says
        ``CurrentAuthority(a) /\\ phase = Running``."""
        r = c.reservations.get(a.job)
        return (
            r is not None
            and r.worker == worker
            and worker not in c.down
            and r.rid == rid
            and self.mirror_allows(c, a, running=True)
            and not self.other_live_lease(c, a)
        )

    def other_live_lease(self, c: CoordSnapshot, a: AttemptId) -> bool:
        """Another attempt of ``a``'s job still holds a live lease.  Stronger than the spec's
        ``ActivateAttempt``: the spec lets a retry activate while the failed attempt's lease is
        still live (``AcceptFailure`` leaves it), which breaks ``AtMostOneLiveLeasePerJob``
        when ``GlobalLimit`` > 1 (found by the job machine; see ``docs/jobs.md``).  The old
        lease is released by its worker or expires, so activation is only delayed."""
        return any(lease.live and b.job == a.job and b != a for b, lease in c.leases.items())

    def can_renew(
        self, c: CoordSnapshot, a: AttemptId, worker: str, tick_ms: int, limit: int
    ) -> bool:
        """``RenewLease(a)``: live lease at least one tick old; the mirror says the attempt is
        not revoked (``phase \\notin TerminalPhases`` follows: terminal phases revoke)."""
        lease = c.leases.get(a)
        return (
            lease is not None
            and lease.live
            and lease.worker == worker
            and worker not in c.down
            and age(c.now_ms, lease.at_ms, tick_ms, limit) > 0
            and self.mirror_allows(c, a, running=False)
        )

    def can_report_progress(self, c: CoordSnapshot, a: AttemptId, progress: int) -> bool:
        """``ReportProgress(a)``: live lease, mirror says current and Running, and the hint
        differs."""
        lease = c.leases.get(a)
        current = c.progress.get(a.job)
        return (
            lease is not None
            and lease.live
            and lease.worker not in c.down
            and self.mirror_allows(c, a, running=True)
            and (current is None or current.attempt != a or current.progress != progress)
        )

    def can_expire_lease(self, c: CoordSnapshot, a: AttemptId, tick_ms: int, limit: int) -> bool:
        lease = c.leases.get(a)
        return (
            lease is not None and lease.live and age(c.now_ms, lease.at_ms, tick_ms, limit) == limit
        )

    def can_expire_reservation(self, c: CoordSnapshot, job: str, tick_ms: int, limit: int) -> bool:
        r = c.reservations.get(job)
        return r is not None and age(c.now_ms, r.at_ms, tick_ms, limit) == limit

    def can_clear_stale_progress(
        self, c: CoordSnapshot, job: str, authority: AttemptId | None
    ) -> bool:
        """``ClearStaleLiveProgress(j)``; ``authority`` is the durable ``CurrentAuthority``
        (read under the job's lock)."""
        p = c.progress.get(job)
        if p is None:
            return False
        lease = c.leases.get(p.attempt)
        return not (authority == p.attempt and lease is not None and lease.live)

    def coordination_dirty(self, c: CoordSnapshot, job: str) -> bool:
        """``CleanTerminalCoordination(j)``'s coordination conjunct."""
        return job in c.queued or job in c.reservations or job in c.notices or job in c.progress


#: The spec's guards: what every store and step evaluates unless given others.
SPEC_GUARDS = Guards()


__all__ = [
    "SPEC_GUARDS",
    "Attempts",
    "Change",
    "Guards",
    "age",
    "durably_stopped",
    "stage_complete",
    "stage_present",
    "stage_progress",
]
