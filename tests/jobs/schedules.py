"""Step schedules the job tests share (hand-written runs of :class:`JobRun`)."""

from __future__ import annotations

from remora.sim.jobs.run import JobRun
from remora.sim.jobs.trace import JobStep


def dispatched(worker: str, job: str = "j1", token: int = 1) -> tuple[JobStep, ...]:
    """``job`` submitted, enqueued, reserved, authorized and activated at ``worker`` (its
    attempt ``token``): the start of most hand-written job schedules."""
    return (
        JobStep("submit", job=job),
        JobStep("enqueue", job=job),
        JobStep("reserve", worker=worker, job=job),
        JobStep("authorize", worker=worker, job=job),
        JobStep("activate", worker=worker, job=job, token=token),
    )


def crossed_clean(run: JobRun) -> bool:
    """Run ``j1`` and ``j2`` to success through ``w1``'s loop (one reconcile pass to enqueue
    them, then turns and handler stretches only), so their coordination is left dirty;
    then one pass of ``w1``'s schedule crossed at its second store call — its batched
    clean of both — by ``w2``'s pass, which cleans them first.  Whether the other pass
    ran."""
    s = JobStep
    for step in [s("start", worker="w1"), s("start", worker="w2")]:
        run.execute(step)
    for job in ("j1", "j2"):
        run.execute(s("submit", job=job))
    run.execute(s("loop-reconcile", worker="w1"))
    for _ in range(12):
        run.execute(s("loop-turn", worker="w1"))
        for w, a in run.loops.running():
            run.execute(s("loop-handler", worker=w, job=a.job, token=a.token))
    for job in ("j1", "j2"):
        assert run.sim.stores.durable.job(job).phase.terminal
        assert job in run.sim.stores.coordination.snapshot().progress  # dirty
    run.execute(s("loop-reconcile-crossed", worker="w1", amount=2))
    return run.loops.last is not None and run.loops.last.result == "crossed"
