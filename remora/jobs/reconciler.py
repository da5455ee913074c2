"""The reconciler/reaper: the spec's ambient actions, run by any worker (every
``reconcile_every`` seconds) or by ``remora jobs reconcile``.

Each method is one runtime step implementing one spec action (or nothing when its guard is
false).  Steps that act on the coordination store or the target but need durable facts
(``Enqueue``, ``PublishCancelNotice``, ``CleanTerminalCoordination``,
``ClearStaleLiveProgress``, ``ReleaseReservation``, ``CleanupStage``) run *inside* a
transaction that holds the job's durable lock (:meth:`DurableStore.with_lock`): no durable
transition of the job can commit meanwhile, so the durable facts they read still hold at
their linearization point, the coordination (target) write.  Steps that revoke authority
(``ReapLostAttempt``, ``FinalizeCancel``) first raise the coordination mirror's floor, then
commit durably (see :mod:`remora.jobs.coordination`).

``reconcile_once`` also rebuilds the coordination store after a wipe: the durable store is
scanned and every queued job is enqueued again, every cancel notice republished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import attrs

from remora.context import Context
from remora.errors import RemoraError, Unavailable
from remora.faults import NO_FAULTS, IOHook
from remora.jobs.actions import Action
from remora.jobs.guards import Change, durably_stopped
from remora.jobs.io import NULL_RECORDER, Actor, JobOperation, Links, Recorder, io_call
from remora.jobs.model import (
    AttemptId,
    CoordSnapshot,
    CredentialState,
    DurableSnapshot,
    IntentId,
    JobRow,
    NotEnabled,
    Phase,
    SecretState,
    Stop,
)
from remora.jobs.sql import Locked
from remora.jobs.stores import Stores


class Reconciler:
    def __init__(
        self,
        stores: Stores,
        name: str = "reconciler",
        *,
        hook: IOHook = NO_FAULTS,
        recorder: Recorder = NULL_RECORDER,
        links: Links | None = None,
        durable_only: bool = False,
        incarnation: str = "",
        clean_batch: int = 0,
    ) -> None:
        self.stores = stores
        #: The most terminal jobs one batched clean locks and cleans (0: :data:`CLEAN_BATCH`).
        self.clean_batch = clean_batch or CLEAN_BATCH
        #: The incarnation this reconciler runs in (its worker), if any: it never declares
        #: itself down, and being up it gives ``OtherCapacity`` to the others.
        self.incarnation = incarnation
        #: Take only the steps that need no coordination state (``remora jobs reconcile``
        #: beside workers whose coordination store is private to their process).
        self.durable_only = durable_only
        self.actor = Actor(name, Context(stores.clock), hook=hook, recorder=recorder, links=links)
        #: The incremental pass's memory: the jobs the previous pass saw in flight (they
        #: may have finished since) and the newest ``seq`` it saw.
        self._in_flight: frozenset[str] = frozenset()
        self._mark = 0
        #: The durable store's clock at the start of the pass (its liveness read).
        self._durable_now = 0.0

    # -- coordination projections under the durable lock ------------------------------------
    def _locked(self, job: str, act: Any) -> bool:
        return bool(self.stores.durable.with_lock(self.actor, job, act))

    def _row_locked(self, job: str, act: Callable[[JobRow], bool]) -> bool:
        """:meth:`_locked` for a step whose guard reads the job's row only."""
        return bool(self.stores.durable.with_job_lock(self.actor, job, act))

    def enqueue(self, job: str) -> bool:
        """``Enqueue(j)`` (:meth:`Stores.enqueue`)."""
        return self.stores.enqueue(self.actor, job)

    def publish_cancel_notice(self, job: str) -> bool:
        """``PublishCancelNotice(j)``."""

        def act(row: JobRow) -> bool:
            if not row.cancel_requested or row.phase.terminal:
                return False
            return self.stores.coordination.publish_cancel_notice(self.actor, job)

        return self._row_locked(job, act)

    def clean_terminal(self, job: str) -> bool:
        """``CleanTerminalCoordination(j)``."""

        def act(row: JobRow) -> bool:
            if not row.phase.terminal:
                return False
            return self.stores.coordination.clean_terminal(self.actor, job)

        return self._row_locked(job, act)

    def clean_terminal_batch(self, jobs: Iterable[str]) -> int:
        """``CleanTerminalCoordination(j)`` of each of ``jobs`` that is terminal, in one
        durable transaction (:meth:`DurableStore.with_job_locks`: every row locked, in id
        order, until the coordination call returns) and **one** coordination call
        (:meth:`Coordination.clean_terminal_batch`), at most :attr:`clean_batch` jobs at a
        time: a pass that finds many finished jobs pays one lock transaction and one
        coordination call for them, not one each (docs/jobs.md, *Batched transitions*).
        Each clean is still its own spec step, recorded between its own job's durable
        versions.  The number of jobs cleaned."""

        def act(rows: dict[str, JobRow]) -> int:
            terminal = [j for j in sorted(rows) if rows[j].phase.terminal]
            if not terminal:
                return 0
            return len(self.stores.coordination.clean_terminal_batch(self.actor, terminal))

        pending = list(dict.fromkeys(jobs))
        cleaned = 0
        size = self.clean_batch
        for n in range(0, len(pending), size):
            chunk = pending[n : n + size]
            if len(chunk) == 1:  # one job: the single step (no batch to pay for)
                cleaned += _ok(partial(self.clean_terminal, chunk[0]))
                continue
            try:
                cleaned += self.stores.durable.with_job_locks(self.actor, chunk, act)
            except RemoraError:
                continue
        return cleaned

    def clear_stale_progress(self, job: str) -> bool:
        """``ClearStaleLiveProgress(j)``."""

        def act(row: JobRow) -> bool:
            authority = (
                AttemptId(job, row.authority) if row.current_authority(row.authority) else None
            )
            return self.stores.coordination.clear_stale_progress(self.actor, job, authority)

        return self._row_locked(job, act)

    def release_reservation(self, job: str) -> bool:
        """``ReleaseReservation(j)`` of a terminal or cancelling job."""

        def act(row: JobRow) -> bool:
            if not (row.phase.terminal or row.phase is Phase.CANCELLING):
                return False
            return self.stores.coordination.release_reservation(self.actor, job, None)

        return self._row_locked(job, act)

    # -- coordination-only ---------------------------------------------------------------------
    def expire_lease(self, a: AttemptId) -> bool:
        """``ExpireLease(a)``."""
        return self.stores.coordination.expire_lease(self.actor, a)

    def release_lease(self, a: AttemptId) -> bool:
        """``ReleaseLease(a)`` of an attempt the durable store knows is finished (e.g. its
        incarnation shut down): no need to wait for the lease to expire."""
        coord = self.stores.coordination

        def act(lk: Locked) -> bool:
            row = lk.attempts.get(a.token)
            if row is None or not self.stores.guards.lease_releasable(
                lk.job, row, worker_up=row.worker not in lk.workers_down
            ):
                return False
            return coord.release_lease(self.actor, a)

        return self._locked(a.job, act)

    def expire_reservation(self, job: str) -> bool:
        """``ExpireReservation(j)``, under the job's durable lock: an ``AuthorizeAttempt``
        reading the reservation under that lock cannot see it vanish before it commits."""
        coord = self.stores.coordination
        return self._row_locked(job, lambda row: coord.expire_reservation(self.actor, job))

    # -- incarnations ----------------------------------------------------------------------------
    def declare_down(self, worker: str, *, down_after: float | None = None) -> bool:
        """``CrashWorker(w)`` of an incarnation whose heartbeat expired (``down_after``
        seconds, default the deployment's :attr:`JobsConfig.down_after_s`; ``-inf``: the
        caller knows it is dead, e.g. the embedded worker holding the store's lock).

        The guard is evaluated first (a dry run on a read), then the fences are raised —
        the coordination mirror's down mark (``Reserve``, ``ActivateAttempt``,
        ``RenewLease``, ``ReportProgress`` of ``w`` refused) and the target's (its stage
        writes refused) — and only then the durable declaration commits, re-checking the
        guard under the worker row's lock; like the floor before ``ReapLostAttempt``, the
        fences never claim more than the durable store will hold.  From the commit on,
        ``w``'s attempts are stopped in the spec, so ``CleanupStage`` may remove their
        staging and a checkpoint they own may be resumed."""
        stores = self.stores
        after = stores.config.down_after_s if down_after is None else down_after
        by = self.incarnation or self.actor.name
        now = stores.clock.now()
        at, rows = stores.durable.liveness(now)
        seen = {w: s for w, _, s in rows}
        try:  # the guard, on a read (a dry run before the fences are raised)
            self.stores.guards.declare_down(
                worker,
                by,
                up=worker in seen,
                seen=seen.get(worker, 0.0),
                now=at,
                down_after=after,
                others_up=any(w != worker for w in seen),
            )
        except NotEnabled:
            return False
        stores.coordination.mark_down(self.actor, worker)
        try:
            stores.target.fence(self.actor, worker)
        except RemoraError:
            # The fence failed, so the declaration was never tried: the mark would claim
            # more than the durable store holds — let go of it (as below).
            self._let_go((worker,))
            raise
        try:
            stores.durable.declare_down(
                self.actor, worker, by, after, now, guard=stores.guards.declare_down
            )
        except NotEnabled:
            self._let_go((worker,))  # not committed: the guard was false (see below)
            return False
        except Unavailable:
            # Not committed (the guard was false, or the call failed — a lost reply the
            # re-read resolved as not committed): the mark would claim more than the
            # durable store holds, and an incarnation durably up but marked down could
            # never reserve again.  Let go of this declarer's mark (another declarer's
            # stays); if that fails too, the next full pass sweeps it (:meth:`_pass`).
            # An unresolved reply (UnknownResult) keeps the mark: it may have committed.
            self._let_go((worker,))
            raise
        return True

    def _let_go(self, workers: Iterable[str], fenced: bool = True) -> None:
        """Lift this declarer's target fences (``fenced``) and down marks of ``workers``
        (durably up: its declarations of them did not commit), each best effort — a
        failure leaves it to the next full pass.  A fence left up would refuse every
        stage write of a live incarnation for good: each of its attempts would fail at
        its first checkpoint."""
        ids = sorted(workers)
        if fenced:
            with contextlib.suppress(RemoraError):
                self.stores.target.unfence(self.actor, ids)
        with contextlib.suppress(RemoraError):
            self.stores.coordination.unmark_down(self.actor, ids)

    def sweep_marks(
        self, marked: Iterable[str], down: Iterable[str], fenced: Iterable[str] = ()
    ) -> None:
        """Let go of this declarer's down marks and target fences of incarnations the
        durable store holds up (``marked``: the coordination read's marks, ``fenced``: this
        declarer's fences, both read before ``down``, the durable read's incarnations
        down): a declaration of them that did not commit and whose mark or fence stayed —
        the declarer was killed between the mark and the commit, or its reply was lost
        and could not be resolved, or its let-go failed.  Another declarer's mark or fence
        (its declaration may still commit) stays; so does every mark republished from the
        durable store.  A write to each store only when something of it is stale."""
        gone = set(down)
        stale_fences = set(fenced) - gone
        if stale_fences:
            with contextlib.suppress(RemoraError):
                self.stores.target.unfence(self.actor, sorted(stale_fences))
        stale = set(marked) - gone
        if stale:
            self._let_go(stale, fenced=False)

    def own_fences(self) -> frozenset[str]:
        """This declarer's target fences (a full pass's read, before its durable read);
        nothing when the read fails (the next full pass sweeps them)."""
        target = self.stores.target
        try:
            return io_call(
                self.actor, JobOperation.TARGET_READ, "", lambda _: target.fenced(self.actor.name)
            )
        except RemoraError:
            return frozenset()

    def declare_expired(self) -> int:
        """Declare down every other incarnation whose heartbeat expired (one durable read
        per pass, not per job)."""
        stores = self.stores
        at, rows = stores.durable.liveness(stores.clock.now())
        self._durable_now = at
        after = stores.config.down_after_s
        steps = 0
        for w, _, seen in rows:
            if w != self.incarnation and at - seen >= after:
                steps += _ok(partial(self.declare_down, w))
        return steps

    # -- durable ---------------------------------------------------------------------------------
    def reap(self, a: AttemptId) -> bool:
        """``ReapLostAttempt(a)``: raise the mirror's floor, then the durable CAS (which
        re-reads the lease and the reservation under the job's lock)."""
        coord = self.stores.coordination

        def decide(lk: Any) -> Change:
            now = coord.view(self.actor, a.job, (a,))
            live = now.leases.get(a)
            return self.stores.guards.reap(
                lk.job,
                lk.attempts,
                a.token,
                lease_live=live is not None and live.live,
                reserved=a.job in now.reservations,
            )

        try:  # the same guard, evaluated before the floor is raised (a dry run)
            decide(self.stores.durable.read_locked(self.actor, a.job))
        except NotEnabled:
            return False
        coord.raise_floor(self.actor, a.job, a.token)
        return self._transact(a.job, decide)

    def schedule_retry(self, job: str) -> bool:
        """``ScheduleRetry(j)``."""
        return self._transact(job, lambda lk: self.stores.guards.schedule_retry(lk.job))

    def finalize_cancel(self, job: str) -> bool:
        """``FinalizeCancel(j)``: raise the floor to the authority's token, then commit."""
        lk = self.stores.durable.read_locked(self.actor, job)
        try:  # the guard, evaluated before the floor is raised (a dry run)
            self.stores.guards.finalize_cancel(lk.job, lk.attempts)
        except NotEnabled:
            return False
        self.stores.coordination.raise_floor(self.actor, job, lk.job.current_token)
        return self._transact(
            job, lambda lk: self.stores.guards.finalize_cancel(lk.job, lk.attempts)
        )

    def invalidate_checkpoint(self, job: str) -> bool:
        """``InvalidateCheckpoint(j)``: used when a queued job's checkpoint cannot be
        resumed because its owner is not known to have stopped."""
        return self._transact(job, lambda lk: self.stores.guards.invalidate_checkpoint(lk.job))

    def process_outcome(self, a: AttemptId) -> bool:
        """``ProcessOutcome(a)`` for an outcome its sender left in flight."""
        try:
            self.stores.process_outcome(self.actor, a)
        except NotEnabled:
            return False
        return True

    def cleanup_stage(self, a: AttemptId) -> bool:
        """``CleanupStage(a)``: under the job's lock, check eligibility against the durable
        rows and the target, then remove the staging."""
        stores = self.stores

        def act(lk: Locked) -> bool:
            att = lk.attempts.get(a.token)
            if att is None:
                return False
            stage = stores.target.info(self.actor, a)
            if not self.stores.guards.cleanup_eligible(
                lk.job, att, stage, worker_up=att.worker not in lk.workers_down
            ):
                return False
            seq = self.actor.next_seq()
            stores.target.cleanup(self.actor, a)
            self.actor.record(seq, Action.CLEANUP_STAGE, {"a": str(a)})
            return True

        return self._locked(a.job, act)

    def _transact(self, job: str, decide: Any) -> bool:
        try:
            self.stores.durable.transact(self.actor, job, decide)
        except NotEnabled:
            return False
        return True

    # -- credentials -------------------------------------------------------------------------
    def clean_credentials(self, job: JobRow) -> int:
        """Finish abandoned credential intents of a job whose writer is gone (the job is
        terminal, or the writing attempt lost its authority): ``ClaimCredentialCleanup``
        then ``DestroyClaimedCredentialSecret``; ``FenceFailedCredentialWrite`` then
        ``AbandonFencedCredentialIntent`` when the secret never reached the vault.  Each
        guard reads the vault under the job's durable lock."""
        durable = self.stores.durable
        g = self.stores.guards
        steps = 0
        try:
            intents = durable.read_locked(self.actor, job.id).credentials.values()
        except RemoraError:
            return 0
        for cred in intents:
            if not (job.phase.terminal or not job.current_authority(cred.token)):
                continue
            c = IntentId(job.id, cred.sequence)
            # Each step counted on its own: a failure of one still counts those before it.
            steps += _ok(partial(self._cred_step, c, g.claim_credential_cleanup, gone_arg=False))
            steps += _ok(partial(self._destroy, job.id, c))
            steps += _ok(
                partial(self._cred_step, c, g.fence_failed_credential_write, gone_arg=True)
            )
            steps += _ok(
                partial(self._cred_step, c, g.abandon_fenced_credential_intent, gone_arg=True)
            )
        return steps

    def _cred_step(self, c: IntentId, guard: Any, *, gone_arg: bool) -> bool:
        vault = self.stores.vault

        def decide(lk: Locked) -> Change:
            cred = lk.credentials[c.sequence]
            state = vault.state(self.actor, c)
            live = state is SecretState.LIVE
            if gone_arg:
                change: Change = guard(
                    cred, secret_live=live, secret_gone=state is SecretState.DESTROYED
                )
            else:
                change = guard(cred, secret_live=live)
            return change

        return self._transact(c.job, decide)

    def _destroy(self, job: str, c: IntentId) -> bool:
        """``DestroyClaimedCredentialSecret(c)``: the vault delete under the job's lock; the
        durable row follows (``Abandoning`` with a destroyed secret *is* ``Abandoned``)."""
        vault = self.stores.vault

        def act(lk: Locked) -> bool:
            cred = lk.credentials[c.sequence]
            live = vault.state(self.actor, c) is SecretState.LIVE
            if not self.stores.guards.can_destroy_secret(cred, secret_live=live):
                return False
            seq = self.actor.next_seq()
            vault.destroy(self.actor, c)
            self.actor.record(seq, Action.DESTROY_CLAIMED_CREDENTIAL_SECRET, {"c": str(c)})
            return True

        done = self._locked(job, act)
        if done:  # not a spec step: a failure leaves a row the spec already reads as Abandoned
            with contextlib.suppress(RemoraError):
                self._transact(
                    job,
                    lambda lk: Change(
                        "",
                        {"c": str(c)},
                        credentials=(
                            attrs.evolve(
                                lk.credentials[c.sequence], state=CredentialState.ABANDONED
                            ),
                        ),
                    ),
                )
        return done

    # -- one pass ------------------------------------------------------------------------------
    def reconcile_once(self, *, full: bool = True) -> int:
        """Every enabled ambient step, once: returns how many were taken.  A full pass
        reads everything (and reads again between its stages); with ``full`` off, an
        incremental pass reads only the work in flight (:class:`_Incremental`).  Both
        follow one plan (:meth:`_pass`)."""
        if self.durable_only:
            return self._durable_only()
        return self._pass(_Full(self) if full else _Incremental(self))

    def _pass(self, reads: _Reads) -> int:
        """The plan of a pass: declare expired incarnations down; expire leases and
        reservations (release the leases of incarnations that are down); process the
        outcomes in flight; per job, the steps its phase calls for; clean terminal
        coordination and stale live progress; clean up stagings; finish abandoned
        credential intents.  A step is tried when ``reads`` say its guard may hold — each
        step still re-checks its guard under the job's lock, so a stale read only costs a
        pass.  A wipe is repaired here too (every queued job is re-enqueued, every cancel
        notice republished)."""
        stores = self.stores
        g = stores.guards
        cfg = stores.config
        steps = self.declare_expired()
        fenced = self.own_fences() if isinstance(reads, _Full) else frozenset()
        snap, down = reads.start()
        self.sweep_marks(snap.down, down, fenced)
        gone: set[AttemptId] = set()  # leases this pass expired or released
        unreserved: set[str] = set()  # reservations this pass expired
        for a, lease in sorted(snap.leases.items()):
            if not lease.live:
                continue
            if g.can_expire_lease(snap, a, cfg.tick_ms, cfg.lease_ticks):
                took = _ok(partial(self.expire_lease, a))
            elif lease.worker in down:
                took = _ok(partial(self.release_lease, a))
            else:
                continue
            steps += took
            if took:
                gone.add(a)
        for job in sorted(snap.reservations):
            if g.can_expire_reservation(snap, job, cfg.tick_ms, cfg.reservation_ticks):
                took = _ok(partial(self.expire_reservation, job))
                steps += took
                if took:
                    unreserved.add(job)
        dsnap, snap = reads.middle(snap)
        if reads.fresh:  # read again: what this pass expired is in the reads
            gone, unreserved = set(), set()
        down = {w.id for w in dsnap.workers if not w.up}
        jobs = {jr.id: jr for jr in dsnap.jobs}
        attempts = {(r.job, r.token): r for r in dsnap.attempts}
        for row in dsnap.attempts:
            if row.pending is not None:
                steps += _ok(partial(self.process_outcome, row.id))
        to_clean: list[str] = []  # the terminal jobs whose coordination is not clean
        # Highest priority first (then submission order): what is enqueued first is
        # offered first, so a worker running beside this pass starts the urgent jobs.
        for jr in sorted(dsnap.jobs, key=lambda r: (-r.priority, r.seq, r.id)):
            j = jr.id
            reserved = j in snap.reservations and j not in unreserved
            if jr.phase is Phase.CANCELLING:
                if reads.fresh or j not in snap.notices:
                    steps += _ok(partial(self.publish_cancel_notice, j))
                if reads.fresh or reserved:
                    steps += _ok(partial(self.release_reservation, j))
                steps += _ok(partial(self.finalize_cancel, j))
            elif jr.phase is Phase.RUNNING and jr.authority:
                a = AttemptId(j, jr.authority)
                if reads.fresh or self._looks_lost(snap, a, reserved, gone):
                    reaped = _ok(partial(self.reap, a))
                    steps += reaped
                    if reaped and not jr.checkpoint_valid:
                        # Follow a lost attempt's recovery through in this pass (each step
                        # re-checks its own guard under the job's lock): waiting a pass
                        # per step added two reconcile intervals to recovery (jobs_peers.py).
                        steps += _ok(partial(self.schedule_retry, j))
                        steps += _ok(partial(self.enqueue, j))
            elif jr.phase is Phase.RETRY_WAIT:
                steps += _ok(partial(self.schedule_retry, j))
            elif jr.phase is Phase.QUEUED:
                owner = attempts.get((j, jr.checkpoint_owner))
                if (
                    jr.checkpoint_valid
                    and owner is not None
                    and not durably_stopped(owner, owner.worker not in down)
                ):
                    steps += _ok(partial(self.invalidate_checkpoint, j))
                # A delayed job is enqueued once due (Enqueue re-checks under the lock).
                if j not in snap.queued and not reserved and g.is_due(jr, self._durable_now):
                    steps += _ok(partial(self.enqueue, j))
            dirty = jr.phase.terminal and g.coordination_dirty(snap, j)
            if dirty:
                to_clean.append(j)
            # (A dirty job's progress goes with its clean, at the end of the pass.)
            if (
                j in snap.progress
                and not dirty
                and (reads.fresh or self._stale_progress(snap, jr, gone))
            ):
                steps += _ok(partial(self.clear_stale_progress, j))
        if not reads.fresh:
            # Coordination entries of jobs the durable read did not return: they finished
            # before the read's window (the clean re-checks the phase under the lock).
            listed = snap.queued | snap.reservations.keys() | snap.notices | snap.progress.keys()
            to_clean += sorted(listed - jobs.keys())
        steps += self.clean_terminal_batch(to_clean)
        dsnap = reads.late(dsnap)
        down = {w.id for w in dsnap.workers if not w.up}
        jobs = {jr.id: jr for jr in dsnap.jobs}
        for row in dsnap.attempts:
            owner_job = jobs.get(row.job)
            if owner_job is None or row.committed:
                continue
            if not (row.stop is Stop.FAILED or row.stopped or row.worker in down):
                continue
            info = stores.target.info(None, row.id)
            if g.cleanup_eligible(owner_job, row, info, worker_up=row.worker not in down):
                steps += _ok(partial(self.cleanup_stage, row.id))
        with_intents = {c.job for c in dsnap.credentials}
        for jr in dsnap.jobs:
            if jr.id in with_intents:
                steps += self.clean_credentials(jr)
        self._in_flight = frozenset(jr.id for jr in dsnap.jobs if not jr.phase.terminal)
        self._mark = max([self._mark, *(jr.seq for jr in dsnap.jobs)])
        return steps

    def _looks_lost(
        self, snap: CoordSnapshot, a: AttemptId, reserved: bool, gone: set[AttemptId]
    ) -> bool:
        """Whether the running attempt ``a`` looks lost (no live lease, no reservation)
        — worth the reaper's durable dry run.  The reads are not one snapshot: a job that
        finished (and released its lease) between them looks lost, so a narrow re-read of
        the coordination store, cheaper than the dry run, confirms it."""
        held = snap.leases.get(a)
        live = held is not None and held.live and a not in gone
        if not live and not reserved and a not in gone:
            now = self.stores.coordination.view(self.actor, a.job, (a,))
            lease_now = now.leases.get(a)
            live = lease_now is not None and lease_now.live
            reserved = a.job in now.reservations
        return not live and not reserved

    def _stale_progress(self, snap: CoordSnapshot, jr: JobRow, gone: set[AttemptId]) -> bool:
        """``ClearStaleLiveProgress``'s guard on the reads (the leases this pass ended
        counted as gone)."""
        j = jr.id
        authority = AttemptId(j, jr.authority) if jr.current_authority(jr.authority) else None
        leases = {k: v for k, v in snap.leases.items() if k not in gone}
        return self.stores.guards.can_clear_stale_progress(
            attrs.evolve(snap, leases=leases), j, authority
        )

    def _durable_only(self) -> int:
        steps = 0
        dsnap = self.stores.durable.snapshot()
        for row in dsnap.attempts:
            if row.pending is not None:
                steps += _ok(partial(self.process_outcome, row.id))
        for job in dsnap.jobs:
            if job.phase is Phase.RETRY_WAIT:
                steps += _ok(partial(self.schedule_retry, job.id))
            elif job.phase is Phase.CANCELLING:
                steps += _ok(partial(self.finalize_cancel, job.id))
        return steps


class _Reads:
    """What a pass reads, and when (:meth:`Reconciler._pass`)."""

    #: Reads again between the pass's stages and tries every step its phase allows (a
    #: full pass); else one read, and only the steps the read says may be enabled.
    fresh: bool

    def __init__(self, reconciler: Reconciler) -> None:
        self.r = reconciler

    def start(self) -> tuple[CoordSnapshot, set[str]]:
        """The coordination read the expirations are decided on, and the incarnations
        that are down."""
        raise NotImplementedError

    def middle(self, snap: CoordSnapshot) -> tuple[DurableSnapshot, CoordSnapshot]:
        """The reads the per-job steps are decided on."""
        raise NotImplementedError

    def late(self, dsnap: DurableSnapshot) -> DurableSnapshot:
        """The durable read the stagings' cleanup and the credentials are decided on."""
        raise NotImplementedError


class _Full(_Reads):
    """A full pass: the whole coordination and durable state, read again at each stage
    (what the stages before changed is seen by the next)."""

    fresh = True

    def start(self) -> tuple[CoordSnapshot, set[str]]:
        stores = self.r.stores
        snap = stores.coordination.snapshot(self.r.actor)
        return snap, {w.id for w in stores.durable.snapshot().workers if not w.up}

    def middle(self, snap: CoordSnapshot) -> tuple[DurableSnapshot, CoordSnapshot]:
        stores = self.r.stores
        dsnap = stores.durable.snapshot()
        return dsnap, stores.coordination.snapshot(self.r.actor)

    def late(self, dsnap: DurableSnapshot) -> DurableSnapshot:
        return self.r.stores.durable.snapshot()


class _Incremental(_Reads):
    """An incremental pass: one durable read of the jobs not yet terminal, the newest ones
    and those the previous pass saw in flight (:meth:`DurableStore.active_snapshot`), one
    coordination read without dead leases and the mirror (:meth:`Coordination.active`).
    Finished jobs whose housekeeping became possible only later (e.g. an attempt's worker
    went down) are left to the periodic full pass."""

    fresh = False

    def start(self) -> tuple[CoordSnapshot, set[str]]:
        r = self.r
        self.dsnap = r.stores.durable.active_snapshot(r._mark, r._in_flight)
        snap = r.stores.coordination.active(r.actor)
        return snap, {w.id for w in self.dsnap.workers if not w.up}

    def middle(self, snap: CoordSnapshot) -> tuple[DurableSnapshot, CoordSnapshot]:
        return self.dsnap, snap

    def late(self, dsnap: DurableSnapshot) -> DurableSnapshot:
        return dsnap


#: The most jobs one ``CleanTerminalCoordination`` batch locks and cleans.
CLEAN_BATCH = 128


def _ok(fn: Any) -> int:
    """1 when the step ``fn`` was taken (it answered done), else 0 — also when it failed:
    a pass counts only the spec steps it took (``remora jobs reconcile`` prints the
    count; the job machines hold it to the steps the pass recorded)."""
    try:
        return int(bool(fn()))
    except RemoraError:
        return 0


__all__ = ["CLEAN_BATCH", "Reconciler"]
