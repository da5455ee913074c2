"""The production worker loop in the simulation (``remora/sim/jobs/loops.py``), step by
step: a job retried and then succeeding runs through ``WorkerLoop.turn()``, the handler's
stretches and the settlement, and the reconciler's schedule alone — no single worker step
— and the schedule replays to the same result (the lockstep threads are deterministic)."""

from __future__ import annotations

from remora.jobs.loop import Wait
from remora.jobs.model import Outcome
from remora.sim.jobs.run import JobRun, run_trace
from remora.sim.jobs.trace import JobConfig, JobStep, new_trace


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
        run.drain()  # as a replay does
        run.judge()
        trace = new_trace(run.config, run.handlers, tuple(run.steps), "test", run.kinds)
    finally:
        run.close()
    replayed = run_trace(trace)
    assert replayed.failure is None and replayed.actions == dict(actions)
