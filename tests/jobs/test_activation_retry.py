"""A refused activation is retried, not forgotten.

``ActivateAttempt`` is refused while another attempt of the job still holds a live lease
(stronger than the spec, :func:`remora.jobs.guards.other_live_lease`): a retry authorized
between the failed attempt's ``AcceptRetryableFailure…`` and its ``ReleaseLease`` must wait.
The worker loop used to give such an authorized attempt up (the job is no longer queued, so
nothing picked it up again) until the reservation expired and the reaper took the attempt
back: one attempt of the budget wasted, the checkpoint invalidated (its owner, the stranded
attempt, is not known stopped), and a whole reservation period lost.  Under load the
end-to-end test saw it as a "wrong" committed result (``ok on attempt 3``: correct for the
attempt that won, not the one retry the test expects)."""

from __future__ import annotations

from collections.abc import Callable

from remora.jobs.attempt import AttemptContext
from remora.jobs.handlers import Registry
from remora.jobs.loop import WorkerLoop
from remora.jobs.model import AttemptId, JobsConfig, Outcome, Phase
from remora.jobs.worker import AUTHORIZED, EXECUTING
from remora.sim.jobs.simulation import SimConfig, Simulation


class Held:
    """An execution that never runs: the test drives every step."""

    def done(self) -> bool:
        return False

    def abandon(self) -> None:
        return None


class HeldExecutor:
    """An executor that never runs what it is given."""

    def start(self, attempt: AttemptContext, done: Callable[[], None]) -> Held:
        return Held()


def dispatch(loop: WorkerLoop) -> tuple[bool, list[AttemptId]]:
    """One dispatch into a free slot: whether an attempt started, and the ones running."""
    started = loop._dispatch(loop.worker.concurrency - len(loop.running))
    return started, list(loop.running)


Loops = dict[str, WorkerLoop]


def retry_authorized_while_the_old_lease_is_live() -> tuple[
    Simulation, Loops, AttemptId, AttemptId
]:
    """w1's attempt 1 failed retryably but has not released its lease yet; w2 reserves and
    authorizes attempt 2, whose activation is refused."""
    cfg = JobsConfig(max_attempts=3, max_progress=2, lease_ticks=5, reservation_ticks=5)
    sim = Simulation(SimConfig(jobs=("j1",), workers=("w1", "w2"), jobs_config=cfg))
    registry = Registry()
    registry.handler("noop")(lambda ctx: "done")
    w1, w2 = sim.worker("w1"), sim.worker("w2")
    for w in (w1, w2):
        w.registry = registry
    # The production loops of w1 and w2, whose handlers never run: the test steps them.
    loops = {w.id: WorkerLoop(w, executor=HeldExecutor()) for w in (w1, w2)}
    sim.start("w1")
    sim.submit("j1")
    assert sim.reconciler.enqueue("j1")
    started, running = dispatch(loops["w1"])
    assert started
    (a1,) = running
    w1.send_outcome(a1, Outcome.RETRYABLE)
    assert w1.process_outcome(a1) == "AcceptRetryableFailureWithBudget"
    assert sim.reconciler.schedule_retry("j1")
    assert sim.reconciler.enqueue("j1")
    sim.start("w2")
    started, running = dispatch(loops["w2"])
    assert not started  # a1's lease is still live: activation refused
    a2 = AttemptId("j1", 2)
    assert w2.attempts[a2].state == AUTHORIZED
    return sim, loops, a1, a2


def test_a_refused_activation_is_retried_once_the_old_lease_is_released() -> None:
    sim, loops, a1, a2 = retry_authorized_while_the_old_lease_is_live()
    w1, w2 = sim.worker("w1"), sim.worker("w2")
    assert w1.release_lease(a1)
    assert dispatch(loops["w2"]) == (False, [])  # tried again at most once a tick
    sim.tick()
    started, running = dispatch(loops["w2"])
    assert started and running == [a2]
    assert w2.attempts[a2].state == EXECUTING
    assert sim.stores.durable.job("j1").phase is Phase.RUNNING


def test_a_refused_activation_is_not_retried_after_the_reservation_expired() -> None:
    sim, loops, a1, a2 = retry_authorized_while_the_old_lease_is_live()
    w1, w2 = sim.worker("w1"), sim.worker("w2")
    assert w1.release_lease(a1)
    for _ in range(sim.stores.config.reservation_ticks + 1):
        sim.tick()
    assert sim.reconciler.expire_reservation("j1")
    started, _ = dispatch(loops["w2"])
    assert not started
    assert w2.attempts[a2].state == AUTHORIZED  # left to the reaper
    assert "j1" not in w2.reservations  # and no longer tried
