"""Parallel machines over the job runtime: Hypothesis draws a prefix and 2-3 branches of
job-runtime steps, real threads run them, and the spec judges what they left.

A :class:`JobParallelMachine` draws a **sequential prefix** — the jobs submitted, the
incarnations started and the jobs enqueued, then up to ``prefix`` more steps of any actor
(time passing among them) — and **2-3 branches**, each the steps of one actor: an
incarnation (``reserve``, ``authorize``, ``activate``, ``renew``, ``advance``,
``send-outcome``, ``process-outcome``, the releases, a cooperative stop ...) or the
reconciler (``reconcile``, ``enqueue``, the expiries, ``reconciler-process-outcome``,
``schedule-retry``, ``reap``, ``cleanup-stage`` ...), the sequential job machines' step
vocabulary, each step with at most one fault selector on a write (``abort``,
``unknown-committed``, ``unknown-aborted``).  Each example runs ``runs`` (k) PCT schedules
(:func:`remora.sim.jobs.parallel.explore`), the branches on threads of their own against
the real stores — SQLite, a connection per actor to one file, and the memory coordination
store — and passes only when some interleaving of the recorded steps is a behaviour of
``Remora.tla`` ending in the stores' final state (:mod:`remora.sim.jobs.parallel`).

A failing example is exported as a ``job-parallel-v1`` document to
``artifacts/failures/parallel-jobs-<Machine>.json`` (or ``$REMORA_ARTIFACT_DIR``), re-run
``reproduce`` times on its recorded schedule first; ``remora sim-jobs --replay FILE`` runs
it again.  Planted stores are given as ``durable`` (a connection factory taking a path) and
``coordination`` (a :class:`~remora.jobs.coordination.MemoryCoordination` subclass), both at
the top level of a module (recorded by ``module:qualname``).
"""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

import attrs
from hypothesis import given, note
from hypothesis import settings as Settings
from hypothesis import strategies as st

from remora.faults import Outcome
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.io import JobOperation
from remora.jobs.model import Outcome as JobOutcome
from remora.outputs import write_output
from remora.sim.artifacts import failures_dir
from remora.sim.jobs.parallel import (
    RECONCILER,
    DurableFactory,
    JobParallelExample,
    JobRunResult,
    Services,
    example_for,
    explore,
    run_once,
)
from remora.sim.jobs.trace import JobConfig, JobFault, JobStep
from remora.sim.runs import reference_of
from remora.sim.schedule import PCT
from remora.testing.machines import _final_run
from remora.testing.parallel import machine_test_case

#: Scheduling points a step takes, about (the change points' horizon before a run).
STEPS_PER_STEP = 4

WORKER_OPS = (
    "reserve",
    "authorize",
    "activate",
    "renew",
    "advance",
    "send-outcome",
    "process-outcome",
    "release-reservation",
    "release-lease",
    "record-stop",
    "cooperative-stop",
    "report-progress",
)
RECONCILER_JOB_OPS = (
    "reconcile",
    "enqueue",
    "expire-reservation",
    "schedule-retry",
    "clean-terminal",
    "reconciler-release-reservation",
    "finalize-cancel",
)
RECONCILER_ATTEMPT_OPS = (
    "expire-lease",
    "reconciler-process-outcome",
    "reap",
    "cleanup-stage",
    "reconciler-release-lease",
)
FAULTED = (JobOperation.DURABLE_WRITE, JobOperation.COORD_WRITE)
FAULT_OUTCOMES = (Outcome.ABORT, Outcome.UNKNOWN_COMMITTED, Outcome.UNKNOWN_ABORTED)


def actor_steps(actor: str, jobs: tuple[str, ...], max_token: int) -> st.SearchStrategy[JobStep]:
    """One step of ``actor`` (an incarnation or :data:`RECONCILER`), maybe with a fault."""
    job = st.sampled_from(jobs)
    token = st.integers(1, max_token)
    faults = _faults()
    if actor == RECONCILER:
        per_job = st.builds(
            lambda op, j, f: JobStep(op, job=None if op == "reconcile" else j, faults=f),
            st.sampled_from(RECONCILER_JOB_OPS),
            job,
            faults,
        )
        per_attempt = st.builds(
            lambda op, j, t, f: JobStep(op, job=j, token=t, faults=f),
            st.sampled_from(RECONCILER_ATTEMPT_OPS),
            job,
            token,
            faults,
        )
        return st.one_of(per_job, per_attempt)

    def worker_step(op: str, j: str, t: int, amount: int, out: JobOutcome, f: Any) -> JobStep:
        if op in ("reserve", "authorize", "release-reservation"):
            return JobStep(op, worker=actor, job=j, faults=f)
        if op == "advance":
            return JobStep(op, worker=actor, job=j, token=t, amount=amount, faults=f)
        if op == "send-outcome":
            return JobStep(op, worker=actor, job=j, token=t, outcome=out, faults=f)
        return JobStep(op, worker=actor, job=j, token=t, faults=f)

    return st.builds(
        worker_step,
        st.sampled_from(WORKER_OPS),
        job,
        token,
        st.integers(1, 2),
        st.sampled_from(list(JobOutcome)),
        faults,
    )


#: An attempt's life as one incarnation runs it, in protocol order (a worker program keeps
#: a drawn subsequence of it: most steps, some skipped — a run that stops short, a step
#: lost — so that its steps mostly find what they need, as the sequential machines'
#: preconditions make sure).
LIFE = (
    "reserve",
    "authorize",
    "activate",
    "renew",
    "report-progress",
    "advance",
    "send-outcome",
    "process-outcome",
    "record-stop",
    "release-lease",
)


def worker_program(
    actor: str, jobs: tuple[str, ...], max_token: int
) -> st.SearchStrategy[list[JobStep]]:
    """Steps of incarnation ``actor``: one or two attempts' lives (:data:`LIFE`, a drawn
    subsequence each, on a drawn job and token), with an odd step of its vocabulary mixed
    in now and then."""

    @st.composite
    def draw(draw: st.DrawFn) -> list[JobStep]:
        steps: list[JobStep] = []
        for _ in range(draw(st.integers(1, 2), label="lives")):
            j, t = draw(_attempt(jobs, max_token), label="attempt")
            out = draw(st.sampled_from(list(JobOutcome)), label="outcome")
            for op in LIFE:
                if draw(st.integers(0, 4), label=op) == 4:
                    continue  # skipped one time in five (shrinks to kept)
                faults = draw(_faults(), label="faults")
                if op in ("reserve", "authorize"):
                    steps.append(JobStep(op, worker=actor, job=j, faults=faults))
                elif op == "advance":
                    steps.append(JobStep(op, worker=actor, job=j, token=t, amount=2, faults=faults))
                elif op == "send-outcome":
                    steps.append(
                        JobStep(op, worker=actor, job=j, token=t, outcome=out, faults=faults)
                    )
                else:
                    steps.append(JobStep(op, worker=actor, job=j, token=t, faults=faults))
            if draw(st.integers(0, 3), label="odd step") == 3:
                odd = draw(actor_steps(actor, jobs, max_token), label="odd")
                steps.insert(draw(st.integers(0, len(steps)), label="at"), odd)
        return steps or [JobStep("reserve", worker=actor, job=jobs[0])]

    return draw()


def _attempt(jobs: tuple[str, ...], max_token: int) -> st.SearchStrategy[tuple[str, int]]:
    """A job and a token, the first job's first attempt three times in four: the actors
    of one example mostly meet on one attempt (where the races are)."""
    return st.integers(0, 3).flatmap(
        lambda k: (
            st.just((jobs[0], 1))
            if k < 3
            else st.tuples(st.sampled_from(jobs), st.integers(1, max_token))
        )
    )


#: What the reconciler does about one attempt, in the order of its pass.
PASS = (
    "enqueue",
    "expire-reservation",
    "reconciler-process-outcome",
    "expire-lease",
    "schedule-retry",
    "reap",
    "cleanup-stage",
    "reconciler-release-lease",
    "reconciler-release-reservation",
    "clean-terminal",
)


def reconciler_program(jobs: tuple[str, ...], max_token: int) -> st.SearchStrategy[list[JobStep]]:
    """The reconciler's steps: one or two passes over an attempt (:data:`PASS`, each step
    kept one time in two), or a whole ``reconcile``."""

    @st.composite
    def draw(draw: st.DrawFn) -> list[JobStep]:
        steps: list[JobStep] = []
        for _ in range(draw(st.integers(1, 2), label="passes")):
            if draw(st.integers(0, 3), label="whole") == 3:
                steps.append(JobStep("reconcile"))
                continue
            j, t = draw(_attempt(jobs, max_token), label="attempt")
            for op in PASS:
                if not draw(st.booleans(), label=op):
                    continue
                faults = draw(_faults(), label="faults")
                token = t if op in RECONCILER_ATTEMPT_OPS else None
                steps.append(JobStep(op, job=j, token=token, faults=faults))
        return steps or [JobStep("reconcile")]

    return draw()


def _faults() -> st.SearchStrategy[tuple[JobFault, ...]]:
    """No fault three times in four, else one on the step's first write."""
    return st.integers(0, 3).flatmap(
        lambda k: (
            st.just(())
            if k
            else st.builds(
                lambda op, out: (JobFault(op, 1, out),),
                st.sampled_from(FAULTED),
                st.sampled_from(FAULT_OUTCOMES),
            )
        )
    )


def program(
    actor: str, jobs: tuple[str, ...], max_token: int, low: int, high: int
) -> st.SearchStrategy[list[JobStep]]:
    """A branch's steps: a worker program, or ``low..high`` reconciler steps."""
    if actor == RECONCILER:
        return reconciler_program(jobs, max_token)
    return worker_program(actor, jobs, max_token)


class JobParallelFailure(AssertionError):
    """A parallel job example failed (``reproduced`` of ``runs`` re-runs failed again)."""

    def __init__(self, failure: str, detail: str, path: str, reproduced: int, runs: int) -> None:
        super().__init__(
            f"{failure}: {detail}\nreproduced in {reproduced} of {runs} runs of the recorded "
            f"schedule\nreplay: remora sim-jobs --replay {path}"
        )
        self.failure = failure
        self.detail = detail
        self.path = path
        self.reproduced = reproduced
        self.runs = runs


class JobParallelMachine:
    """The base of a parallel job machine (module docstring): set the shape and the stores."""

    jobs: ClassVar[tuple[str, ...]] = ("j1", "j2")
    workers: ClassVar[tuple[str, ...]] = ("w1", "w2")
    concurrency: ClassVar[int] = 2
    max_attempts: ClassVar[int] = 2
    max_progress: ClassVar[int] = 2
    lease_ticks: ClassVar[int] = 1
    reservation_ticks: ClassVar[int] = 1
    global_limit: ClassVar[int] = 3
    #: ``sqlite`` (a file, the memory coordination store) or ``postgres`` (the database and
    #: Redis of :attr:`services`, which the caller sets).
    store: ClassVar[str] = "sqlite"
    services: ClassVar[Services | None] = None
    durable: ClassVar[DurableFactory | None] = None
    coordination: ClassVar[type[MemoryCoordination] | None] = None
    branches: ClassVar[tuple[int, int]] = (2, 3)
    prefix: ClassVar[tuple[int, int]] = (0, 2)
    length: ClassVar[tuple[int, int]] = (1, 5)
    depth: ClassVar[int] = 3
    runs: ClassVar[int] = 4
    reproduce: ClassVar[int] = 5
    stall_ms: ClassVar[int] = 50
    stats: ClassVar[dict[str, int]]
    _failed: ClassVar[dict[str, tuple[JobParallelExample, JobRunResult]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.stats = {}
        cls._failed = {}

    @classmethod
    def config(cls) -> JobConfig:
        return JobConfig(
            jobs=cls.jobs,
            workers=cls.workers,
            concurrency=cls.concurrency,
            max_attempts=cls.max_attempts,
            max_progress=cls.max_progress,
            lease_ticks=cls.lease_ticks,
            reservation_ticks=cls.reservation_ticks,
            global_limit=cls.global_limit,
            max_coord_losses=0,
            max_partitions=0,
        )

    @classmethod
    def examples(cls) -> st.SearchStrategy[JobParallelExample]:
        config = cls.config()
        actors = (*cls.workers, RECONCILER)
        durable = None if cls.durable is None else reference_of(cls.durable)
        coordination = None if cls.coordination is None else reference_of(cls.coordination)

        @st.composite
        def draw(draw: st.DrawFn) -> JobParallelExample:
            setup = [JobStep("submit", job=j) for j in cls.jobs]
            setup += [JobStep("start", worker=w) for w in cls.workers]
            setup += [JobStep("enqueue", job=j) for j in cls.jobs]
            # Mid-protocol starts: each incarnation may have gone part of an attempt's
            # life already (a life cut short), and time may have passed.
            more: list[JobStep] = []
            for w in cls.workers:
                if draw(st.integers(0, 2), label=f"{w} went ahead") == 0:
                    continue
                life = draw(worker_program(w, cls.jobs, cls.max_attempts), label=f"{w} ahead")
                more += life[: draw(st.integers(1, len(life)), label="cut")]
            more += [JobStep("tick")] * draw(st.integers(*cls.prefix), label="ticks")
            n = draw(st.integers(*cls.branches), label="branches")
            chosen = draw(st.permutations(actors), label="actors")[:n]
            branches = [
                (
                    a,
                    draw(
                        program(a, cls.jobs, cls.max_attempts, *cls.length),
                        label=f"branch {a}",
                    ),
                )
                for a in chosen
            ]
            horizon = STEPS_PER_STEP * sum(len(s) for _, s in branches)
            priorities = draw(st.permutations(range(n)), label="priorities")
            points = draw(
                st.lists(st.integers(0, horizon), max_size=cls.depth - 1, unique=True),
                label="change points",
            )
            example = example_for(
                config,
                setup + more,
                branches,
                PCT(tuple(priorities), tuple(sorted(points))),
                durable=durable,
                coordination=coordination,
                generator=f"hypothesis:{cls.__name__}",
                store=cls.store,
            )
            return attrs.evolve(example, stall_ms=cls.stall_ms)

        return draw()

    @classmethod
    def check(cls, example: JobParallelExample) -> None:
        """Run ``example`` under up to ``runs`` schedules; on a failure export it and raise
        :class:`JobParallelFailure`."""
        note(describe(example))
        stats = cls.stats
        ran, results = explore(example, cls.runs, cls.depth, cls.services)
        for result in results:
            stats["runs"] = stats.get("runs", 0) + 1
            stats["steps"] = stats.get("steps", 0) + result.steps
            stats["decisions"] = stats.get("decisions", 0) + len(result.schedule.decisions)
            stats["stalls"] = stats.get("stalls", 0) + result.schedule.stalls
            for _, kind in result.results:
                stats[f"result {kind}"] = stats.get(f"result {kind}", 0) + 1
        result = results[-1]
        final = _final_run()
        key = example.dumps()
        if result.failure is None:
            seen = cls._failed.get(key)
            if seen is None or not final:
                return
            ran, result = seen
        else:
            cls._failed[key] = (ran, result)
        assert result.failure is not None
        stats["failures"] = stats.get("failures", 0) + 1
        reproduced, runs = 1, 1
        if final:
            runs = cls.reproduce
            reproduced = sum(
                run_once(ran, ran.schedule_policy(recorded=True), cls.services).failure is not None
                for _ in range(runs)
            )
        recorded = attrs.evolve(ran, failure=result.failure, detail=result.detail)
        path = failures_dir() / f"parallel-jobs-{cls.__name__}.json"
        if final or not path.exists():
            write_output(path, recorded.dumps(), parents=True)
        raise JobParallelFailure(result.failure, result.detail, str(path), reproduced, runs)

    @classmethod
    def run(cls, settings: Settings | None = None) -> None:
        """Run the machine under ``settings`` (default: the loaded profile's)."""
        cls._failed = {}

        @given(cls.examples())
        def test(example: JobParallelExample) -> None:
            cls.check(example)

        if settings is not None:
            test = settings(test)
        test()

    @classmethod
    def test_case(cls) -> type[unittest.TestCase]:
        return machine_test_case(cls.__name__, cls.run)


def describe(example: JobParallelExample) -> str:
    lines = ["prefix: " + ", ".join(s.label() for s in example.prefix)]
    for actor, steps in example.branches:
        lines.append(f"{actor}: " + ", ".join(s.label() for s in steps))
    lines.append(f"schedule: {example.policy}")
    return "\n".join(lines)


__all__ = ["JobParallelFailure", "JobParallelMachine", "actor_steps", "describe"]
