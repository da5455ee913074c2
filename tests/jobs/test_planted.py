"""Every guard catches its planted bug: with the guard weakened, the refinement checker
reports the step the spec forbids; with the real guard, the same schedule is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from remora.jobs import guards
from remora.jobs.model import Outcome
from remora.jobs.refinement import RefinementViolation
from tests.jobs.test_actions import Run


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
        lambda job, row, stage: row.pending is Outcome.SUCCESS,
        stale_success,
    ),
    "activate without the mirrored authority": ("mirror_allows", _true, activate_after_cancel),
    "renew after losing authority": ("mirror_allows", _true, renew_after_finalize),
    "report progress after a cancel": ("mirror_allows", _true, report_after_cancel),
    "reap a live lease": (
        "reap",
        lambda job, attempts, token, lease_live, reserved: guards_reap(
            job, attempts, token, lease_live=False, reserved=reserved
        ),
        reap_live_lease,
    ),
    "clean the winner's staging": (
        "cleanup_eligible",
        lambda job, row, stage, worker_up: True,
        clean_winner,
    ),
    "reserve beyond capacity": (
        "can_reserve",
        lambda c, job, *a: job in c.queued,
        reserve_over_capacity,
    ),
    "authorize without the reservation": (
        "authorize",
        lambda job, attempts, worker, rid, reserved, worker_up, owner_stopped: guards_authorize(
            job,
            attempts,
            worker,
            rid,
            reserved=True,
            worker_up=worker_up,
            owner_stopped=owner_stopped,
        ),
        authorize_without_reservation,
    ),
    "accept a failure after a cancel": (
        "failure_eligible",
        lambda job, row: row.pending in (Outcome.RETRYABLE, Outcome.PERMANENT),
        accept_failure_after_cancel,
    ),
}

guards_reap = guards.reap
guards_authorize = guards.authorize


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_planted_guard_bug_is_caught(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    attr, mutant, schedule = MUTATIONS[name]
    schedule(Run())  # the real guard: the schedule is refined step by step
    monkeypatch.setattr(guards, attr, mutant)
    with pytest.raises(RefinementViolation):
        schedule(Run())
