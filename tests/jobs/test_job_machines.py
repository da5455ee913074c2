"""The job-runtime state machines: refinement at every step, the fair drain to quiescence,
and (under a full-budget profile) the reach the issue asks for; plus the finding the machine
made and the runtime's own credential cleanup, each with the planted bug it catches."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.faults import Outcome as IOOutcome
from remora.jobs.guards import Guards
from remora.jobs.io import JobOperation
from remora.jobs.model import AttemptId, Outcome, Service
from remora.protocol.trace import ACTION_PARAMS
from remora.sim.jobs.run import JobRun, JobRunFailure
from remora.sim.jobs.trace import JobConfig, JobFault, JobStep
from remora.testing.job_machines import (
    DURABLE_STEPS,
    FAULT_CHOICES,
    KINDS,
    RACES,
    STEP_CALLS,
    JobMachineBase,
    JobRuntimeMachine,
    reach_of,
)
from remora.testing.profiles import full_budget
from tests.jobs.job_machines import (
    JOB_MACHINES,
    CrossedLoopJobs,
    EmbeddedJobs,
    RaceJobs,
    SpecSizedJobs,
    budget_of,
)
from tests.jobs.schedules import dispatched

ACTIONS = frozenset(ACTION_PARAMS) - {"Done"}
"""Every action of the spec's ``Next`` (job and credential actions)."""
FAULTS = frozenset((op.value, o.value) for op, o in FAULT_CHOICES)
"""Every fault a selector can name, fired at least once: abort on every operation, and a
lost reply (after committing or not) on every write — durable, coordination, target,
vault."""
LOST_COMMITS = frozenset(
    (step, "durable-write", o)
    for step in DURABLE_STEPS
    for o in ("unknown-committed", "unknown-aborted")
)
"""A lost durable COMMIT reply, both ways, in every step kind that writes durably."""
ENVIRONMENT = frozenset({"crash", "start", "shutdown", "wipe", "cancel", "put-secret"})
"""Environment and client steps that must succeed at least once."""
LINKS = frozenset(
    (op, w, s.value)
    for op in ("drop-link", "restore-link")
    for w in SpecSizedJobs.workers
    for s in Service
)
"""A link dropped and restored, per service, at each of two incarnations (one cut while the
other keeps its links).  Which incarnation names they are changes no code path: the third
worker of the larger machines is started last and seldom cut under the ``ci`` budget."""
SENT = frozenset(o.value for o in Outcome)
ACCEPTED = {
    "success": "AcceptSuccess",
    "retryable": "AcceptRetryableFailureWithBudget",
    "retryable, budget exhausted": "AcceptRetryableFailureExhausted",
    "permanent": "AcceptPermanentFailure",
    "cancel": "FinalizeCancel",
}
"""Every outcome a job can end an attempt with, accepted (the spec action that does)."""
LOOP_RESULTS = frozenset(
    {
        ("turn", "nothing"),  # it dispatched: the next turn at once
        ("turn", "work"),  # a free slot, nothing to take
        ("turn", "handler"),  # every slot busy
        ("turn", "ended"),  # declared down or shut down: the loop ended and closed
        ("handler", "paused"),
        ("handler", "settled"),
        ("reconcile", "pass"),
    }
)
"""What the loops' steps did (:class:`~remora.sim.jobs.loops.LoopOutcome`)."""
LOOP_ACTIONS = frozenset(
    {("loop-turn", a) for a in ("Reserve", "AuthorizeAttempt", "ActivateAttempt", "RenewLease")}
    | {
        ("loop-handler", a)
        for a in (
            "AdvanceAttempt",
            "PersistCheckpoint",
            "ReportProgress",
            "SendOutcome",
            "AcceptSuccess",
            "AcceptRetryableFailureWithBudget",
            "AcceptPermanentFailure",
            "ReleaseLease",
        )
    }
    | {
        ("loop-reconcile", a)
        for a in ("Enqueue", "ReapLostAttempt", "ScheduleRetry", "CleanupStage")
    }
)
"""The spec actions the production loop takes by itself: the dispatch and the tending in
its turns, the handler's calls and the settlement of every outcome in its handlers'
stretches, the reconciler's duties on its schedule."""
LOOP_OPS = ("loop-turn", "loop-handler", "loop-reconcile")
RESERVED = frozenset(
    {
        ("live", "hold", "held"),
        ("live", "authorize", "ok"),
        ("live", "release", "refused"),  # the worker's own release of a live job
        ("live", "reconciler-release", "refused"),
        ("cancelled", "hold", "held"),
        ("cancelled", "authorize", "refused"),  # a cancelling job is not authorized
        ("cancelled", "release", "ok"),
        ("cancelled", "reconciler-release", "ok"),
        ("cancelled", "release-by-another", "refused"),  # not its reservation
    }
)
"""What a fresh reservation's next step must have met
(:class:`~remora.testing.job_machines.JobReservationMachine`): each next step, its job
cancelled first or not, refused or taken as the spec says."""
LOOP_TENDS = frozenset({"notice", "lost"})
"""What a turn's tend must have met (:meth:`~remora.sim.jobs.loops.SimLoops._tend_state`):
a cancel notice of its job, its lease gone or dead."""
LOOP_PROMISES = frozenset({"activation-due", "outage-end", "stop-end"})
"""The hard cases of the loop's promises a turn must have met
(:attr:`~remora.sim.jobs.loops.SimLoops.promise_reach`): an activation refused earlier and
due again, taken; a loop ended by a store away past its outage budget; a loop asked to stop,
ended."""

LOOP_PROCESSES = frozenset({"settled", "died", "abandoned"})
"""What the process-isolated loops' attempts must have met
(:attr:`~remora.sim.jobs.loops.SimLoops.process_reach`): settled through a child, their
child dead on its own, abandoned by their loop (its child killed)."""


LOOP_TIMEOUTS = frozenset(
    {
        "ended by its loop",
        "settled by its handler",
        "by its handler's, its job's larger",
        "its end left for a later turn",
    }
)
"""How the loops' attempts that overran their timeout must have ended
(:attr:`~remora.sim.jobs.loops.SimLoops.timeout_reach`): as a retryable failure sent by a
turn of their loop (the handler kept running past the grace), and by their settlement (the
handler stopped when asked, or returned); one must have overrun its handler's own
timeout while its job's was larger (the smaller of the two applies); and the loop's end of
one must have met a store away and been left for a later turn."""


LOOP_GIVE_UPS = frozenset({"stopped once its lease was lost"})
"""How an attempt whose handler gave up on its own (``Cancelled`` unasked) must have ended
(:attr:`~remora.sim.jobs.loops.SimLoops.give_up_reach`): its loop stopped it once its
lease, no longer renewed, was lost."""


def missing_reach(*machines: type[JobMachineBase]) -> dict[str, set[object]]:
    """What the runs of ``machines`` together did not reach."""

    def seen(kind: str) -> set[tuple[str, ...]]:
        return set().union(*(reach_of(m, kind) for m in machines))

    actions = {r[0] for r in seen("action")}
    gaps: dict[str, set[object]] = {
        "actions": set(ACTIONS - actions),
        "faults": set(FAULTS - seen("fault")),
        "lost commits": set(LOST_COMMITS - seen("fault-in")),
        "environment": set(ENVIRONMENT - {r[0] for r in seen("op") if r[1] == "ok"}),
        "links": set(LINKS - seen("link")),
        "outcomes sent": set(SENT - {r[0] for r in seen("sent")}),
        "outcomes accepted": {o for o, action in ACCEPTED.items() if action not in actions},
        "races": set(RACES) - {r[0] for r in seen("race")},
        # delayed, queued and prioritized jobs (the kinds the general machines submit)
        "job kinds": set(KINDS) - {r[0] for r in seen("kinds")},
        "drain": {"quiescent", "a killed incarnation declared down"}
        - {r[0] for r in seen("drain")},
        # the production loops: what their steps did, the spec actions they took, a fault
        # fired inside each kind of loop step
        "loop": set(LOOP_RESULTS - seen("loop")),
        "reservations followed": set(RESERVED - seen("reserved")),
        "loop actions": set(LOOP_ACTIONS - seen("loop-action")),
        "loop faults": set(LOOP_OPS) - {r[0] for r in seen("fault-in")},
        # a turn tended an attempt whose job was cancelled, and one whose lease was lost
        "loop tends": set(LOOP_TENDS - {r[0] for r in seen("loop-tend")}),
        "loop promises": set(LOOP_PROMISES - {r[0] for r in seen("loop-promise")}),
        "loop processes": set(LOOP_PROCESSES - {r[0] for r in seen("loop-process")}),
        "loop timeouts": set(LOOP_TIMEOUTS - {r[0] for r in seen("loop-timeout")}),
        "loop give-ups": set(LOOP_GIVE_UPS - {r[0] for r in seen("loop-give-up")}),
        # the fault tables must name every call a step kind was seen to make
        "calls outside STEP_CALLS": {
            r for r in seen("calls") if r[1] not in {o.value for o in STEP_CALLS.get(r[0], ())}
        },
    }
    return {k: v for k, v in gaps.items() if v}


def test_job_machines() -> None:
    """Every machine (one test, so that their reach is judged together: the spec-sized
    one is too small to renew or checkpoint often, the larger one covers that, the race
    machine composes the races and sweeps the lost replies)."""
    for machine in JOB_MACHINES:
        machine.reach.clear()
        run_state_machine_as_test(machine, settings=budget_of(machine))
    if full_budget():
        assert missing_reach(*JOB_MACHINES) == {}


def test_crossed_reconcile_passes() -> None:
    """The crossing machine (:class:`~tests.jobs.job_machines.CrossedLoopJobs`): reconcile
    passes crossed by another loop's pass hold every property, and crossings happen."""
    CrossedLoopJobs.reach.clear()
    run_state_machine_as_test(CrossedLoopJobs, settings=budget_of(CrossedLoopJobs))
    assert ("reconcile", "crossed") in reach_of(CrossedLoopJobs, "loop")


def test_the_embedded_mode() -> None:
    """The embedded machine (:class:`~tests.jobs.job_machines.EmbeddedJobs`): every
    property holds when each incarnation's coordination is private and only its durable
    refresh fences its lease steps."""
    run_state_machine_as_test(EmbeddedJobs, settings=budget_of(EmbeddedJobs))


def test_missing_reach_names_what_a_run_did_not_do() -> None:
    """The reach check is not vacuous: a machine that never ran misses everything."""

    class Never(JobRuntimeMachine):
        pass

    gaps = missing_reach(Never)
    assert gaps["actions"] == set(ACTIONS)
    assert gaps["drain"] == {"quiescent", "a killed incarnation declared down"}
    assert gaps["lost commits"] == set(LOST_COMMITS) and gaps["races"] == set(RACES)
    assert gaps["job kinds"] == set(KINDS)
    assert gaps["loop"] == set(LOOP_RESULTS) and gaps["loop actions"] == set(LOOP_ACTIONS)
    assert gaps["loop faults"] == set(LOOP_OPS)
    assert gaps["loop tends"] == set(LOOP_TENDS)
    assert ("reap", "durable-write", "unknown-aborted") in LOST_COMMITS
    assert {"DestroyClaimedCredentialSecret", "AcceptRetryableFailureExhausted"} <= ACTIONS


def test_a_removed_rule_is_a_reach_gap() -> None:
    """Planted gap: the race machine without its partition race (its one rule that cuts
    links) misses every link and every partition race under the same small budget with
    which the whole machine reaches some — the reach check sees a rule go."""
    budget = settings(
        max_examples=25,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )

    class Whole(RaceJobs):
        pass

    class Gapped(RaceJobs):
        race_partition = None  # the rule removed

    for machine in (Whole, Gapped):
        run_state_machine_as_test(machine, settings=budget)
    whole, gapped = missing_reach(Whole), missing_reach(Gapped)
    assert gapped["links"] == set(LINKS)
    assert {f"partition-{s.value}" for s in Service} <= gapped["races"]
    assert whole.get("links", set()) != set(LINKS)
    assert not {f"partition-{s.value}" for s in Service} <= whole.get("races", set())


def test_a_call_outside_the_fault_table_is_a_gap() -> None:
    """Planted: a step kind seen making a call STEP_CALLS does not list is reported (the
    table that fault selectors are drawn from would be stale)."""

    class Stale(JobRuntimeMachine):
        pass

    Stale.reach.add(("calls", "renew", "vault-write"))
    assert missing_reach(Stale)["calls outside STEP_CALLS"] == {("renew", "vault-write")}


# -- the finding: a retry activating beside the failed attempt's live lease ---------------


def _retry_beside_live_lease() -> JobRun:
    """A retryable failure is accepted while the attempt's lease is still live; the retry
    is reserved, authorized and activated by another worker before that lease goes."""
    run = JobRun(JobConfig(jobs=("j1",), workers=("w1", "w2")), {"j1": (Outcome.SUCCESS,)})
    s = JobStep
    for step in [
        s("start", worker="w1"),
        s("start", worker="w2"),
        *dispatched("w1"),
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
    monkeypatch.setattr(Guards, "other_live_lease", lambda self, c, a: False)
    with pytest.raises(JobRunFailure, match="AtMostOneLiveLeasePerJob"):
        _retry_beside_live_lease()


# -- credential cleanup is the runtime's job -----------------------------------------------


def _abandoned_credential(mutation: str | None) -> JobRun:
    """A worker writes a credential; the commit's reply is lost, then the worker crashes:
    the intent is left Written with a live secret.  Only the reconciler can finish it."""
    config = JobConfig(jobs=("j1",), workers=("w1",), mutation=mutation)
    run = JobRun(config, {"j1": (Outcome.SUCCESS,)})
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


# -- a killed incarnation is declared down, then its staging is cleaned --------------------


def _crash_mid_stage(first: Outcome = Outcome.SUCCESS) -> JobRun:
    """w1 stages part of its output and crashes (SIGKILL: no clean exit is recorded), or —
    with ``first`` a failure — w1's attempt fails and a retry wins.  Drained."""
    run = JobRun(JobConfig(jobs=("j1",), workers=("w1",)), {"j1": (first, Outcome.SUCCESS)})
    s = JobStep
    steps = [
        s("start", worker="w1"),
        s("submit", job="j1"),
        s("enqueue", job="j1"),
        s("reserve", worker="w1", job="j1"),
        s("authorize", worker="w1", job="j1"),
        s("activate", worker="w1", job="j1", token=1),
        s("advance", worker="w1", job="j1", token=1, amount=1),
    ]
    if first is Outcome.SUCCESS:
        steps.append(s("crash", worker="w1"))
    else:
        steps += [
            s("send-outcome", worker="w1", job="j1", token=1, outcome=first),
            s("process-outcome", worker="w1", job="j1", token=1),
        ]
    for step in steps:
        run.execute(step)
    run.drain()
    return run


def test_a_killed_incarnations_staging_is_cleaned_once_it_is_declared_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run the judgement used to exempt (w1 stages part of its output and is
    SIGKILLed: no clean exit recorded) now drains to quiescence: the kill is a stutter,
    the reconciler declares w1 down once its heartbeat expired (``CrashWorker``), and
    ``CleanupStage`` removes the staging."""
    run = _crash_mid_stage()
    run.judge()
    assert run.chk.actions.get("CrashWorker") == 1
    assert run.chk.actions.get("CleanupStage") == 1
    assert run.sim.stores.target.snapshot()[AttemptId("j1", 1)].cleaned
    # Narrow: a failed attempt's staging (its worker alive) left uncleaned still fails.
    with monkeypatch.context() as m:
        m.setattr(Guards, "cleanup_eligible", lambda *a, **kw: False)
        failed = _crash_mid_stage(Outcome.RETRYABLE)
        with pytest.raises(JobRunFailure, match="staging of j1#1 is not cleaned"):
            failed.judge()
    # Planted: an incarnation never declared down (the heartbeat judged always fresh):
    # the killed incarnation's staging stays, and the judgement fails on it.
    with monkeypatch.context() as m:
        real = Guards.declare_down
        m.setattr(
            Guards,
            "declare_down",
            lambda self, w, by, **kw: real(self, w, by, **{**kw, "seen": kw["now"]}),
        )
        with pytest.raises(JobRunFailure, match="staging of j1#1 is not cleaned"):
            _crash_mid_stage().judge()
