"""Every guard catches its planted bug: with the guard weakened, the refinement checker
reports the step the spec forbids; with the real guard, the same schedule is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs.model import Outcome
from remora.jobs.worker import Worker
from remora.sim.jobs.mutations import BY_NAME, planted_guards, unguarded
from remora.sim.jobs.refinement import RefinementViolation
from remora.sim.jobs.simulation import Parts
from remora.testing.job_machines import JobScheduleFailure
from tests.jobs.job_machines import EmbeddedJobs, budget_of
from tests.jobs.scenarios import Run


def stale_success(run: Run) -> None:
    """A reaped zombie sends success after a second attempt took over."""
    a1 = run.running()
    run(lambda: run.w1.advance(a1, 2, b"zombie"))
    run(run.sim.tick)
    run(lambda: run.r.expire_lease(a1))
    run(lambda: run.r.reap(a1))
    run(lambda: run.r.schedule_retry("j1"))
    run(lambda: run.r.enqueue("j1"))
    run(lambda: run.sim.start("w2"))
    w2 = run.sim.worker("w2")
    run(lambda: w2.reserve("j1"))
    run(lambda: w2.authorize("j1"))
    run(lambda: run.w1.send_outcome(a1, Outcome.SUCCESS))
    run(lambda: run.w1.process_outcome(a1))


def activate_after_cancel(run: Run) -> None:
    run.ok(lambda: run.sim.start("w1"))
    run.ok(lambda: run.sim.submit("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    run.ok(lambda: run.w1.reserve("j1"))
    a = run.ok(lambda: run.w1.authorize("j1"))
    run(lambda: run.sim.cancel("j1"))
    run(lambda: run.w1.activate(a))


def renew_after_finalize(run: Run) -> None:
    a = run.running()
    run(lambda: run.sim.cancel("j1"))
    run(lambda: run.r.finalize_cancel("j1"))
    run(run.sim.tick)
    run(lambda: run.w1.renew(a))


def reap_live_lease(run: Run) -> None:
    a = run.running()
    run(lambda: run.r.reap(a))


def clean_winner(run: Run) -> None:
    a = run.running()
    run.finish(a)
    run(lambda: run.r.cleanup_stage(a))


def reserve_over_capacity(run: Run) -> None:
    run.ok(lambda: run.sim.start("w1"))
    for j in ("j1", "j2"):
        run.ok(lambda j=j: run.sim.submit(j))
        run.ok(lambda j=j: run.r.enqueue(j))
    run(lambda: run.w1.reserve("j1"))
    run(lambda: run.w1.reserve("j2"))


def authorize_without_reservation(run: Run) -> None:
    run.ok(lambda: run.sim.start("w1"))
    run.ok(lambda: run.sim.submit("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    run(lambda: run.w1.reserve("j1"))
    run(run.sim.tick)
    run(lambda: run.r.expire_reservation("j1"))
    run(lambda: run.w1.authorize("j1"))


def report_after_cancel(run: Run) -> None:
    a = run.running()
    run(lambda: run.w1.advance(a, 1, b"x"))
    run(lambda: run.sim.cancel("j1"))
    run(lambda: run.w1.report_progress(a))


def accept_failure_after_cancel(run: Run) -> None:
    a = run.running()
    run(lambda: run.w1.send_outcome(a, Outcome.PERMANENT))
    run(lambda: run.sim.cancel("j1"))
    run(lambda: run.w1.process_outcome(a))


def _true(*args: Any, **kw: Any) -> bool:
    return True


MUTATIONS: dict[str, tuple[str, Callable[..., Any], Callable[[Run], None]]] = {
    "accept success without the token compare": (
        "commit_eligible",
        lambda g, job, row, stage: row.pending is Outcome.SUCCESS,
        stale_success,
    ),
    "activate without the mirrored authority": ("mirror_allows", _true, activate_after_cancel),
    "renew after losing authority": ("mirror_allows", _true, renew_after_finalize),
    "report progress after a cancel": ("mirror_allows", _true, report_after_cancel),
    "reap a live lease": (
        "reap",
        BY_NAME["reap-before-lease-expiry"].guards["reap"],
        reap_live_lease,
    ),
    "clean the winner's staging": (
        "cleanup_eligible",
        lambda g, job, row, stage, worker_up: True,
        clean_winner,
    ),
    "reserve beyond capacity": (
        "can_reserve",
        lambda g, c, job, *a: job in c.queued,
        reserve_over_capacity,
    ),
    "authorize without the reservation": (
        "authorize",
        BY_NAME["authorize-without-reservation"].guards["authorize"],
        authorize_without_reservation,
    ),
    "accept a failure after a cancel": (
        "failure_eligible",
        lambda g, job, row: row.pending in (Outcome.RETRYABLE, Outcome.PERMANENT),
        accept_failure_after_cancel,
    ),
}


def planted(attr: str, mutant: Callable[..., Any]) -> Run:
    """A run whose guards have ``attr`` replaced by ``mutant`` (given to the simulation:
    nothing is patched)."""
    return Run(parts=Parts(guards=planted_guards(**{attr: mutant})))


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_planted_guard_bug_is_caught(name: str) -> None:
    attr, mutant, schedule = MUTATIONS[name]
    schedule(Run())  # the real guard: the schedule is refined step by step
    with pytest.raises(RefinementViolation):
        schedule(planted(attr, mutant))


# -- more guards ----------------------------------------------------------------------------


def enqueue_twice(run: Run) -> None:
    run.ok(lambda: run.sim.submit("j1"))
    run(lambda: run.r.enqueue("j1"))
    run(lambda: run.r.enqueue("j1"))


def expire_fresh_lease(run: Run) -> None:
    a = run.running()
    run(lambda: run.r.expire_lease(a))


def expire_fresh_reservation(run: Run) -> None:
    run.ok(lambda: run.sim.start("w1"))
    run.ok(lambda: run.sim.submit("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    run(lambda: run.w1.reserve("j1"))
    run(lambda: run.r.expire_reservation("j1"))


def clear_live_progress(run: Run) -> None:
    run.running()
    run(lambda: run.r.clear_stale_progress("j1"))


def clean_clean_coordination(run: Run) -> None:
    a = run.running()
    run.finish(a)
    run(lambda: run.r.clean_terminal("j1"))
    run(lambda: run.r.clean_terminal("j1"))


def checkpoint_after_reap(run: Run) -> None:
    a = run.running()
    run(lambda: run.w1.advance(a, 1, b"x"))
    run(run.sim.tick)
    run(lambda: run.r.expire_lease(a))
    run(lambda: run.r.reap(a))
    run(lambda: run.w1.checkpoint(a))


def send_twice(run: Run) -> None:
    a = run.running()
    run(lambda: run.w1.send_outcome(a, Outcome.PERMANENT))
    run.w1.attempts[a].outcome_sent = False  # the worker forgets; the durable guard must not
    run(lambda: run.w1.send_outcome(a, Outcome.RETRYABLE))


def retry_running(run: Run) -> None:
    run.running()
    run(lambda: run.r.schedule_retry("j1"))


def cancel_succeeded(run: Run) -> None:
    a = run.running()
    run.finish(a)
    run(lambda: run.sim.cancel("j1"))


def finalize_running(run: Run) -> None:
    run.running()
    run(lambda: run.r.finalize_cancel("j1"))


def invalidate_terminal(run: Run) -> None:
    a = run.running()
    run.finish(a)
    run(lambda: run.r.invalidate_checkpoint("j1"))


def commit_unwritten_credential(run: Run) -> None:
    from remora.jobs import credentials as C

    a = run.running()
    st, act = run.sim.stores, run.w1.actor
    c = run(lambda: C.prepare_credential(st, act, a))
    run(lambda: C.begin_credential_write(st, act, c))
    run(lambda: C.commit_credential_version(st, act, c))


def release_running_lease(run: Run) -> None:
    a = run.running()
    run(lambda: run.r.release_lease(a))


MORE: dict[str, tuple[str, Callable[..., Any], Callable[[Run], None]]] = {
    "release a running attempt's lease": (
        "lease_releasable",
        lambda g, job, row, worker_up: True,
        release_running_lease,
    ),
    "enqueue a queued job": ("can_enqueue", _true, enqueue_twice),
    "expire a fresh lease": ("can_expire_lease", _true, expire_fresh_lease),
    "expire a fresh reservation": ("can_expire_reservation", _true, expire_fresh_reservation),
    "clear live progress": ("can_clear_stale_progress", _true, clear_live_progress),
    "clean clean coordination": ("coordination_dirty", _true, clean_clean_coordination),
    "checkpoint without authority": (
        "persist_checkpoint",
        unguarded("persist_checkpoint", "current authority", "not Running"),
        checkpoint_after_reap,
    ),
    "send a second outcome": (
        "send_outcome",
        unguarded("send_outcome", "in flight"),
        send_twice,
    ),
    "retry a running job": (
        "schedule_retry",
        unguarded("schedule_retry", "not RetryWait"),
        retry_running,
    ),
    "cancel a succeeded job": (
        "request_cancel",
        unguarded("request_cancel", "nothing to cancel"),
        cancel_succeeded,
    ),
    "finalize a running job": (
        "finalize_cancel",
        unguarded("finalize_cancel", "not Cancelling"),
        finalize_running,
    ),
    "invalidate a terminal job's checkpoint": (
        "invalidate_checkpoint",
        unguarded("invalidate_checkpoint", "terminal"),
        invalidate_terminal,
    ),
    "commit an unwritten credential": (
        "commit_credential_version",
        unguarded("commit_credential_version", "intent is", "no live secret"),
        commit_unwritten_credential,
    ),
}


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_planted_guard_bugs_are_caught(name: str) -> None:
    attr, mutant, schedule = MORE[name]
    schedule(Run())
    with pytest.raises(RefinementViolation):
        schedule(planted(attr, mutant))


def test_embedded_mode_needs_the_durable_guard() -> None:
    """With coordination private to each worker process (no mirror pre-writes from other
    processes), the worker's durable-locked refresh is what keeps ``ActivateAttempt``
    sound: without it the walk activates an attempt whose authority is gone."""
    from tests.jobs.walk import drain, walk

    # (seed 53 since a SIGKILL became a stutter until its declaration: the schedules moved)
    drain(walk(53, 300, fault_rate=0.1))
    with pytest.raises(RefinementViolation, match="ActivateAttempt"):
        walk(53, 300, fault_rate=0.1, embedded_guard=False)


def test_the_embedded_machine_kills_an_incarnation_without_its_durable_guard(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same bug, found by the search rather than a seed: the embedded machine
    (:class:`~tests.jobs.job_machines.EmbeddedJobs`) at its suite budget kills an
    incarnation whose lease steps skip the durable refresh (``Worker._guarded`` calling
    the step straight) — it activates an attempt a cancel or a reap already ended.  (Not
    shrunk: the hunt only needs the failure.)"""
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    monkeypatch.setattr(Worker, "_guarded", lambda self, a, op: bool(op()))
    with pytest.raises(JobScheduleFailure, match="ERROR refinement: ActivateAttempt"):
        hunt = settings(budget_of(EmbeddedJobs), phases=(Phase.explicit, Phase.generate))
        run_state_machine_as_test(EmbeddedJobs, settings=hunt)
