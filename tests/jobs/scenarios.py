"""The job-runtime scenarios: one per spec action, on the memory stores by default (the
contract suite sets :data:`BACKENDS`), every step checked by the refinement checker: each
step must be enabled in alpha(before), yield exactly alpha(after), and keep every invariant
and action property of the spec.  ``test_actions.py`` runs them as they are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from remora.errors import Unavailable
from remora.jobs import credentials as C
from remora.jobs.model import AttemptId, IntentId, NotEnabled, Outcome, Phase, Service
from remora.jobs.worker import Worker
from remora.sim.jobs.refinement import RefinementChecker
from remora.sim.jobs.simulation import SMALL, SPEC_PARTS, Parts, SimConfig, Simulation

ALL_ACTIONS = [
    "Enqueue",
    "Reserve",
    "AuthorizeAttempt",
    "ActivateAttempt",
    "RenewLease",
    "Tick",
    "ExpireLease",
    "ExpireReservation",
    "LoseCoordinationState",
    "DropLink",
    "RestoreLink",
    "CrashWorker",
    "StartIncarnation",
    "ReleaseReservation",
    "ReapLostAttempt",
    "ScheduleRetry",
    "RequestCancel",
    "FinalizeCancel",
    "PublishCancelNotice",
    "CooperativeStop",
    "ReleaseLease",
    "ClearStaleLiveProgress",
    "CleanTerminalCoordination",
    "AdvanceAttempt",
    "PersistCheckpoint",
    "InvalidateCheckpoint",
    "ReportProgress",
    "SendOutcome",
    "AcceptSuccess",
    "AcceptPermanentFailure",
    "AcceptRetryableFailureWithBudget",
    "AcceptRetryableFailureExhausted",
    "RejectOutcome",
    "CleanupStage",
    "PrepareCredentialIntent",
    "BeginCredentialWrite",
    "CompleteCredentialWrite",
    "RecordCredentialWrite",
    "FenceFailedCredentialWrite",
    "CommitCredentialVersion",
    "ClaimCredentialCleanup",
    "DestroyClaimedCredentialSecret",
    "AbandonFencedCredentialIntent",
]


#: Builds the stores of every ``Run`` (None: all in memory); the contract suite sets it.
BACKENDS: Callable[..., Any] | None = None


class Run:
    """A simulation with two jobs and two worker incarnations, every step checked."""

    def __init__(self, *, parts: Parts = SPEC_PARTS, **overrides: Any) -> None:
        """``parts``: what the runtime is built from (a planted bug's guards, …)."""
        self.sim = Simulation(
            SimConfig(jobs=("j1", "j2"), workers=("w1", "w2"), **overrides),
            backends=BACKENDS,
            parts=parts,
        )
        self.chk = RefinementChecker(self.sim)
        self.r = self.sim.reconciler

    def __call__(self, op: Callable[[], Any]) -> Any:
        return self.chk.step(op)

    def ok(self, op: Callable[[], Any]) -> Any:
        result = self.chk.step(op)
        assert not isinstance(result, Exception), result
        return result

    @property
    def w1(self) -> Worker:
        return self.sim.worker("w1")

    def running(self, job: str = "j1", w: str = "w1") -> AttemptId:
        """Start ``w``, submit and dispatch ``job``: an executing attempt."""
        wk = self.sim.worker(w)
        if not wk.up:
            self.ok(lambda: self.sim.start(w))
        self.ok(lambda: self.sim.submit(job))
        assert self.ok(lambda: self.r.enqueue(job))
        assert self.ok(lambda: wk.reserve(job))
        a: AttemptId = self.ok(lambda: wk.authorize(job))
        self.ok(lambda: wk.activate(a))
        return a

    def finish(self, a: AttemptId, w: str = "w1") -> str:
        wk = self.sim.worker(w)
        self.ok(lambda: wk.advance(a, 2, b"done"))
        self.ok(lambda: wk.send_outcome(a, Outcome.SUCCESS))
        return str(self.ok(lambda: wk.process_outcome(a)))

    def saw(self, *actions: str) -> None:
        missing = [x for x in actions if not self.chk.actions.get(x)]
        assert not missing, f"not taken: {missing} (taken: {sorted(self.chk.actions)})"

    def phase(self, job: str) -> Phase:
        return self.sim.stores.durable.job(job).phase


def test_success_path() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"half"))
    run.ok(lambda: run.w1.checkpoint(a))
    run.ok(lambda: run.w1.report_progress(a))
    assert run.finish(a) == "AcceptSuccess"
    run.ok(lambda: run.w1.release_lease(a))
    run.ok(lambda: run.r.reconcile_once())
    run.saw(
        "StartIncarnation",
        "Enqueue",
        "Reserve",
        "AuthorizeAttempt",
        "ActivateAttempt",
        "AdvanceAttempt",
        "PersistCheckpoint",
        "ReportProgress",
        "SendOutcome",
        "AcceptSuccess",
        "ReleaseLease",
        "CleanTerminalCoordination",
    )
    assert run.sim.stores.result("j1") == b"done"


def test_renew_tick_expire_lease_reap_and_retry() -> None:
    run = Run()
    a = run.running()
    assert not run(lambda: run.w1.renew(a))  # a fresh lease is not renewed (leaseAge = 0)
    run.ok(run.sim.tick)
    assert run.ok(lambda: run.w1.renew(a))
    run.ok(run.sim.tick)
    assert run.ok(lambda: run.r.expire_lease(a))
    assert run.ok(lambda: run.r.reap(a))
    assert run.phase("j1") is Phase.RETRY_WAIT
    assert run.ok(lambda: run.w1.cooperative_stop(a))  # the zombie notices
    assert run.ok(lambda: run.r.clear_stale_progress("j1"))
    assert run.ok(lambda: run.r.schedule_retry("j1"))
    run.saw(
        "Tick",
        "RenewLease",
        "ExpireLease",
        "ReapLostAttempt",
        "CooperativeStop",
        "ClearStaleLiveProgress",
        "ScheduleRetry",
    )


def test_expire_reservation_and_reap_of_an_authorized_attempt() -> None:
    run = Run()
    run.ok(lambda: run.sim.start("w1"))
    run.ok(lambda: run.sim.submit("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    run.ok(lambda: run.w1.reserve("j1"))
    a = run.ok(lambda: run.w1.authorize("j1"))
    run.ok(run.sim.tick)
    assert run.ok(lambda: run.r.expire_reservation("j1"))
    assert isinstance(run(lambda: run.w1.activate(a)), NotEnabled)  # reservation gone
    assert run.ok(lambda: run.r.reap(a))
    assert run.ok(lambda: run.w1.record_stop(a))  # revoked before activation: stopped
    run.saw("ExpireReservation", "ReapLostAttempt")


def test_wipe_then_rebuild() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.sim.submit("j2"))
    run.ok(lambda: run.r.enqueue("j2"))
    run.ok(run.sim.wipe)
    assert not run(lambda: run.w1.renew(a))
    run.ok(lambda: run.r.reconcile_once())  # re-enqueues j2 from the durable store
    assert "j2" in run.sim.stores.coordination.snapshot().queued
    assert run.ok(lambda: run.w1.cooperative_stop(a))  # lease gone = LeaseExpired
    run.saw("LoseCoordinationState", "CooperativeStop")


def test_links_drop_restore_and_crash() -> None:
    run = Run()
    run.ok(lambda: run.sim.start("w1"))
    run.ok(lambda: run.sim.submit("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    run.ok(lambda: run.sim.drop_link("w1", Service.COORDINATION))
    assert isinstance(run(lambda: run.w1.reserve("j1")), Unavailable)
    run.ok(lambda: run.sim.restore_link("w1", Service.COORDINATION))
    assert run.ok(lambda: run.w1.reserve("j1"))
    a = run.ok(lambda: run.w1.authorize("j1"))
    run.ok(lambda: run.sim.crash("w1"))  # a SIGKILL: nothing recorded yet
    run.ok(lambda: run.sim.start("w2"))
    run.ok(run.sim.tick)
    run.ok(lambda: run.r.expire_reservation("j1"))
    assert run.ok(lambda: run.r.reap(a))
    assert "CrashWorker" not in run.chk.actions
    cfg = run.sim.stores.config
    for _ in range(round(cfg.down_after_s * 1000 / cfg.tick_ms)):
        run.ok(run.sim.tick)
    assert run.ok(lambda: run.r.declare_down("w1"))  # its heartbeat expired: CrashWorker
    run.saw("DropLink", "RestoreLink", "CrashWorker", "StartIncarnation")


def test_cancel_running_job() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"x"))
    run.ok(lambda: run.sim.cancel("j1"))
    assert run.phase("j1") is Phase.CANCELLING
    assert not run(lambda: run.w1.report_progress(a))  # mirror: cancel marked
    assert run.ok(lambda: run.r.publish_cancel_notice("j1"))
    assert run.ok(lambda: run.w1.cooperative_stop(a))
    run.ok(lambda: run.w1.record_stop(a))
    assert run.ok(lambda: run.w1.release_lease(a))
    assert run.ok(lambda: run.r.finalize_cancel("j1"))
    assert run.ok(lambda: run.r.cleanup_stage(a))
    run.ok(lambda: run.r.reconcile_once())
    assert run.phase("j1") is Phase.CANCELLED
    run.saw(
        "RequestCancel",
        "PublishCancelNotice",
        "FinalizeCancel",
        "CleanupStage",
        "CleanTerminalCoordination",
    )


def test_release_reservation_of_a_cancelled_job() -> None:
    run = Run()
    run.ok(lambda: run.sim.start("w1"))
    run.ok(lambda: run.sim.submit("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    run.ok(lambda: run.w1.reserve("j1"))
    run.ok(lambda: run.sim.cancel("j1"))
    assert isinstance(run(lambda: run.w1.authorize("j1")), NotEnabled)
    assert run.ok(lambda: run.w1.release_reservation("j1"))
    run.saw("ReleaseReservation")


def test_reject_outcome_after_cancel() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 2, b"out"))
    run.ok(lambda: run.w1.send_outcome(a, Outcome.SUCCESS))
    run.ok(lambda: run.sim.cancel("j1"))
    assert run.ok(lambda: run.w1.process_outcome(a)) == "RejectOutcome"
    assert run.sim.stores.result("j1") is None
    run.saw("RejectOutcome")


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (Outcome.PERMANENT, "AcceptPermanentFailure"),
        (Outcome.RETRYABLE, "AcceptRetryableFailureWithBudget"),
    ],
)
def test_failures(outcome: Outcome, expected: str) -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"x"))
    run.ok(lambda: run.w1.send_outcome(a, outcome))
    assert run.ok(lambda: run.w1.process_outcome(a)) == expected
    run.ok(lambda: run.w1.release_lease(a))
    assert run.ok(lambda: run.r.cleanup_stage(a))  # a failed attempt's staging goes
    run.saw(expected, "CleanupStage")


def test_retry_resumes_from_checkpoint_then_exhausts() -> None:
    run = Run()
    a1 = run.running()
    run.ok(lambda: run.w1.advance(a1, 1, b"half"))
    run.ok(lambda: run.w1.checkpoint(a1))
    run.ok(lambda: run.w1.send_outcome(a1, Outcome.RETRYABLE))
    run.ok(lambda: run.w1.process_outcome(a1))
    run.ok(lambda: run.w1.release_lease(a1))
    run.ok(lambda: run.r.schedule_retry("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    run.ok(lambda: run.w1.reserve("j1"))
    a2 = run.ok(lambda: run.w1.authorize("j1"))
    assert a2.token == 2
    assert run.w1.attempts[a2].progress == 1  # resumed from the checkpoint
    run.ok(lambda: run.w1.activate(a2))
    assert run.sim.stores.staged_data(a2, 1) == b"half"
    run.ok(lambda: run.w1.send_outcome(a2, Outcome.RETRYABLE))
    assert run.ok(lambda: run.w1.process_outcome(a2)) == "AcceptRetryableFailureExhausted"
    assert run.phase("j1") is Phase.FAILED
    run.saw("AcceptRetryableFailureExhausted")


def test_invalidate_checkpoint_of_a_zombie_owner() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"x"))
    run.ok(lambda: run.w1.checkpoint(a))
    run.ok(run.sim.tick)
    run.ok(lambda: run.r.expire_lease(a))
    run.ok(lambda: run.r.reap(a))
    run.ok(lambda: run.r.schedule_retry("j1"))
    # The owner still executes (a zombie): the checkpoint cannot be resumed.
    run.ok(lambda: run.r.reconcile_once())
    assert not run.sim.stores.durable.job("j1").checkpoint_valid
    run.saw("InvalidateCheckpoint")


def test_credential_write_and_cleanup() -> None:
    run = Run(
        jobs_config=SimConfig().jobs_config.__class__(
            max_attempts=2,
            max_progress=2,
            lease_ticks=1,
            reservation_ticks=1,
            global_limit=2,
            max_credential_intents=3,
        )
    )
    a = run.running()
    st, act = run.sim.stores, run.w1.actor
    c1 = run.ok(lambda: run.w1.put_secret(a, b"s1"))
    assert st.vault.read(c1) == b"s1"
    c2: IntentId = run.ok(lambda: C.prepare_credential(st, act, a))
    run.ok(lambda: C.begin_credential_write(st, act, c2))
    run.ok(lambda: C.complete_credential_write(st, act, c2, b"s2"))
    c3: IntentId = run.ok(lambda: C.prepare_credential(st, act, a))
    run.ok(lambda: C.begin_credential_write(st, act, c3))
    run.ok(lambda: run.sim.cancel("j1"))
    run.ok(lambda: run.r.finalize_cancel("j1"))
    run.ok(lambda: run.r.reconcile_once())
    assert st.vault.read(c2) is None
    run.saw(
        "PrepareCredentialIntent",
        "BeginCredentialWrite",
        "CompleteCredentialWrite",
        "RecordCredentialWrite",
        "CommitCredentialVersion",
        "ClaimCredentialCleanup",
        "DestroyClaimedCredentialSecret",
        "FenceFailedCredentialWrite",
        "AbandonFencedCredentialIntent",
    )


def test_every_spec_action_is_covered() -> None:
    """The tests above take every action of ``Next`` (but ``Done``)."""
    from remora.protocol.spec import CREDENTIAL_ACTIONS
    from remora.protocol.trace import ACTION_PARAMS

    assert set(ALL_ACTIONS) == set(ACTION_PARAMS) - {"Done"}
    assert set(CREDENTIAL_ACTIONS) <= set(ALL_ACTIONS)


def test_reconciler_releases_the_lease_of_a_shut_down_worker() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.sim.shutdown("w1"))
    assert run.ok(lambda: run.r.release_lease(a))
    assert run.ok(lambda: run.r.reap(a))  # at once: no need to wait for the lease to expire
    run.saw("ReleaseLease", "ReapLostAttempt")


def test_one_reconcile_pass_takes_a_lost_attempt_back_to_the_queue() -> None:
    """A crashed worker's job is expired, reaped, scheduled for retry and enqueued in one
    reconcile pass (benchmarks/jobs_peers.py: recovery within a lease plus one interval);
    taking one step per pass added two reconcile intervals to recovery."""
    run = Run()
    run.running()
    run.ok(lambda: run.sim.crash("w1"))
    for _ in range(run.sim.stores.config.lease_ticks + 1):
        run.ok(run.sim.tick)
    run.ok(lambda: run.r.reconcile_once())
    run.saw("ExpireLease", "ReapLostAttempt", "ScheduleRetry", "Enqueue")
    assert run.phase("j1") is Phase.QUEUED
    assert "j1" in run.sim.stores.coordination.snapshot(run.r.actor).queued


# -- the production loop's cheaper paths (docs/jobs.md, "Performance beside peers") ----------


def test_submit_enqueues() -> None:
    """Enqueue at submit: the submitter takes ``Enqueue`` right after the job commits, so a
    worker can reserve it without waiting for a reconcile pass."""
    run = Run()
    run.ok(lambda: run.sim.start("w1"))
    client = run.sim.client
    run.ok(lambda: run.sim.stores.submit(client, "j1", "noop", None, enqueue=True))
    run.saw("Enqueue")
    assert run.ok(lambda: run.w1.reserve("j1"))  # no reconcile pass in between


def _two_queued(concurrency: int, global_limit: int) -> Run:
    """w1 up with ``concurrency`` slots, j1 and j2 submitted and queued."""
    run = Run(concurrency=concurrency, jobs_config=attrs.evolve(SMALL, global_limit=global_limit))
    run.ok(lambda: run.sim.start("w1"))
    for job in ("j1", "j2"):
        run.ok(lambda job=job: run.sim.submit(job))
        assert run.ok(lambda job=job: run.r.enqueue(job))
    return run


def test_reserve_batch_reserves_in_order_each_its_own_step() -> None:
    """One coordination call reserves several jobs, in the order given, each its own
    ``Reserve`` step (refinement-checked in order); a job given twice, or not queued, is
    skipped; the ids are real: the batch authorizes and activates with them."""
    run = _two_queued(concurrency=2, global_limit=2)
    got = run.ok(lambda: run.w1.reserve_batch(["j2", "j2", "j1"], 2))
    assert got == ["j2", "j1"]
    assert run.chk.actions.get("Reserve") == 2
    assert set(run.w1.reservations) == {"j1", "j2"}
    attempts = run.ok(lambda: run.w1.authorize_batch(["j1", "j2"]))
    for a in attempts:
        assert isinstance(a, AttemptId), a
        run.ok(lambda a=a: run.w1.activate(a))
    assert run.ok(lambda: run.w1.reserve_batch(["j1", "j2"], 2)) == []  # none queued now


def test_reserve_batch_stops_at_the_global_limit() -> None:
    """Each job's guard is evaluated on the state the earlier reservations left: with one
    in flight allowed, the second job of the batch stays queued, as one ``Reserve`` call per
    job would leave it."""
    run = _two_queued(concurrency=2, global_limit=1)
    assert run.ok(lambda: run.w1.reserve_batch(["j2", "j1"], 2)) == ["j2"]
    assert run.chk.actions.get("Reserve") == 1


def test_reserve_batch_stops_at_the_workers_own_limit() -> None:
    """The worker's own limit (``CapacityAvailable``) counts the batch's earlier
    reservations."""
    run = _two_queued(concurrency=1, global_limit=2)
    assert run.ok(lambda: run.w1.reserve_batch(["j1", "j2"], 2)) == ["j1"]


def test_reserve_batch_stops_at_the_calls_limit() -> None:
    """At most ``limit`` jobs are reserved; the rest stay queued for the next call."""
    run = _two_queued(concurrency=2, global_limit=2)
    assert run.ok(lambda: run.w1.reserve_batch(["j2", "j1"], 1)) == ["j2"]
    assert run.chk.actions.get("Reserve") == 1
    assert run.ok(lambda: run.w1.reserve_batch(["j2", "j1"], 1)) == ["j1"]


def test_incremental_pass_takes_a_lost_attempt_back_to_the_queue() -> None:
    """The worker loop's incremental pass recovers a crashed worker's job in one pass, like
    the full one (recovery within a lease plus one reconcile interval)."""
    run = Run()
    run.ok(lambda: run.r.reconcile_once(full=False))
    run.running()
    run.ok(lambda: run.sim.crash("w1"))
    for _ in range(run.sim.stores.config.lease_ticks + 1):
        run.ok(run.sim.tick)
    run.ok(lambda: run.r.reconcile_once(full=False))
    run.saw("ExpireLease", "ReapLostAttempt", "ScheduleRetry", "Enqueue")
    assert run.phase("j1") is Phase.QUEUED
    assert "j1" in run.sim.stores.coordination.snapshot(run.r.actor).queued


def test_incremental_pass_rebuilds_after_a_wipe() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.sim.submit("j2"))
    run.ok(lambda: run.r.enqueue("j2"))
    run.ok(lambda: run.r.reconcile_once(full=False))
    run.ok(run.sim.wipe)
    run.ok(lambda: run.r.reconcile_once(full=False))  # re-enqueues j2 from the durable store
    assert "j2" in run.sim.stores.coordination.snapshot().queued
    assert run.ok(lambda: run.w1.cooperative_stop(a))  # lease gone = LeaseExpired
    run.saw("LoseCoordinationState", "CooperativeStop")


def test_incremental_pass_cleans_a_job_that_finished_between_passes() -> None:
    """A job submitted and finished between two incremental passes was never seen in flight:
    the pass still reads it (it is newer than anything seen) and cleans its coordination."""
    run = Run()
    run.ok(lambda: run.sim.submit("j2"))
    run.ok(lambda: run.r.reconcile_once(full=False))
    a = run.running()
    assert run.finish(a) == "AcceptSuccess"
    run.ok(lambda: run.w1.release_lease(a))
    assert "j1" in run.sim.stores.coordination.snapshot().progress
    run.ok(lambda: run.r.reconcile_once(full=False))
    run.saw("CleanTerminalCoordination")
    assert "j1" not in run.sim.stores.coordination.snapshot().progress


def test_narrow_reads_agree_with_the_snapshot() -> None:
    """``Coordination.view`` and ``active`` are the snapshot restricted (one job; no dead
    leases and no mirror), ``candidates`` a subset of the queue — on every store."""
    from remora.jobs.coordination import active_part, narrow

    run = Run()
    a = run.running()  # j1: live lease, progress
    run.ok(lambda: run.sim.submit("j2"))
    run.ok(lambda: run.r.enqueue("j2"))
    coord = run.sim.stores.coordination
    actor = run.r.actor
    both = (a, AttemptId("j1", 7), AttemptId("j2", 1))
    for j in ("j1", "j2"):
        assert coord.view(actor, j, both) == narrow(coord.snapshot(), j, both)
    assert coord.active(actor) == active_part(coord.snapshot())
    assert a in coord.active(actor).leases
    assert coord.candidates(actor, 8) == ["j2"]
    run.ok(lambda: run.sim.cancel("j1"))  # the mirror's cancel mark
    run.ok(lambda: run.r.publish_cancel_notice("j1"))
    assert coord.view(actor, "j1", both) == narrow(coord.snapshot(), "j1", both)
    assert coord.view(actor, "j1").cancels == frozenset({"j1"})
    run.ok(run.sim.tick)
    assert run.ok(lambda: run.w1.cooperative_stop(a))
    assert run.ok(lambda: run.w1.release_lease(a))  # a dead lease: not in the active read
    assert a in coord.snapshot().leases
    assert coord.active(actor) == active_part(coord.snapshot())
    assert a not in coord.active(actor).leases
    assert coord.view(actor, "j1", both) == narrow(coord.snapshot(), "j1", both)


def test_an_enqueue_wakes_an_idle_worker() -> None:
    """``Coordination.await_work``: an idle worker's pause is cut short by the next
    ``Enqueue`` (Redis: a blocking pop of the wake-up the script pushes) — not by anything
    else.  (Half a second, under one tick: the memory store's wait is on the logical clock.)"""
    run = Run()
    coord = run.sim.stores.coordination
    actor = run.r.actor
    assert not coord.await_work(actor, 0.05)  # nothing enqueued: the whole pause passes
    run.ok(lambda: run.sim.submit("j1"))
    assert run.ok(lambda: run.r.enqueue("j1"))
    assert coord.await_work(actor, 0.5)
    assert not coord.await_work(actor, 0.05)  # one wake-up per Enqueue
