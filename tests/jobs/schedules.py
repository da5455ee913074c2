"""Step schedules the job tests share (hand-written runs of :class:`JobRun`)."""

from __future__ import annotations

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
