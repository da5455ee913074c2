"""The production loop (:class:`remora.jobs.loop.WorkerLoop`) driven one turn at a time on
the simulation's logical clock, with an executor that runs a handler only when the test
steps it: no thread, no wall clock — the same loop ``remora jobs worker`` runs, every turn
and every handler run refinement-checked against the spec.

This is what a deterministic driver of the real loop (a state machine) builds on: a turn is
one method, the handlers run through the executor interface, the reconciler's schedule is
a unit of its own, and the loop never learns who drives it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from remora.errors import WorkerDown
from remora.jobs.attempt import AttemptContext
from remora.jobs.handlers import Registry
from remora.jobs.loop import AGAIN, Wait, WorkerLoop
from remora.jobs.model import Phase
from remora.sim.jobs.refinement import RefinementChecker
from remora.sim.jobs.simulation import SMALL, SimConfig, Simulation


class Stepped:
    """An attempt whose handler runs (with its settlement) when :meth:`step` is called."""

    def __init__(self, attempt: AttemptContext, done: Callable[[], None]) -> None:
        self.attempt = attempt
        self.on_done = done
        self.finished = False
        self.abandoned = False

    def done(self) -> bool:
        return self.finished

    def abandon(self) -> None:
        self.abandoned = True

    def step(self) -> None:
        self.attempt.execute()
        self.finished = True
        self.on_done()


class SteppedExecutor:
    """Starts nothing by itself: the test steps each attempt."""

    def __init__(self) -> None:
        self.started: list[Stepped] = []

    def start(self, attempt: AttemptContext, done: Callable[[], None]) -> Stepped:
        run = Stepped(attempt, done)
        self.started.append(run)
        return run


def setup(handler: Callable[[Any], Any]) -> tuple[Simulation, RefinementChecker, WorkerLoop]:
    sim = Simulation(SimConfig(jobs=("j1", "j2"), workers=("w1",)))
    registry = Registry()
    registry.handler("noop")(handler)
    w = sim.worker("w1")
    w.registry = registry
    loop = WorkerLoop(w, executor=SteppedExecutor(), reconciler=sim.reconciler, poll=0.5)
    return sim, RefinementChecker(sim), loop


def staged(ctx: Any) -> str:
    ctx.advance(1, b"half")
    ctx.checkpoint()
    return "done"


def run_one_job() -> tuple[list[tuple[str, str]], Simulation]:
    sim, chk, loop = setup(staged)
    executor = loop.executor
    assert isinstance(executor, SteppedExecutor)
    chk.step(lambda: sim.start("w1"))
    chk.step(lambda: sim.submit("j1"))
    assert chk.step(loop.schedule.turn) == 0.5  # a reconcile pass: Enqueue(j1)
    assert chk.step(loop.turn) == AGAIN  # Reserve, AuthorizeAttempt, ActivateAttempt
    pause = chk.step(loop.turn)  # the one slot is busy: wait for the handler
    assert pause is not None and pause.wait is Wait.HANDLER and pause.seconds == 0.5
    (run,) = executor.started
    chk.step(run.step)  # the handler, then SendOutcome, ProcessOutcome, ReleaseLease
    pause = chk.step(loop.turn)  # the attempt is forgotten; nothing queued: wait for work
    assert pause is not None and pause.wait is Wait.WORK
    loop.stop.set()
    assert chk.step(loop.turn) is None  # stopping with nothing running: the loop ends
    chk.step(loop.close)  # the incarnation goes down (CrashWorker)
    assert not loop.failed
    steps = [(r.actor, r.action) for r in sim.recorder.steps if r.action]
    return steps, sim


def test_the_real_loop_runs_a_job_turn_by_turn_on_the_logical_clock() -> None:
    steps, sim = run_one_job()
    job = sim.stores.durable.job("j1")
    assert job.phase is Phase.SUCCEEDED
    assert sim.stores.result("j1") == b"done"
    assert [a for _, a in steps] == [
        "StartIncarnation",
        "Enqueue",
        "Reserve",
        "AuthorizeAttempt",
        "ActivateAttempt",
        "AdvanceAttempt",
        "ReportProgress",
        "PersistCheckpoint",
        "AdvanceAttempt",
        "SendOutcome",
        "AcceptSuccess",
        "ReleaseLease",
        "CrashWorker",
    ]
    again, _ = run_one_job()
    assert again == steps  # deterministic: the same turns take the same steps


def test_a_canceled_context_ends_the_loop_as_the_process_end_would() -> None:
    """The incarnation's context is its process: canceled (a SIGKILL in simulation), the
    next turn ends the loop with :class:`WorkerDown`, and nothing is recorded."""
    sim, chk, loop = setup(staged)
    chk.step(lambda: sim.start("w1"))
    chk.step(lambda: sim.submit("j1"))
    chk.step(loop.schedule.turn)
    assert chk.step(loop.turn) == AGAIN
    recorded = len(sim.recorder.steps)
    chk.step(lambda: sim.crash("w1"))
    assert chk.step(loop.turn) is None
    assert isinstance(loop.failed[0], WorkerDown)
    assert len(sim.recorder.steps) == recorded  # a stutter: no step of the killed one


def test_a_batching_loop_reserves_in_one_call_and_reads_handlers_in_one_statement() -> None:
    """With two slots and ``batch=2`` one turn reserves both queued jobs in one
    coordination call (two ``Reserve`` steps, refinement-checked) and learns their handlers
    from one durable read (``Dispatcher.prefetch``), not one read per job; a job whose
    handler the worker lacks stays queued."""
    sim = Simulation(
        SimConfig(
            jobs=("j1", "j2", "j3"),
            workers=("w1",),
            concurrency=2,
            jobs_config=attrs.evolve(SMALL, global_limit=3),
        )
    )
    registry = Registry()
    registry.handler("noop")(staged)
    w = sim.worker("w1")
    w.registry = registry
    loop = WorkerLoop(w, executor=SteppedExecutor(), reconciler=sim.reconciler, poll=0.5, batch=2)
    chk = RefinementChecker(sim)
    chk.step(lambda: sim.start("w1"))
    chk.step(lambda: sim.stores.submit(sim.client, "j1", "other", None))
    chk.step(lambda: sim.submit("j2"))
    chk.step(lambda: sim.submit("j3"))
    chk.step(loop.schedule.turn)  # Enqueue of the three
    durable = sim.stores.durable
    calls = {"handlers": 0, "job": 0, "reserve_batch": 0}
    real = (durable.handlers, durable.job, w.stores.coordination.reserve_batch)

    def counted(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return f(*args, **kwargs)

        return call

    durable.handlers = counted("handlers", real[0])  # type: ignore[method-assign]
    durable.job = counted("job", real[1])  # type: ignore[method-assign]
    coord = w.stores.coordination
    coord.reserve_batch = counted("reserve_batch", real[2])  # type: ignore[method-assign]
    assert chk.step(loop.turn) == AGAIN
    assert calls == {"handlers": 1, "job": 0, "reserve_batch": 1}, calls
    assert sorted(a.job for a in w.attempts) == ["j2", "j3"]
    assert chk.actions.get("Reserve") == 2
    assert "j1" in coord.snapshot().queued  # its handler is not this worker's
