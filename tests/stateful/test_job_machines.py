"""The job-runtime state machines: refinement at every step, the fair drain to quiescence,
and (under a full-budget profile) the reach the issue asks for; plus the finding the machine
made and the runtime's own credential cleanup, each with the planted bug it catches."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from remora.faults import Outcome as IOOutcome
from remora.jobs import guards
from remora.jobs.io import JobOperation
from remora.jobs.model import Outcome
from remora.testing.job_machines import JobRuntimeMachine, reach_of
from remora.testing.job_mutations import applied
from remora.testing.job_run import JobRun, JobRunFailure
from remora.testing.job_trace import JobConfig, JobFault, JobStep
from remora.testing.profiles import full_budget
from tests.stateful.job_machines import JOB_MACHINES

ACTIONS = {
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
    "ReapLostAttempt",
    "ScheduleRetry",
    "RequestCancel",
    "FinalizeCancel",
    "PublishCancelNotice",
    "CooperativeStop",
    "ReleaseLease",
    "CleanTerminalCoordination",
    "AdvanceAttempt",
    "PersistCheckpoint",
    "ReportProgress",
    "SendOutcome",
    "AcceptSuccess",
    "AcceptPermanentFailure",
    "AcceptRetryableFailureWithBudget",
    "RejectOutcome",
    "CleanupStage",
    "PrepareCredentialIntent",
    "BeginCredentialWrite",
    "CommitCredentialVersion",
}
FAULTS = {
    ("durable-write", "abort"),
    ("durable-write", "unknown-committed"),
    ("durable-write", "unknown-aborted"),
    ("coord-write", "unknown-committed"),
    ("durable-read", "abort"),
}
OPS = {"crash", "start", "drop-link", "restore-link", "wipe", "cancel", "put-secret"}
SENT = {o.value for o in Outcome}


def missing_reach(*machines: type[JobRuntimeMachine]) -> dict[str, set[object]]:
    """What the runs of ``machines`` together did not reach."""

    def seen(kind: str) -> set[tuple[str, ...]]:
        return set().union(*(reach_of(m, kind) for m in machines))

    gaps = {
        "actions": ACTIONS - {r[0] for r in seen("action")},
        "faults": FAULTS - seen("fault"),
        "ops": OPS - {r[0] for r in seen("op") if r[1] == "ok"},
        "outcomes sent": SENT - {r[0] for r in seen("sent")},
        "drain": {"quiescent"} - {r[0] for r in seen("drain")},
    }
    return {k: v for k, v in gaps.items() if v}


def test_job_machines() -> None:
    """Both machines (one test, so that their reach is judged together: the spec-sized
    one is too small to renew or checkpoint often, the larger one covers that)."""
    for machine in JOB_MACHINES:
        machine.reach.clear()
        run_state_machine_as_test(machine)
    if full_budget():
        assert missing_reach(*JOB_MACHINES) == {}


def test_missing_reach_names_what_a_run_did_not_do() -> None:
    """The reach check is not vacuous: a machine that never ran misses everything."""

    class Never(JobRuntimeMachine):
        pass

    gaps = missing_reach(Never)
    assert gaps["actions"] == ACTIONS and gaps["drain"] == {"quiescent"}


# -- the finding: a retry activating beside the failed attempt's live lease ---------------


def _retry_beside_live_lease() -> JobRun:
    """A retryable failure is accepted while the attempt's lease is still live; the retry
    is reserved, authorized and activated by another worker before that lease goes."""
    run = JobRun(JobConfig(jobs=("j1",), workers=("w1", "w2")), {"j1": (Outcome.SUCCESS,)})
    s = JobStep
    for step in [
        s("start", worker="w1"),
        s("start", worker="w2"),
        s("submit", job="j1"),
        s("enqueue", job="j1"),
        s("reserve", worker="w1", job="j1"),
        s("authorize", worker="w1", job="j1"),
        s("activate", worker="w1", job="j1", token=1),
        s("send-outcome", worker="w1", job="j1", token=1, outcome=Outcome.RETRYABLE),
        s("reconciler-process-outcome", job="j1", token=1),
        s("schedule-retry", job="j1"),
        s("enqueue", job="j1"),
        s("reserve", worker="w2", job="j1"),
        s("authorize", worker="w2", job="j1"),
        s("activate", worker="w2", job="j1", token=2),
    ]:
        run.execute(step)
    return run


def test_retry_waits_for_the_failed_attempts_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's ActivateAttempt lets the retry take a second live lease of the job
    (AtMostOneLiveLeasePerJob fails on the spec when GlobalLimit > 1); the runtime refuses
    the activation until the old lease is released or expires, then drains."""
    run = _retry_beside_live_lease()
    assert run.results[-1] == ("activate", "refused")
    run.drain()
    run.judge()
    # Planted: without the runtime's stronger guard the spec's own invariant breaks.
    monkeypatch.setattr(guards, "other_live_lease", lambda c, a: False)
    with pytest.raises(JobRunFailure, match="AtMostOneLiveLeasePerJob"):
        _retry_beside_live_lease()


# -- credential cleanup is the runtime's job -----------------------------------------------


def _abandoned_credential(mutation: str | None) -> JobRun:
    """A worker writes a credential; the commit's reply is lost, then the worker crashes:
    the intent is left Written with a live secret.  Only the reconciler can finish it."""
    with applied(mutation):
        run = JobRun(JobConfig(jobs=("j1",), workers=("w1",)), {"j1": (Outcome.SUCCESS,)})
        s = JobStep
        lost = (JobFault(JobOperation.DURABLE_WRITE, 4, IOOutcome.UNKNOWN_ABORTED),)
        for step in [
            s("start", worker="w1"),
            s("submit", job="j1"),
            s("enqueue", job="j1"),
            s("reserve", worker="w1", job="j1"),
            s("authorize", worker="w1", job="j1"),
            s("activate", worker="w1", job="j1", token=1),
            s("put-secret", worker="w1", job="j1", token=1, faults=lost),
            s("crash", worker="w1"),
        ]:
            run.execute(step)
        problems = run.quiescence()
        assert any("credential j1/1" in p for p in problems), problems
        run.drain()
        run.judge()
        return run


def test_the_reconciler_destroys_abandoned_secrets() -> None:
    run = _abandoned_credential(None)
    assert run.chk.actions.get("DestroyClaimedCredentialSecret") == 1
    with pytest.raises(JobRunFailure, match="credential j1/1"):
        _abandoned_credential("skip-credential-cleanup")
