"""Planted bugs for the judgement of every state (``remora/sim/jobs/judgement.py``): one or
more per check, each a realistic single-site bug in the job runtime that the refinement
check, the drain and the quiescence judgement do not see.  Each is planted by
monkeypatching (never through a production flag) and names the check that kills it;
``tests/jobs/test_job_judgement.py`` shows the job machines alone kill it with the
check and that it survives the same budget without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from remora.errors import RemoraError
from remora.jobs import (
    guards,
    history,
    incarnations,
    metrics,
    reconciler,
    snapshots,
    sql,
    transactions,
)
from remora.jobs.actions import Action
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.guards import Guards
from remora.jobs.io import Actor, JobOperation
from remora.jobs.model import (
    AttemptId,
    IntentId,
    JobRow,
    Lease,
    NotEnabled,
    Outcome,
    Phase,
    SecretState,
)
from remora.jobs.reconciler import Reconciler
from remora.jobs.sql import Locked
from remora.jobs.target import MemoryTarget, MemoryVault, _write_call
from remora.jobs.worker import Worker


def lazy_renew(mp: pytest.MonkeyPatch) -> None:
    """``RenewLease`` only once the lease is two ticks old (the spec: one): a renewal the
    spec enables is refused — a stutter to the refinement check, and the drain still
    quiesces (the lease expires, the attempt is reaped and retried)."""
    real = Guards.can_renew

    def can_renew(
        self: Guards, c: Any, a: AttemptId, worker: str, tick_ms: int, limit: int
    ) -> bool:
        lease = c.leases.get(a)
        old = lease is not None and guards.age(c.now_ms, lease.at_ms, tick_ms, limit + 1) > 1
        return real(self, c, a, worker, tick_ms, limit) and old

    mp.setattr(Guards, "can_renew", can_renew)


def eager_credential_cleanup(mp: pytest.MonkeyPatch) -> None:
    """The reconciler cleans up every half-done credential intent, its writer gone or not:
    the spec allows it (cleanup has no guard on the writer), but the live writer's next
    step then fails and its credential is lost."""

    def clean_credentials(self: Reconciler, job: JobRow) -> int:
        g = self.stores.guards
        steps = 0
        for cred in self.stores.durable.read_locked(self.actor, job.id).credentials.values():
            c = IntentId(job.id, cred.sequence)  # (the writer-gone condition is missing)
            steps += self._cred_step(c, g.claim_credential_cleanup, gone_arg=False)
            steps += self._destroy(job.id, c)
            steps += self._cred_step(c, g.fence_failed_credential_write, gone_arg=True)
            steps += self._cred_step(c, g.abandon_fenced_credential_intent, gone_arg=True)
        return steps

    mp.setattr(Reconciler, "clean_credentials", clean_credentials)


def reaper_holds_the_lease(mp: pytest.MonkeyPatch) -> None:
    """``ExpireLease`` records the reaper as the expired lease's holder: alpha reads a
    lease's state and age, never its holder."""

    def expire_lease(self: MemoryCoordination, actor: Actor, a: AttemptId) -> bool:
        cfg = self.config

        def body(d: Any, c: Any, now: int) -> bool:
            if not self.guards.can_expire_lease(c, a, cfg.tick_ms, cfg.lease_ticks):
                return False
            d.leases[a] = Lease(actor.name, d.leases[a].at_ms, False)
            return True

        return bool(self._op(actor, Action.EXPIRE_LEASE, {"a": str(a)}, a.job, body))

    mp.setattr(MemoryCoordination, "expire_lease", expire_lease)


def forgets_a_failure_in_flight(mp: pytest.MonkeyPatch) -> None:
    """The worker remembers that its outcome is in flight only for a success: after
    sending a failure it renews, reports and stages as if nothing were pending (alpha
    reads the pending outcome from the durable store, never the worker's memory of it).
    The state check kills it right after the ``SendOutcome``; without it, the refinement
    check kills it later in some runs — when the worker, still believing its attempt
    executes, stops it cooperatively after its failure was accepted."""
    real = Worker.send_outcome

    def send_outcome(self: Worker, a: AttemptId, outcome: Outcome) -> None:
        real(self, a, outcome)
        if outcome is not Outcome.SUCCESS:
            self.attempts[a].outcome_sent = False

    mp.setattr(Worker, "send_outcome", send_outcome)


def soft_stage_cleanup(mp: pytest.MonkeyPatch) -> None:
    """``CleanupStage`` marks the staging cleaned but keeps its bytes (a soft delete): a
    zombie's output stays readable (alpha reads the cleaned mark, never the bytes)."""

    def cleanup(self: MemoryTarget, actor: Actor, a: AttemptId) -> bool:
        def body() -> bool:
            with self._lock:
                if a in self._cleaned:
                    return False
                self._cleaned[a] = max(self._stages.get(a) or {}, default=0)
                return True

        return bool(
            _write_call(
                actor, JobOperation.TARGET_WRITE, a.job, body, lambda: a in self._cleaned, True
            )
        )

    mp.setattr(MemoryTarget, "cleanup", cleanup)


class SoftDeleteVault(MemoryVault):
    """A vault that tombstones a destroyed secret but keeps its bytes readable."""

    def __init__(self) -> None:
        super().__init__()
        self._gone: set[IntentId] = set()

    def state(self, actor: Actor | None, c: IntentId) -> SecretState:
        return SecretState.DESTROYED if c in self._gone else super().state(actor, c)

    def destroy(self, actor: Actor, c: IntentId) -> None:
        def body() -> None:
            with self._lock:
                if c not in self._secrets or c in self._gone:
                    raise NotEnabled(f"no live secret {c}")
                self._gone.add(c)

        _write_call(actor, JobOperation.VAULT_WRITE, c.job, body, lambda: c in self._gone, None)


def soft_secret_destroy(mp: pytest.MonkeyPatch) -> None:
    """``DestroyClaimedCredentialSecret`` tombstones the secret but keeps its bytes: an
    abandoned credential stays readable (alpha reads the secret's state, never its
    bytes)."""
    import remora.sim.jobs.simulation as simulation

    mp.setattr(simulation, "MemoryVault", SoftDeleteVault)


def no_down_mark(mp: pytest.MonkeyPatch) -> None:
    """The coordination store's down mark writes nothing (as if the memory store forgot
    the field): a declared-down incarnation could still reserve — but a killed one never
    acts, so no step shows it; only the drained store does."""
    mp.setattr(MemoryCoordination, "mark_down", lambda self, actor, worker: None)


def no_target_fence(mp: pytest.MonkeyPatch) -> None:
    """The target's fence writes nothing (as if the memory target forgot to record the
    incarnation): a declared incarnation's zombie stage writes go in, into a staging the
    spec holds stopped — and that a successor may take over.  Not a control: without the
    check, the cut machine's zombie steps kill it through the refinement check
    (``tests/jobs/test_cut_machine_planted.py`` shows that, and its control)."""
    mp.setattr(MemoryTarget, "fence", lambda self, actor, worker: None)


def _release_reservation(
    ending: Callable[[JobRow], bool], refused: bool
) -> Callable[[Worker, str], bool]:
    """``Worker.release_reservation`` releasing when ``ending(row)``, answering ``refused``
    where it does not."""

    def release_reservation(self: Worker, job: str) -> bool:
        self._need_up()
        rid = self.reservations.get(job)
        if rid is None:
            return False

        def block(lk: Locked) -> bool:
            if not ending(lk.job):
                return refused
            return self.stores.coordination.release_reservation(self.actor, job, rid)

        done = self.stores.durable.with_lock(self.actor, job, block)
        if done:
            self.reservations.pop(job, None)
        return done

    return release_reservation


def release_claims_success(mp: pytest.MonkeyPatch) -> None:
    """``Worker.release_reservation`` answers done where it must refuse (the durable job is
    neither terminal nor cancelling): the worker forgets a reservation it still holds, the
    coordination store keeps it until it expires.  No spec action is taken, so the
    refinement check sees a stutter, and the worker's later authorize is excused by
    "reservation unknown"; only the affirmation check sees the answer."""
    ending = lambda row: row.phase.terminal or row.phase is Phase.CANCELLING  # noqa: E731
    mp.setattr(Worker, "release_reservation", _release_reservation(ending, refused=True))


def release_waits_for_both(mp: pytest.MonkeyPatch) -> None:
    """``Worker.release_reservation``'s condition with ``and`` for ``or`` (terminal *and*
    cancelling — never both): the worker's release is always refused, the reservation
    waits for its expiry or the reconciler.  A refusal is a stutter to the refinement
    check; only the refusal judgement of the worker's own release sees it."""
    ending = lambda row: row.phase.terminal and row.phase is Phase.CANCELLING  # noqa: E731
    mp.setattr(Worker, "release_reservation", _release_reservation(ending, refused=False))


def down_keeps_running(mp: pytest.MonkeyPatch) -> None:
    """``Worker.declared_down`` marks the incarnation down but leaves its attempts as they
    were: its handlers' next calls find an executing attempt of an incarnation that is
    down (the stores refuse them, so no spec step shows it; the spec stopped them at
    ``CrashWorker``)."""

    def declared_down(self: Worker) -> None:
        self.up = False  # (its attempts are not stopped)

    mp.setattr(Worker, "declared_down", declared_down)


def down_logged_at_the_wrong_version(mp: pytest.MonkeyPatch) -> None:
    """An incarnation's going down (``CrashWorker``: a shutdown or a declaration) is
    logged one version too far: the row's update and the actor's record are right, so
    alpha and the refinement check see the right step, but the incarnation's history has
    a gap (trace validation over the services would place the step wrongly)."""
    real = incarnations.insert_log

    def insert_log(
        cur: Any, dialect: Any, subject: str, version: int, action: str, *args: Any, **kwargs: Any
    ) -> None:
        if action == Action.CRASH_WORKER:
            version += 1
        real(cur, dialect, subject, version, action, *args, **kwargs)

    mp.setattr(incarnations, "insert_log", insert_log)


def submission_time_from_the_next_column(mp: pytest.MonkeyPatch) -> None:
    """A job row's decoding reads ``submitted_at`` from the next column (``started_at``):
    a row-decoding constant off by one.  Alpha reads no time of a job, and the transitions
    never write the submission time back, so only the history would show it."""
    _time_from_column(mp, "submitted_at", 21)


def _time_from_column(mp: pytest.MonkeyPatch, field: str, column: int) -> None:
    """Plant a job row decoding that reads the time ``field`` from ``column``."""
    real = sql.job_row

    def job_row(r: tuple[Any, ...]) -> JobRow:
        return attrs.evolve(real(r), **{field: float(r[column])})

    mp.setattr(sql, "job_row", job_row)
    mp.setattr(snapshots, "job_row", job_row)


def requeue_keeps_the_first_queued_time(mp: pytest.MonkeyPatch) -> None:
    """A job queued again (its retry due, its lost attempt reaped) keeps the time it was
    first queued: the transitions' time stamp sets ``queued_at`` only while it is unset
    (``submit`` sets it).  Every wait after the first is measured from the submission —
    the ``waited`` fact, ``remora jobs status`` — and no guard reads a time."""
    real = sql.stamp

    def stamp(locked: Locked, change: Any) -> Any:
        change = real(locked, change)
        job = change.job
        if job is not None and locked.job.queued_at and job.queued_at != locked.job.queued_at:
            change = attrs.evolve(change, job=attrs.evolve(job, queued_at=locked.job.queued_at))
        return change

    mp.setattr(sql, "stamp", stamp)
    mp.setattr(transactions, "stamp", stamp)


def started_time_from_the_finished_column(mp: pytest.MonkeyPatch) -> None:
    """A job row's decoding reads ``started_at`` from the next column (``finished_at``):
    both stay between the submission and now, so only a judgement that knows when the job
    first ran sees it (a survivor of the job side's mutation sample)."""
    _time_from_column(mp, "started_at", 22)


def stop_waits_for_the_outcome_in_flight(mp: pytest.MonkeyPatch) -> None:
    """``CooperativeStop`` takes the guard of the other executing steps, which refuses
    while an outcome is in flight: a worker whose lease lapsed, or whose job was
    cancelled, keeps its attempt executing until its outcome is processed — which may be
    never (the outcome is rejected, or its sender lost its authority).  The refinement
    check sees a stutter; the drain's reaper clears up after it."""
    from remora.jobs.worker import EXECUTING

    real = Worker.cooperative_stop

    def cooperative_stop(self: Worker, a: AttemptId) -> bool:
        local = self.attempts.get(a)
        if local is not None and local.state == EXECUTING and local.outcome_sent:
            raise NotEnabled(f"{a}: an outcome is in flight")  # planted
        return bool(real(self, a))

    mp.setattr(Worker, "cooperative_stop", cooperative_stop)


def cleanup_waits_for_the_job_to_end(mp: pytest.MonkeyPatch) -> None:
    """The reconciler cleans a stopped attempt's staging only once its job is terminal: a
    retried job's earlier stagings pile up in the target while it runs.  Every staging is
    cleaned in the end (the drain ends every job), so only a judgement of the cleanups the
    spec enables sees it."""
    real = Reconciler.cleanup_stage

    def cleanup_stage(self: Reconciler, a: AttemptId) -> bool:
        if not self.stores.durable.read_locked(self.actor, a.job).job.phase.terminal:
            return False  # planted
        return bool(real(self, a))

    mp.setattr(Reconciler, "cleanup_stage", cleanup_stage)


def reconciler_leaves_outcomes_to_live_senders(mp: pytest.MonkeyPatch) -> None:
    """The reconciler leaves an in-flight outcome alone while its sender's lease is live,
    trusting the sender to process it: ``ProcessOutcome`` is anyone's, and a sender whose
    reply was lost waits for the reconciler.  The outcome is processed once the lease
    lapses, so only a judgement of the steps the spec enables sees it."""
    real = Reconciler.process_outcome

    def process_outcome(self: Reconciler, a: AttemptId) -> bool:
        lease = self.stores.coordination.view(self.actor, a.job, (a,)).leases.get(a)
        if lease is not None and lease.live:
            return False  # planted
        return bool(real(self, a))

    mp.setattr(Reconciler, "process_outcome", process_outcome)


def history_blames_the_previous_token(mp: pytest.MonkeyPatch) -> None:
    """History attributes an accepted outcome to the token before its own (an off-by-one
    in reading the attempt a log row names): attempt 2's success shows on attempt 1 —
    already ended, so ignored — and attempt 2 shows as running.  Only the read-model
    check reads history."""
    real = history._token

    def token(e: Any) -> int | None:
        t = real(e)
        if t is not None and t > 1 and e.action in history.ACCEPTED:
            return t - 1
        return t

    mp.setattr(history, "_token", token)


def history_skips_the_unnamed_rows(mp: pytest.MonkeyPatch) -> None:
    """History reads only the log rows of spec actions, skipping the rows no spec action
    names — the worker's recorded stop among them: an attempt its worker stopped and
    recorded shows as running.  The read-model check once allowed both (a stop is recorded
    by a step the spec does not see); it now reads the attempt's durable row."""
    real = history.attempts_of

    def attempts_of(job: JobRow, rows: Any, log: Any) -> Any:
        return real(job, rows, (e for e in log if e.action))

    mp.setattr(history, "attempts_of", attempts_of)


def gauge_counts_retry_wait_as_queued(mp: pytest.MonkeyPatch) -> None:
    """The jobs-by-phase gauge counts the jobs waiting for their retry under ``Queued``
    (and none under ``RetryWait``): what an operator's dashboard and alerts read."""
    real = metrics._Jobs.collect

    waiting, queued = Phase.RETRY_WAIT.value, Phase.QUEUED.value

    def moved(samples: list[Any]) -> list[Any]:
        out = {s.labels["queue"]: s.value for s in samples if s.labels["phase"] == waiting}

        def value(s: Any) -> float:
            if s.labels["phase"] == waiting:
                return 0.0
            extra = out.get(s.labels["queue"], 0) if s.labels["phase"] == queued else 0
            return float(s.value + extra)

        return [s._replace(value=value(s)) for s in samples]

    def collect(self: Any) -> Any:
        for family in real(self):
            if family.name == "remora_jobs":
                family.samples = moved(family.samples)
            yield family

    mp.setattr(metrics._Jobs, "collect", collect)


def batch_logged_at_one_position(mp: pytest.MonkeyPatch) -> None:
    """A batched ``Reserve`` logs its reservations at the position the first one took (the
    position computed once, before the loop over the batch): the log holds the batch's
    steps at one position, so a replay or a recovery of a killed process orders them
    wrongly — every reservation itself is right, so alpha sees nothing."""
    real = MemoryCoordination.reserve_batch

    def reserve_batch(self: MemoryCoordination, *args: Any, **kwargs: Any) -> Any:
        before = len(self._log)
        out = real(self, *args, **kwargs)
        batch = self._log[before:]
        if len(batch) > 1:
            self._log[before + 1 :] = [attrs.evolve(e, order=batch[0].order) for e in batch[1:]]
        return out

    mp.setattr(MemoryCoordination, "reserve_batch", reserve_batch)


Plant = Callable[[pytest.MonkeyPatch], None]


def declarer_keeps_its_mark(mp: pytest.MonkeyPatch) -> None:
    """``Reconciler.declare_down`` forgets to let go of its down mark when its declaration
    does not commit (refused under the lock, or failed and resolved as not committed):
    the incarnation, durably up, is fenced — its reservations and renewals refused — until
    a full pass sweeps the mark.  Its refusals are excused by the mark itself (the
    documented ``down`` reason), and a fault-free pass sweeps it, so only the judgement of
    the declaration's own step sees it."""
    real = Reconciler.declare_down

    def declare_down(self: Reconciler, worker: str, *, down_after: float | None = None) -> bool:
        setattr(self, "_let_go", lambda workers: None)  # noqa: B010 (this call only)
        try:
            return real(self, worker, down_after=down_after)
        finally:
            del self._let_go

    mp.setattr(Reconciler, "declare_down", declare_down)


def pass_counts_the_steps_it_tried(mp: pytest.MonkeyPatch) -> None:
    """The reconcile pass counts every step it tried, taken or refused (its ``_ok`` helper
    ignores the step's answer): ``remora jobs reconcile`` reports work it did not do.  No
    spec step changes — the refinement check and the state see nothing; only the count's
    judgement does."""

    def _ok(fn: Any) -> int:
        try:
            fn()
        except RemoraError:
            return 0
        return 1

    mp.setattr(reconciler, "_ok", _ok)


@attrs.frozen
class Planted:
    """A planted bug, the check that kills it, the failure it is killed with (a prefix),
    and the machine that kills it (by its name in ``tests/jobs/job_machines.py``);
    ``survives``: whether it survives the same budget without the check (False: the check
    kills it first, but other checks reach it later — stated where it is planted)."""

    plant: Plant
    check: str
    failure: str
    machine: str
    survives: bool = True


def _pass_skips(mp: pytest.MonkeyPatch, duty: str) -> None:
    """Plant a reconcile pass that no longer calls the reconciler's method ``duty`` (the
    call dropped from the pass; the method still works when called by itself)."""
    real_pass = Reconciler._pass
    real_duty = getattr(Reconciler, duty)
    in_pass: set[int] = set()

    def _pass(self: Reconciler, *args: Any, **kwargs: Any) -> Any:
        in_pass.add(id(self))
        try:
            return real_pass(self, *args, **kwargs)
        finally:
            in_pass.discard(id(self))

    def skipped(self: Reconciler, *args: Any) -> bool:
        if id(self) in in_pass:
            return False  # planted: the pass skips it
        return bool(real_duty(self, *args))

    mp.setattr(Reconciler, "_pass", _pass)
    mp.setattr(Reconciler, duty, skipped)


def pass_forgets_a_release(mp: pytest.MonkeyPatch) -> None:
    """A reconcile pass that no longer releases a cancelled job's reservation: the
    reservation is held until it expires — no unsafe state, the drain still quiesces."""
    _pass_skips(mp, "release_reservation")


def pass_forgets_stale_progress(mp: pytest.MonkeyPatch) -> None:
    """A reconcile pass that no longer clears a job's stale live progress (the hint of an
    attempt that lost its authority or its lease): users read a stale progress until the
    job ends and its coordination is cleaned."""
    _pass_skips(mp, "clear_stale_progress")


def _incremental_skips(mp: pytest.MonkeyPatch, duty: str) -> None:
    """Plant an incremental reconcile pass that no longer calls the reconciler's method
    ``duty`` (its branch reads a stale condition); a full pass still does."""
    real_pass = Reconciler._pass
    real_duty = getattr(Reconciler, duty)
    incremental: set[int] = set()

    def _pass(self: Reconciler, reads: Any) -> Any:
        if not reads.fresh:
            incremental.add(id(self))
        try:
            return real_pass(self, reads)
        finally:
            incremental.discard(id(self))

    def skipped(self: Reconciler, job: str) -> bool:
        if id(self) in incremental:
            return False  # planted: skipped by an incremental pass
        return bool(real_duty(self, job))

    mp.setattr(Reconciler, "_pass", _pass)
    mp.setattr(Reconciler, duty, skipped)


def incremental_pass_forgets_to_enqueue(mp: pytest.MonkeyPatch) -> None:
    """An incremental reconcile pass that no longer enqueues a queued job it finds missing
    from the queue (its phase's branch reads a stale condition); the full pass, every few
    passes, still does — so a job waits passes longer to run, and the drain still
    quiesces."""
    _incremental_skips(mp, "enqueue")


def incremental_pass_forgets_the_notice(mp: pytest.MonkeyPatch) -> None:
    """An incremental reconcile pass that no longer publishes a cancelling job's notice
    (``reads.fresh and …`` for ``or``: only a full pass publishes) and finalizes the cancel
    all the same: the running handler is told only when its lease ends, a lease period
    later, and no spec step is wrong — the notice duty was disabled by the pass's own
    ``FinalizeCancel``, which the duties judgement once took as done.  The session's second
    realistic bug of stop 46: the job machines did not kill it before."""
    _incremental_skips(mp, "publish_cancel_notice")


PLANTED: dict[str, Planted] = {
    "lazy-renew": Planted(lazy_renew, "refusals", "ERROR refused: renew", "RaceJobs"),
    "eager-credential-cleanup": Planted(
        eager_credential_cleanup, "overreach", "ERROR overreach: ", "RaceJobs"
    ),
    "reaper-holds-the-lease": Planted(
        reaper_holds_the_lease, "state", "ERROR state: the lease of ", "RaceJobs"
    ),
    "forgets-a-failure-in-flight": Planted(
        forgets_a_failure_in_flight, "state", "ERROR state: ", "RaceJobs", survives=False
    ),
    "soft-stage-cleanup": Planted(
        soft_stage_cleanup, "contents", "ERROR state: the cleaned staging of ", "RaceJobs"
    ),
    "soft-secret-destroy": Planted(
        soft_secret_destroy, "contents", "ERROR state: the VaultSecretDestroyed secret ", "RaceJobs"
    ),
    "release-claims-success": Planted(
        release_claims_success,
        "affirmations",
        "ERROR affirmed: release-reservation",
        "SpecSizedJobs",
    ),
    "release-waits-for-both": Planted(
        release_waits_for_both, "refusals", "ERROR refused: release-reservation", "SpecSizedJobs"
    ),
    "down-keeps-running": Planted(
        down_keeps_running, "stopped-incarnations", "ERROR state: ", "RaceJobs"
    ),
    "down-logged-at-the-wrong-version": Planted(
        down_logged_at_the_wrong_version, "durable-log", "ERROR durable-log: ", "RaceJobs"
    ),
    "batch-logged-at-one-position": Planted(
        batch_logged_at_one_position, "coordination-log", "ERROR coordination-log: ", "LoopJobs"
    ),
    "submission-time-from-the-next-column": Planted(
        submission_time_from_the_next_column, "row-times", "ERROR row-times: ", "SpecSizedJobs"
    ),
    "requeue-keeps-the-first-queued-time": Planted(
        requeue_keeps_the_first_queued_time, "row-times", "ERROR row-times: ", "LargerJobs"
    ),
    "started-time-from-the-finished-column": Planted(
        started_time_from_the_finished_column, "row-times", "ERROR row-times: ", "SpecSizedJobs"
    ),
    "stop-waits-for-the-outcome-in-flight": Planted(
        stop_waits_for_the_outcome_in_flight,
        "refusals",
        "ERROR refused: cooperative-stop",
        "RaceJobs",
    ),
    "cleanup-waits-for-the-job-to-end": Planted(
        cleanup_waits_for_the_job_to_end,
        "refusals",
        "ERROR refused: cleanup-stage",
        "RaceJobs",
    ),
    "reconciler-leaves-outcomes-to-live-senders": Planted(
        reconciler_leaves_outcomes_to_live_senders,
        "refusals",
        "ERROR refused: reconciler-process-outcome",
        "RaceJobs",
    ),
    "history-blames-the-previous-token": Planted(
        history_blames_the_previous_token,
        "read-models",
        "ERROR read-models: history shows ",
        "SpecSizedJobs",
    ),
    "history-skips-the-unnamed-rows": Planted(
        history_skips_the_unnamed_rows,
        "read-models",
        "ERROR read-models: history shows ",
        "RaceJobs",
    ),
    "gauge-counts-retry-wait-as-queued": Planted(
        gauge_counts_retry_wait_as_queued,
        "read-models",
        "ERROR read-models: the jobs gauge counts ",
        "SpecSizedJobs",
    ),
    "no-target-fence": Planted(
        no_target_fence, "fences", "ERROR fences: ", "CutJobs", survives=False
    ),
    "declarer-keeps-its-mark": Planted(
        declarer_keeps_its_mark, "state", "ERROR marks: a declaration of", "CutJobs"
    ),
    "pass-counts-the-steps-it-tried": Planted(
        pass_counts_the_steps_it_tried, "affirmations", "ERROR affirmed: reconcile", "SpecSizedJobs"
    ),
    "pass-forgets-a-release": Planted(
        pass_forgets_a_release, "duties", "ERROR duties: ReleaseReservation(", "RaceJobs"
    ),
    "incremental-pass-forgets-to-enqueue": Planted(
        incremental_pass_forgets_to_enqueue, "duties", "ERROR duties: Enqueue(", "LoopJobs"
    ),
    "incremental-pass-forgets-the-notice": Planted(
        incremental_pass_forgets_the_notice,
        "duties",
        "ERROR duties: PublishCancelNotice(",
        "LoopJobs",
    ),
    "pass-forgets-stale-progress": Planted(
        pass_forgets_stale_progress,
        "duties",
        "ERROR duties: ClearStaleLiveProgress(",
        "SpecSizedJobs",
    ),
    "no-down-mark": Planted(
        no_down_mark,
        "drained-coordination",
        "ERROR not-quiescent: ",
        "RaceJobs",
    ),
}

__all__ = ["PLANTED", "Planted", "SoftDeleteVault"]
