"""A job's life under a link cut, deterministically: the real :class:`WorkerLoop` driven turn
by turn on the simulation's logical clock, its handler stepped by the test, and a fault hook
that cuts the process's link to one service at the n-th call of one call site and restores
it a while later (``tests/jobs/test_outage.py``).

A *call site* is where a runtime step reaches a store through the fault seam
(:func:`remora.jobs.io.io_call`): the actor (the worker ``w1`` or its ``reconciler``), the
:class:`~remora.jobs.io.JobOperation`, and the runtime's public step that made the call
(``Worker.advance``, ``Dispatcher.dispatch``, ``Reconciler.enqueue`` …, read from the call
stack).  A fault-free run lists every site of a job's life with its number of calls; a cut
run fails every call of the process (worker and reconciler alike) to that site's service
from the chosen call on, until ``window`` seconds of logical time have passed — a link
down, then back."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from remora.clock import LogicalClock
from remora.context import Context
from remora.faults import COMMIT, At, FaultDecision, IOCall, IOReport, Outcome
from remora.jobs.attempt import AttemptContext
from remora.jobs.handlers import Registry
from remora.jobs.io import SERVICE_OF, JobOperation
from remora.jobs.loop import Wait, WorkerLoop
from remora.jobs.model import AttemptId, JobsConfig, Phase, Service
from remora.jobs.model import Outcome as JobOutcome
from remora.jobs.settlement import release, retry_step, settle
from remora.jobs.worker import EXECUTING, Worker
from remora.sim.jobs.refinement import (
    ValidationReport,
    constants_of_run,
    merge_records,
    validate_run,
)
from remora.sim.jobs.simulation import SimConfig, Simulation
from remora.worker.outage import OutageWatch, outage_policy
from remora.worker.retry import RetryPolicy

#: The limits of the run: a lease of 3 s and reservations of 2 s (longer than a cut).
CONFIG = JobsConfig(
    max_attempts=3,
    max_progress=2,
    tick_ms=100,
    lease_ticks=30,
    reservation_ticks=20,
    global_limit=1,
    max_credential_intents=2,
)
WINDOW = 1.0  # seconds of logical time a cut lasts
BUDGET = 10.0  # the outage budget (--outage-budget)
TURNS = 20_000  # a bound on the loop's turns: a run that needs more is stuck
#: Seconds a handler runs (logical time) before the test steps it: past a heartbeat
#: (every ``down_after / 3`` = 3 s) and many lease renewals.
RUNS_FOR = 3.5

#: The modules whose public functions are the runtime's steps (a call site's name).
STEP_MODULES = frozenset(
    {"worker", "reconciler", "attempt", "settlement", "loop", "stores", "credentials"}
)
JOBS_DIR = Path(sys.modules["remora.jobs"].__file__ or "").parent


def call_site() -> str:
    """The innermost public step of the runtime on the caller's stack."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        path = Path(code.co_filename)
        name = code.co_qualname
        if (
            path.parent == JOBS_DIR
            and path.stem in STEP_MODULES
            and "<" not in name
            and not name.rsplit(".", 1)[-1].startswith("_")
        ):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


@attrs.frozen(order=True)
class Site:
    actor: str
    operation: str
    step: str

    def __str__(self) -> str:
        return f"{self.actor}:{self.operation}@{self.step}"


@attrs.frozen
class Cut:
    """Cut the link at the ``n``-th call of ``site``."""

    site: Site
    n: int


class CutHook:
    """The fault hook: counts each site's calls (once armed) and plays the cut."""

    def __init__(self, clock: LogicalClock, cut: Cut | None, window: float = WINDOW) -> None:
        self.clock = clock
        self.cut = cut
        self.window = window
        self.armed = False
        self.actors: dict[int, str] = {}
        self.calls: Counter[Site] = Counter()
        self.down: Service | None = None
        self.until = 0.0
        self.cut_at: float | None = None
        self.failed = 0  # calls the cut failed

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        actor = self.actors.get(id(ctx))
        if not self.armed or actor is None:
            return COMMIT
        assert isinstance(call.operation, JobOperation)
        service = SERVICE_OF[call.operation]
        site = Site(actor, call.operation.value, call_site())
        self.calls[site] += 1
        now = self.clock.now()
        if self.down is not None and now >= self.until:
            self.down = None  # the link is back
        if self.cut is not None and site == self.cut.site and self.calls[site] == self.cut.n:
            self.down, self.until, self.cut_at = service, now + self.window, now
        if self.down is service:
            self.failed += 1
            return FaultDecision(Outcome.ABORT, selected=True)
        return COMMIT

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None:
        return None

    def returned(self, call: IOCall, report: IOReport) -> None:
        return None


def work(ctx: Any) -> str:
    """Every kind of call a handler makes: stage, report, checkpoint, a secret, a look at
    ``cancelled``; then the output."""
    ctx.advance(1, b"half")
    ctx.checkpoint()
    ctx.put_secret("k")
    assert not ctx.cancelled
    return "done"


def settle_without_waiting(
    w: Worker,
    a: AttemptId,
    outcome: JobOutcome | None,
    error: str,
    shutting_down: Callable[[], bool] = lambda: False,
) -> None:
    """The settlement up to its wait for a stop condition (when its outcome could not be
    sent, :func:`~remora.jobs.settlement.settle`): that wait is the one part of a job's
    life that waits on another actor — the reaper expiring the lease — so the driver takes
    it one try per turn instead (:meth:`Stepped.poll`)."""
    settle(w, a, outcome, error, lambda: True)


class Stepped:
    """An attempt whose handler runs when the driver calls :meth:`step`, and whose
    settlement then waits one try per turn (:meth:`poll`), as a thread's would between
    its pauses."""

    def __init__(self, attempt: AttemptContext, done: Any, at: float) -> None:
        self.attempt = attempt
        self.on_done = done
        self.at = at
        self.ran = False
        self.finished = False

    def done(self) -> bool:
        return self.finished

    def abandon(self) -> None:
        pass

    def step(self) -> None:
        self.attempt.execute()
        self.ran = True
        self.poll()

    def poll(self) -> None:
        """One try of the settlement's wait: ``CooperativeStop`` once a stop condition
        holds, then the stop recorded and the lease released."""
        actx = self.attempt
        w, a = actx.worker, actx.attempt
        local = w.attempts[a]
        waiting = local.state == EXECUTING and not local.finished
        waiting = waiting and w.up and not actx.stop_requested
        if waiting and not retry_step(w, lambda: w.cooperative_stop(a)):
            return
        release(w, a)
        self.finished = True
        self.on_done()


class SteppedExecutor:
    def __init__(self, clock: LogicalClock) -> None:
        self.clock = clock
        self.started: list[Stepped] = []

    def start(self, attempt: AttemptContext, done: Any) -> Stepped:
        run = Stepped(attempt, done, self.clock.now())
        self.started.append(run)
        return run


@attrs.frozen
class Result:
    phase: Phase
    output: bytes | None
    attempts: int
    accepted: int
    failed: list[BaseException]
    hook: CutHook
    sim: Simulation
    turns: int

    def validate(self) -> ValidationReport:
        records = merge_records(self.sim.recorder.steps, self.sim.stores.durable.log())
        constants = constants_of_run(records, ["j1"], ["w1"], CONFIG, local_limit=1)
        return validate_run(records, constants, CONFIG)


def run_job(
    cut: Cut | None,
    *,
    window: float = WINDOW,
    budget: float | None = BUDGET,
    retry: RetryPolicy | None = None,
) -> Result:
    """One job's life, from ``Enqueue`` to the worker's shutdown, with ``cut`` (None: no
    fault).  ``budget`` None: the loop has no outage watch; ``retry``: the worker's step
    retry (default: the outage budget's)."""
    sim = Simulation(SimConfig(jobs=("j1",), workers=("w1",), jobs_config=CONFIG))
    hook = CutHook(sim.clock, cut, window)
    registry = Registry()
    registry.handler("work")(work)
    w = sim.worker("w1")
    w.registry = registry
    w.retry = retry or outage_policy(BUDGET if budget is None else budget)
    for actor in (w.actor, sim.reconciler.actor, sim.client):
        actor.hook = hook
    hook.actors = {id(w.actor.ctx): "w1", id(sim.reconciler.actor.ctx): "reconciler"}
    executor = SteppedExecutor(sim.clock)
    watch = None if budget is None else OutageWatch(budget, sim.clock)
    loop = WorkerLoop(
        w,
        executor=executor,
        reconciler=sim.reconciler,
        poll=0.05,
        reconcile_every=0.5,
        outage=watch,
        complete=settle_without_waiting,
    )
    sim.start("w1")
    sim.submit("j1", "work")
    hook.armed = True
    next_pass = 0.0
    turns = 0
    for turns in range(1, TURNS + 1):  # noqa: B007  (the count is reported)
        now = sim.clock.now()
        if now >= next_pass:
            next_pass = now + loop.schedule.turn()
        pause = loop.turn()
        if pause is None:
            break
        if sim.stores.durable.job("j1").phase.terminal:
            loop.stop.set()
        for run in executor.started:
            if not run.ran and sim.clock.now() - run.at >= RUNS_FOR:
                run.step()  # the handler, after it ran a while (tended meanwhile)
            elif run.ran and not run.finished:
                run.poll()
        if pause.wait is not Wait.NOTHING:
            sim.clock.advance(max(1, round(pause.seconds * 1000)))
    loop.close()
    job = sim.stores.durable.job("j1")
    log = sim.stores.durable.log()
    return Result(
        phase=job.phase,
        output=sim.stores.result("j1"),
        attempts=job.current_token,
        accepted=sum(1 for e in log if e.key == "j1" and e.action == "AcceptSuccess"),
        failed=list(loop.failed),
        hook=hook,
        sim=sim,
        turns=turns,
    )


def sites() -> list[tuple[Site, int]]:
    """Every call site of a fault-free job's life, with its number of calls."""
    clean = run_job(None)
    assert clean.phase is Phase.SUCCEEDED, clean
    return sorted(clean.hook.calls.items())


__all__ = ["CONFIG", "Cut", "CutHook", "Result", "Site", "call_site", "run_job", "sites"]
