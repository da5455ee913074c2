"""Why each attempt ended (:mod:`remora.jobs.history`), read from the durable store alone,
for every ending — on the simulation's stores and logical clock, every step
refinement-checked — and the metrics counted from the same steps' records
(:class:`remora.jobs.metrics.MetricsRecorder`)."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
from prometheus_client import generate_latest

from remora.jobs.history import Ending, history, statuses
from remora.jobs.metrics import JobMetrics
from remora.jobs.model import AttemptId, Outcome, Phase
from remora.sim.jobs.simulation import SMALL
from tests.jobs.scenarios import Run
from tests.jobs.visibility import samples

#: Leases of ten ticks, declared down after two: an incarnation can be declared down while
#: its attempt's lease is still live.
SLOW_LEASE = attrs.evolve(SMALL, lease_ticks=10, reservation_ticks=10, down_after_ticks=2)


def ending(run: Run, job: str = "j1") -> tuple[Ending, str]:
    a = history(run.sim.stores.durable, job).attempts[-1]
    return a.ending, a.why


def outcome(run: Run, a: AttemptId, o: Outcome, error: str = "") -> str:
    wk = run.w1
    if o is Outcome.SUCCESS:
        run.ok(lambda: wk.advance(a, 2, b"done"))
    run.ok(lambda: wk.send_outcome(a, o))
    return str(run.ok(lambda: wk.process_outcome(a, error)))


@pytest.mark.parametrize(
    ("o", "error", "want"),
    [
        (Outcome.SUCCESS, "", (Ending.SUCCEEDED, "succeeded")),
        (Outcome.PERMANENT, "permanent: no", (Ending.FAILED, "failed: no")),
        (Outcome.RETRYABLE, "retryable: later", (Ending.RETRYABLE, "retryable failure: later")),
        (Outcome.RETRYABLE, "timed out after 2s", (Ending.TIMED_OUT, "timed out after 2s")),
    ],
)
def test_an_accepted_outcome(o: Outcome, error: str, want: tuple[Ending, str]) -> None:
    run = Run()
    run.ok(run.sim.tick)  # time 1 (0 reads as "unknown")
    a = run.running()  # authorized and activated at 1
    run.ok(run.sim.tick)
    outcome(run, a, o, error)  # at 2, the worker says it ran 1 s
    assert ending(run) == want
    got = history(run.sim.stores.durable, "j1").attempts[0]
    # activated: derived from the outcome's time and how long the worker says it ran
    assert (got.authorized, got.activated, got.ended, got.ran) == (1.0, 1.0, 2.0, 1.0)
    assert got.outcome == {"WantsSuccess": "success"}.get(o.value, got.outcome)


def test_retries_exhausted() -> None:
    run = Run(jobs_config=attrs.evolve(SMALL, max_attempts=1))
    a = run.running()
    outcome(run, a, Outcome.RETRYABLE, "retryable: again")
    assert ending(run) == (Ending.EXHAUSTED, "retryable failure, attempts exhausted: again")


def test_reaped_when_the_lease_is_lost() -> None:
    run = Run()
    run.running()
    for _ in range(2):
        run.ok(run.sim.tick)
    run.ok(run.r.reconcile_once)
    run.saw("ExpireLease", "ReapLostAttempt")
    assert ending(run) == (Ending.REAPED, "reaped: lease lost")


def test_cancelled() -> None:
    run = Run()
    run.running()
    run.ok(lambda: run.sim.cancel("j1"))
    run.ok(run.r.reconcile_once)
    assert run.phase("j1") is Phase.CANCELLED
    assert ending(run) == (Ending.CANCELLED, "cancelled")


def test_abandoned_at_shutdown() -> None:
    run = Run()
    run.running()
    run.ok(lambda: run.sim.shutdown("w1"))
    assert ending(run) == (Ending.SHUTDOWN, "abandoned at shutdown")


def test_declared_down_by_another_incarnation() -> None:
    run = Run(jobs_config=SLOW_LEASE)
    run.running()
    run.ok(lambda: run.sim.start("w2"))
    run.ok(lambda: run.sim.crash("w1"))
    for _ in range(3):
        run.ok(run.sim.tick)
    run.ok(run.r.reconcile_once)
    run.saw("CrashWorker")
    assert ending(run) == (Ending.DECLARED_DOWN, "declared down: by reconciler")


def test_an_attempt_with_an_outcome_in_flight_is_not_ended_by_its_workers_shutdown() -> None:
    """The outcome it sent may still be processed: it ends as that outcome says."""
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 2, b"done"))
    run.ok(lambda: run.w1.send_outcome(a, Outcome.SUCCESS))
    run.ok(lambda: run.sim.shutdown("w1"))
    run.ok(run.r.reconcile_once)  # processes the outcome in flight
    assert ending(run) == (Ending.SUCCEEDED, "succeeded")


def test_stopped_by_its_worker_with_the_reason() -> None:
    run = Run(jobs_config=SLOW_LEASE)
    a = run.running()
    run.ok(lambda: run.sim.cancel("j1"))
    run.ok(lambda: run.r.publish_cancel_notice("j1"))
    assert run.ok(lambda: run.w1.cooperative_stop(a))
    assert run.ok(lambda: run.w1.record_stop(a))
    assert ending(run) == (Ending.STOPPED, "stopped: cancel notice")
    run.ok(lambda: run.r.finalize_cancel("j1"))  # the durable end comes later: it wins
    assert ending(run) == (Ending.CANCELLED, "cancelled")


def test_status_reads_the_durable_store_only() -> None:
    run = Run()
    run.ok(run.sim.tick)  # time 1 (0 reads as "unknown")
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"half"))
    run.ok(lambda: run.w1.checkpoint(a))
    run.ok(run.sim.tick)
    run.sim.stores.coordination = None  # type: ignore[assignment]  # never asked
    (st,) = statuses(run.sim.stores.durable, run.sim.stores.target, wanted=["j1"])
    got = st.to_json()
    assert (got["phase"], got["attempt"], got["worker"]) == ("Running", 1, "w1")
    assert got["progress"] == {"checkpoint": 1, "max": 2, "staged": 1}
    assert got["elapsed"] == 1.0  # authorized at 0, read a tick later (logical seconds)


def counted(build: Callable[[Run], None]) -> dict[str, float]:
    """Run ``build`` and feed every record it made to a fresh :class:`MetricsRecorder`;
    the samples of its registry, by name and labels."""
    run = Run()
    build(run)
    metrics = JobMetrics(run.sim.stores.durable)
    recorder = metrics.recorder()
    for step in run.sim.recorder.steps:
        recorder.record(step)
    assert b"remora_jobs_attempts_started_total" in generate_latest(metrics.registry)
    return samples(metrics.registry.collect())


def test_metrics_count_a_known_run_from_its_records() -> None:
    def build(run: Run) -> None:
        a = run.running()  # j1: times out, then succeeds
        outcome(run, a, Outcome.RETRYABLE, "timed out after 1s")
        run.ok(lambda: run.w1.release_lease(a))
        run.ok(run.r.reconcile_once)  # ScheduleRetry
        run.ok(run.r.reconcile_once)  # Enqueue
        assert run.ok(lambda: run.w1.reserve("j1"))
        b = run.ok(lambda: run.w1.authorize("j1"))
        run.ok(lambda: run.w1.activate(b))
        run.ok(run.sim.tick)
        outcome(run, b, Outcome.SUCCESS)
        run.ok(lambda: run.w1.release_lease(b))
        c = run.running("j2")  # j2: reaped
        run.ok(run.sim.tick)
        run.ok(run.sim.tick)
        run.ok(run.r.reconcile_once)
        assert c.job == "j2"

    got = counted(build)
    assert got["remora_jobs_attempts_started_total{}"] == 3
    assert got["remora_jobs_attempts_ended_total{outcome=timed_out}"] == 1
    assert got["remora_jobs_attempts_ended_total{outcome=succeeded}"] == 1
    assert got["remora_jobs_attempts_ended_total{outcome=reaped}"] == 1
    assert got["remora_jobs_timeouts_total{}"] == 1
    assert got["remora_jobs_reaps_total{step=ReapLostAttempt}"] == 1
    assert got["remora_jobs_reaps_total{step=ExpireLease}"] == 1
    assert got["remora_jobs_queue_wait_seconds_count{}"] == 3
    assert got["remora_jobs_attempt_duration_seconds_count{outcome=succeeded}"] == 1
    assert got["remora_jobs_attempt_duration_seconds_sum{outcome=succeeded}"] >= 0
    assert got["remora_jobs{phase=Succeeded,queue=default}"] == 1
    assert (
        got["remora_jobs{phase=RetryWait,queue=default}"]
        + got["remora_jobs{phase=Queued,queue=default}"]
        == 1
    )  # j2, reaped: its retry waits (or is queued again)
    assert got["remora_jobs_store_up{}"] == 1


def test_the_jobs_by_phase_read_fails_soft() -> None:
    class Down:
        def counts(self) -> dict[tuple[str, str], int]:
            from remora.errors import Unavailable

            raise Unavailable("the store is down")

    metrics = JobMetrics(Down())
    text = generate_latest(metrics.registry).decode()
    assert "remora_jobs_store_up 0.0" in text and 'remora_jobs{phase="Queued"' not in text
