"""The production worker loop in the simulation (``remora/sim/jobs/loops.py``), step by
step: a job retried and then succeeding runs through ``WorkerLoop.turn()``, the handler's
stretches and the settlement, and the reconciler's schedule alone — no single worker step
— and the schedule replays to the same result (the lockstep threads are deterministic)."""

from __future__ import annotations

from typing import Any

import pytest

from remora.faults import Outcome as IOOutcome
from remora.jobs.io import JobOperation
from remora.jobs.loop import Wait
from remora.jobs.model import AttemptId, Outcome, Service
from remora.sim.jobs.loops import LoopParts
from remora.sim.jobs.run import JobRun, JobRunFailure, run_trace
from remora.sim.jobs.trace import JobConfig, JobFault, JobKind, JobStep, JobTrace, new_trace
from tests.jobs.loop_planted import PLANTED as LOOP_PLANTED
from tests.jobs.schedules import crossed_clean


def _drained(run: JobRun) -> tuple[JobTrace, dict[Any, int]]:
    """Drain and judge ``run`` (as a replay does): its schedule as a trace, and the spec
    actions it took."""
    run.drain()
    run.judge()
    trace = new_trace(run.config, run.handlers, tuple(run.steps), "test", run.kinds)
    return trace, dict(run.chk.actions)


def _replays(trace: JobTrace, actions: dict[Any, int]) -> None:
    """The schedule replays to the same result: no failure, the same spec actions."""
    replayed = run_trace(trace)
    assert replayed.failure is None and replayed.actions == actions


def _through_the_loop() -> JobRun:
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1",), concurrency=1),
        {"j1": (Outcome.RETRYABLE, Outcome.SUCCESS)},
    )
    s = JobStep
    for step in [s("start", worker="w1"), s("submit", job="j1")]:
        run.execute(step)
    for _ in range(12):
        run.execute(s("loop-reconcile", worker="w1"))
        run.execute(s("loop-turn", worker="w1"))
        for w, a in run.loops.running():
            run.execute(s("loop-handler", worker=w, job=a.job, token=a.token))
        run.execute(s("tick"))
    return run


def test_a_job_runs_through_the_production_loop() -> None:
    run = _through_the_loop()
    try:
        # the loop took every step of both attempts by itself, then went idle
        actions = run.chk.actions
        for name in ("Reserve", "AuthorizeAttempt", "ActivateAttempt", "SendOutcome"):
            assert actions.get(name) == 2, (name, actions)
        assert actions.get("AcceptRetryableFailureWithBudget") == 1
        assert actions.get("AcceptSuccess") == 1
        assert run.loops.pause is not None and run.loops.pause.wait is Wait.WORK
        assert run.quiet(), run.quiescence()
        # only the loop renewed w1's heartbeat (the tick does not), every beat period: it
        # is younger than that, plus the tick since the loop's last turn
        assert "w1" in run.sim.looped
        now = run.sim.clock.now()
        period = run.loops.loops["w1"].beat_every
        _, rows = run.sim.stores.durable.liveness(now)
        assert [(w, now - seen < period + 1) for w, _, seen in rows] == [("w1", True)]
        drained = _drained(run)
    finally:
        run.close()
    _replays(*drained)


def test_a_link_of_an_incarnation_declared_down_is_not_the_specs_to_cut() -> None:
    """Another incarnation's reconciler declared w2 down (its loop stopped turning, its
    heartbeat expired); w2 itself still believes it is up until its loop learns.  The
    environment's ``DropLink(w2, …)`` is the spec's only while ``workerState[w2] =
    WorkerUp`` — the durable store's word, not w2's: the cut is refused (found by the loop
    machine as ``DropLink(w2, Durable) by env is not enabled in alpha(before)``)."""
    run = JobRun(JobConfig(jobs=("j1",), workers=("w1", "w2"), concurrency=1), {})
    s = JobStep
    try:
        for step in [s("start", worker="w1"), s("start", worker="w2")]:
            run.execute(step)
        run.execute(s("loop-turn", worker="w2"))  # w2's loop beats once, then never again
        for _ in range(40):
            run.execute(s("tick"))
            run.execute(s("loop-turn", worker="w1"))
            run.execute(s("loop-reconcile", worker="w1"))
            if run.chk.actions.get("CrashWorker"):
                break
        assert run.chk.actions.get("CrashWorker") == 1
        assert run.sim.workers["w2"].up  # w2 has not learned it yet
        assert not run.sim.durably_up("w2") and run.sim.durably_up("w1")
        assert run.execute(s("drop-link", worker="w2", service=Service.DURABLE)) != "ok"
        assert "DropLink" not in run.chk.actions
        assert run.execute(s("drop-link", worker="w1", service=Service.DURABLE)) == "ok"
        assert run.chk.actions.get("DropLink") == 1
    finally:
        run.close()


def test_a_job_runs_through_a_process_isolated_loop_and_replays() -> None:
    """The second loop a run builds runs its handlers in production's process pool over
    simulated children (``remora/sim/jobs/processes.py``): the first attempt's handler
    (scripted to fail retryably, on an odd token) dies with its process and is settled as
    the documented retryable failure; its retry succeeds through a fresh child; the
    schedule replays to the same result."""
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1", "w2"), concurrency=1),
        {"j1": (Outcome.RETRYABLE, Outcome.SUCCESS)},
    )
    s = JobStep
    try:
        for step in [s("start", worker="w1"), s("start", worker="w2")]:
            run.execute(step)
        run.execute(s("loop-turn", worker="w1"))  # the first loop (threads), once
        run.execute(s("submit", job="j1"))
        for _ in range(12):  # the second loop (processes) takes every step
            run.execute(s("loop-reconcile", worker="w2"))
            run.execute(s("loop-turn", worker="w2"))
            for w, a in run.loops.running():
                run.execute(s("loop-handler", worker=w, job=a.job, token=a.token))
            run.execute(s("tick"))
        assert run.chk.actions.get("AcceptRetryableFailureWithBudget") == 1, run.chk.actions
        assert run.chk.actions.get("AcceptSuccess") == 1, run.chk.actions
        assert run.loops.process_reach == {"died", "settled"}
        rows = run.sim.stores.durable.snapshot().attempts
        assert {r.worker for r in rows} == {"w2"}
        # the job keeps its last failure's words: the first attempt's process died
        assert run.sim.stores.durable.job("j1").error.startswith("the handler's process died")
        drained = _drained(run)
    finally:
        run.close()
    _replays(*drained)


def _completion_failing_once(
    lost: IOOutcome, opened: list[JobRun], parts: Any = None, loop_parts: Any = None
) -> JobRun:
    """Rounds of ``w1``'s loop running ``j1`` whose completion's transaction fails once
    (``lost``), built from ``parts``/``loop_parts`` (None: the production ones); the run,
    its handler stepped to the end (added to ``opened`` first: the caller closes it)."""
    kw: dict[str, Any] = {} if parts is None else {"parts": parts, "loop_parts": loop_parts}
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1",), concurrency=1), {"j1": (Outcome.SUCCESS,)}, **kw
    )
    opened.append(run)
    s = JobStep
    fault = (JobFault(JobOperation.DURABLE_WRITE, 1, lost),)
    for step in [s("start", worker="w1"), s("submit", job="j1")]:
        run.execute(step)
    faulted = False
    for _ in range(8):
        run.execute(s("loop-reconcile", worker="w1"))
        run.execute(s("loop-turn", worker="w1"))
        for w, a in run.loops.running():
            last = run.loops.ends_next(a)
            fs = fault if last and not faulted else ()
            faulted = faulted or last
            run.execute(s("loop-handler", worker=w, job=a.job, token=a.token, faults=fs))
        run.execute(s("tick"))
    return run


def test_a_completion_tried_again_after_its_transaction_failed_still_sends_the_success() -> None:
    """The settlement stages a successful handler's output with its own write (the
    simulation's target lives outside the durable store's database, as a memory or a
    separate database's target does), then its transaction — ``SendOutcome`` and
    ``AcceptSuccess`` — aborts once, or loses its reply and did not commit.  The retry
    finds the stage already written and must send the success as it is: the stop-36 bug
    refused it as "nothing to stage" and sent a retryable failure instead (the staged work
    thrown away, an attempt spent; found by the batched loops, planted as (q)
    ``restages-on-retry``).  The schedule replays."""
    for lost in (IOOutcome.ABORT, IOOutcome.UNKNOWN_ABORTED):
        opened: list[JobRun] = []
        try:
            run = _completion_failing_once(lost, opened)
            assert ("durable-write", lost.value) in run.hook.fired, run.hook.fired
            assert run.chk.actions.get("AcceptSuccess") == 1, run.chk.actions
            assert "AcceptRetryableFailureWithBudget" not in run.chk.actions
            assert run.sim.stores.durable.job("j1").error == ""
            drained = _drained(run)
        finally:
            for r in opened:
                r.close()
        _replays(*drained)


@pytest.mark.parametrize("lost", [IOOutcome.ABORT, IOOutcome.UNKNOWN_ABORTED])
def test_the_same_schedule_kills_the_planted_restage(lost: IOOutcome) -> None:
    """Planted (q) ``restages-on-retry`` (``tests/jobs/loop_planted.py``): the schedule
    above kills it by the loop's promise of the handler's outcome — the cheap kill that
    lets the loop machine's own hunt for it (four times the suite's budget, about a
    minute) run under the nightly profile only."""
    parts, loop_parts = LOOP_PLANTED["restages-on-retry"]
    opened: list[JobRun] = []
    try:
        with pytest.raises(JobRunFailure, match="sent WantsRetryableFailure for j1#1"):
            _completion_failing_once(lost, opened, parts, loop_parts)
    finally:
        for r in opened:
            r.close()


def _timed_job_running() -> tuple[JobRun, AttemptId]:
    """A run of one job with a timeout of three ticks, its first attempt activated by
    ``w1``'s loop (its handler not stepped: it hangs until a test steps it)."""
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1",), concurrency=1),
        {"j1": (Outcome.SUCCESS,)},
        kinds={"j1": JobKind(timeout=3)},
    )
    s = JobStep
    for step in [s("start", worker="w1"), s("submit", job="j1")]:
        run.execute(step)
    run.execute(s("loop-reconcile", worker="w1"))
    run.execute(s("loop-turn", worker="w1"))
    [(_, first)] = run.loops.running()
    return run, first


def _retry_succeeds(run: JobRun, first: AttemptId) -> None:
    """Rounds of ``w1``'s loop, every handler but the hung ``first`` stepped: the job's
    retry runs and succeeds."""
    s = JobStep
    for _ in range(10):
        run.execute(s("loop-reconcile", worker="w1"))
        run.execute(s("loop-turn", worker="w1"))
        for w, a in run.loops.running():
            if a != first:
                run.execute(s("loop-handler", worker=w, job=a.job, token=a.token))
        run.execute(s("tick"))
    assert run.chk.actions.get("AcceptRetryableFailureWithBudget") == 1, run.chk.actions
    assert run.chk.actions.get("AcceptSuccess") == 1, run.chk.actions


def test_a_hung_handler_past_its_jobs_timeout_is_ended_by_its_loop_and_replays() -> None:
    """A job submitted with a timeout of three ticks (``JobKind.timeout``, as ``submit
    --timeout`` is); its handler hangs (it takes no stretch) while its loop turns every
    tick: past the timeout the loop asks it to stop, and two ticks later (its grace) ends
    the attempt itself — a retryable failure, ``timed out after 3s`` — and the retry, whose
    handler runs, succeeds.  Neither the sent-outcome promise (no earlier than the
    attempt's activation plus its timeout) nor the timeout's (ended once overrun past the
    grace) objects, and the schedule replays."""
    run, first = _timed_job_running()
    s = JobStep
    try:
        for _ in range(7):  # the first attempt's handler hangs
            run.execute(s("tick"))
            run.execute(s("loop-reconcile", worker="w1"))
            run.execute(s("loop-turn", worker="w1"))
        assert run.loops.timeout_reach == {"ended by its loop"}
        assert run.sim.stores.durable.job("j1").error == "timed out after 3s"
        _retry_succeeds(run, first)
        drained = _drained(run)
    finally:
        run.close()
    _replays(*drained)


def test_a_turn_that_ends_a_timed_out_attempt_never_waits_out_a_store_on_the_loops_thread() -> None:
    """A hung handler overruns its job's timeout while its incarnation's link to the target
    is down: the loop sends the retryable failure, but processing it needs the target.
    Each turn tries that once and leaves it for a later turn (the attempt keeps its slot)
    — the clock never moves within a turn — and once the link is back a turn finishes the
    end, the lease released, and the retry succeeds.  Before the fix the turn rode the
    outage out on the loop's thread (``retry_step``: 50 tries, 2.45 s) while no other
    attempt's lease was renewed, and time passed with no ``Tick`` — the refinement check
    failed (found by the loop machine once handlers had timeouts of their own).  The
    schedule replays."""
    run, first = _timed_job_running()
    s = JobStep
    try:
        for tick in range(1, 7):  # the first attempt's handler hangs
            if tick == 4:  # overrun at 3, ended at 5 (its grace): the target goes away
                run.execute(s("drop-link", worker="w1", service=Service.TARGET))
            run.execute(s("tick"))
            before = run.sim.clock.now()
            run.execute(s("loop-turn", worker="w1"))
            assert run.sim.clock.now() == before  # the turn waited for nothing
        assert run.chk.actions.get("SendOutcome") == 1, run.chk.actions
        assert first in run.loops.loops["w1"].running  # its slot still held
        assert "AcceptRetryableFailureWithBudget" not in run.chk.actions
        run.execute(s("restore-link", worker="w1", service=Service.TARGET))
        _retry_succeeds(run, first)
        assert run.loops.timeout_reach == {"ended by its loop", "its end left for a later turn"}
        drained = _drained(run)
    finally:
        run.close()
    _replays(*drained)


def test_a_loop_end_left_for_a_later_turn_is_finished_though_its_handler_returned() -> None:
    """The loop ends a timed-out attempt while its incarnation's link to the coordination
    store is down: the retryable failure is sent and processed, the lease's release left
    for a later turn.  Then the hung handler returns (it settles nothing: the loop took the
    attempt over).  The next turn must still release the lease — it once dropped a
    finished handler's attempt before finishing its end, and the lease stayed held until it
    expired (found by the loop machine, the links of ``loop_hang`` cut)."""
    run, first = _timed_job_running()
    s = JobStep
    try:
        for _ in range(4):  # overrun at 3, ended at 5 (its grace)
            run.execute(s("tick"))
            run.execute(s("loop-turn", worker="w1"))
        run.execute(s("drop-link", worker="w1", service=Service.COORDINATION))
        run.execute(s("tick"))
        run.execute(s("loop-turn", worker="w1"))
        assert run.sim.stores.durable.job("j1").error == "timed out after 3s"
        assert first in run.sim.stores.coordination.snapshot().leases  # not released yet
        run.execute(s("restore-link", worker="w1", service=Service.COORDINATION))
        run.execute(s("loop-handler", worker="w1", job="j1", token=first.token))
        run.execute(s("tick"))
        run.execute(s("loop-turn", worker="w1"))
        lease = run.sim.stores.coordination.snapshot().leases.get(first)
        assert lease is None or not lease.live, lease
        assert first not in run.loops.loops["w1"].running
        _retry_succeeds(run, first)
        drained = _drained(run)
    finally:
        run.close()
    _replays(*drained)


def test_the_orphan_promise_sees_an_end_that_never_learns_a_reconciled_outcome() -> None:
    """Planted (w) ``ForgetsReconciledOutcomes`` (``tests/jobs/loop_planted.py``): the
    loop's end of a timed-out attempt, its ``ProcessOutcome`` refused because the
    reconciler processed the outcome while the target was away, gives the step up without
    learning what became of it — the product's own code before stop 38.  The lease expires
    meanwhile (so the release promise has nothing to say); the incarnation's record stays
    executing with no handler in its loop: the orphan promise (``ERROR loop:
    w1 holds j1#1 executing, but its loop runs no handler for it``) fails the run.  The
    machines' budget does not reach this schedule (the reconciler must settle the outcome
    between two tries of the loop's end); this directed run is the property's evidence."""
    from tests.jobs.loop_planted import ForgetsReconciledOutcomes

    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1",), concurrency=1),
        {"j1": (Outcome.SUCCESS,)},
        kinds={"j1": JobKind(timeout=3)},
        loop_parts=LoopParts(loop=ForgetsReconciledOutcomes),
    )
    s = JobStep
    try:
        for step in [s("start", worker="w1"), s("submit", job="j1")]:
            run.execute(step)
        run.execute(s("loop-reconcile", worker="w1"))
        run.execute(s("loop-turn", worker="w1"))
        for tick in range(1, 7):
            if tick == 4:
                run.execute(s("drop-link", worker="w1", service=Service.TARGET))
            run.execute(s("tick"))
            run.execute(s("loop-turn", worker="w1"))
        run.execute(s("restore-link", worker="w1", service=Service.TARGET))
        run.execute(s("loop-reconcile", worker="w1"))  # the reconciler processes it first
        run.execute(s("tick"))  # the loop's end is tried again a tick on,
        run.execute(s("loop-reconcile", worker="w1"))  # once the lease has expired
        with pytest.raises(JobRunFailure, match=r"ERROR loop: w1 holds j1#1 executing, but"):
            run.execute(s("loop-turn", worker="w1"))
    finally:
        run.close()


def test_a_loop_end_whose_outcome_was_rejected_stops_the_attempt_and_releases_its_lease() -> None:
    """The loop ends a timed-out attempt while the target is away: the retryable failure is
    sent, its processing left for a later turn.  Meanwhile the job is cancelled and the
    reconciler rejects the pending outcome (``RejectOutcome``): the attempt goes on
    executing in the spec.  The loop's end must learn that and stop it on its stop
    condition (``CooperativeStop``), record the stop and release the lease — it once gave
    the refused ``ProcessOutcome`` up and forgot the attempt, its record executing for
    good (found by the orphan promise in a hunt of the loop machine)."""
    run, first = _timed_job_running()
    s = JobStep
    try:
        for tick in range(1, 6):
            if tick == 4:
                run.execute(s("drop-link", worker="w1", service=Service.TARGET))
            run.execute(s("tick"))
            run.execute(s("loop-turn", worker="w1"))
        assert run.chk.actions.get("SendOutcome") == 1, run.chk.actions
        run.execute(s("cancel", job="j1"))
        run.execute(s("loop-reconcile", worker="w1"))  # the cancel finalized
        run.execute(s("reconcile"))  # the pending outcome rejected
        assert run.chk.actions.get("RejectOutcome") == 1, run.chk.actions
        run.execute(s("restore-link", worker="w1", service=Service.TARGET))
        run.execute(s("tick"))
        run.execute(s("loop-turn", worker="w1"))
        assert run.chk.actions.get("CooperativeStop") == 1, run.chk.actions
        assert first not in run.loops.loops["w1"].running
        assert run.sim.workers["w1"].attempts[first].state == "stopped"
        drained = _drained(run)
    finally:
        run.close()
    _replays(*drained)


def test_a_reconcile_pass_crossed_by_another_refuses_what_the_other_did() -> None:
    """The crossing runs (``w2``'s pass between ``w1``'s read and its clean), ``w1``'s
    batched clean of the jobs ``w2`` cleaned is refused, and the schedule — the crossed
    pass a step of its own — replays to the same result."""
    run = JobRun(
        JobConfig(jobs=("j1", "j2"), workers=("w1", "w2"), concurrency=1),
        {"j1": (Outcome.SUCCESS,), "j2": (Outcome.SUCCESS,)},
    )
    assert crossed_clean(run)
    assert run.chk.actions.get("CleanTerminalCoordination") == 2
    _replays(*_drained(run))


def _cancelled_while_queued(
    opened: list[JobRun], parts: Any = None, loop_parts: Any = None
) -> JobRun:
    """``j1`` enqueued, then cancelled while still queued; ``w1``'s next turn reserves it
    and its authorization is refused (the cancel is requested)."""
    kw: dict[str, Any] = {} if parts is None else {"parts": parts, "loop_parts": loop_parts}
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1",), concurrency=1), {"j1": (Outcome.SUCCESS,)}, **kw
    )
    opened.append(run)
    s = JobStep
    for step in [
        s("start", worker="w1"),
        s("submit", job="j1"),
        s("loop-reconcile", worker="w1"),
        s("cancel", job="j1"),
        s("loop-turn", worker="w1"),
    ]:
        run.execute(step)
    return run


def test_a_reservation_whose_authorization_is_refused_is_given_back_at_once() -> None:
    """The turn that reserved a job cancelled while queued gives its reservation back in
    the same turn (``ReleaseReservation`` right after ``Reserve``): the job's cancellation
    finishes without waiting a reservation period."""
    opened: list[JobRun] = []
    try:
        run = _cancelled_while_queued(opened)
        actions = [str(getattr(r.action, "value", r.action)) for r, _ in run.chk.last_steps]
        assert actions == ["Reserve", "ReleaseReservation"], actions
    finally:
        for r in opened:
            r.close()


def test_the_same_schedule_kills_the_planted_kept_reservation() -> None:
    """Planted (i) ``keeps-refused-reservations``: the dispatch's promise kills it at that
    turn — the cheap kill that lets the loop machine's own hunt for it (three times the
    suite's budget; 16 s at stop 46, 158 s once stop 47's full pass read its fences and the
    draws moved) run under the nightly profile only."""
    parts, loop_parts = LOOP_PLANTED["keeps-refused-reservations"]
    opened: list[JobRun] = []
    try:
        with pytest.raises(JobRunFailure, match="reserved j1 and left the reservation idle"):
            _cancelled_while_queued(opened, parts, loop_parts)
    finally:
        for r in opened:
            r.close()
