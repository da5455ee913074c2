"""Parallel machines: Hypothesis draws concurrent programs, real threads run them, and a
linearizability search over the sequential model judges the result.

A :class:`ParallelMachine` draws a source (the same :func:`source_histories` as the
sequential machines), a **sequential prefix** and **2-3 parallel branches** of commands from
the sequential machines' vocabulary — store calls (``claim``/``observe``/``process`` with
the fault seam's outcomes) for a ``store`` target, the schedule actors (``assign``,
``seek``, ``process``, ``revoke``, ``stop`` with fault selectors from
:func:`~remora.testing.strategies.decode_selector`) for a ``lifecycle`` target — and the
parameters of a PCT schedule (the branches' priorities and up to ``depth - 1`` change
points).  Each example runs ``runs`` (k) schedules, each on fresh stores — its own and
k - 1 seeded PCT variants over the horizon its first run measured
(:func:`remora.sim.parallel.explore`): the branches on threads of their own, interleaved at
the scheduling points by the PCT scheduler.  It passes when the history is linearizable under
:class:`~remora.sim.parallel.StoreModel` and the store's final state, the outputs are the
oracle's, and (lifecycle) each command's result and what every lifetime holds are right.
Hypothesis shrinks the prefix, the branches, the commands and the schedule.

A failing example is exported as a ``worker-parallel-v1`` document — the commands and the
choices its scheduler made — to ``artifacts/failures/parallel-<Machine>.json`` (or
``$REMORA_ARTIFACT_DIR``), first when found and again for the final, shrunk example, which
is re-run ``reproduce`` times on its recorded schedule first: the failure says how often
it came back (engines that block inside a statement cannot be forced exactly).  ``remora
sim-worker --replay FILE`` re-runs it without Hypothesis.

Run one over your own backend (``docs/stateful.md``, "Parallel machines")::

    class MyStoreInParallel(ParallelMachine):
        backend = my_backend_factory   # module-level: called with nothing, one shared object
        partitions = 2

    TestMyStoreInParallel = MyStoreInParallel.TestCase
"""

from __future__ import annotations

import os
import unittest
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import attrs
from hypothesis import given, note
from hypothesis import settings as Settings
from hypothesis import strategies as st

from remora.domain import SourceRecord
from remora.faults import OUTCOMES_FOR, Operation, Outcome
from remora.outputs import write_output
from remora.sim.artifacts import failures_dir, replay_command
from remora.sim.parallel import (
    Command,
    Found,
    ParallelExample,
    RunResult,
    Site,
    StoreCommand,
    TargetConfig,
    describe_command,
    example_for,
    explore,
    run_once,
    site,
)
from remora.sim.runs import reference_of
from remora.sim.schedule import PCT
from remora.sim.trace import FaultSelector, Step
from remora.store import Backend
from remora.testing.machines import _final_run
from remora.testing.strategies import _calls, _operations, decode_selector, source_histories
from remora.worker import Lifecycle

PG_DSN_ENV = "REMORA_PG_DSN"
STEPS_PER_COMMAND = 6
"""How many scheduling points a command passes, roughly: change points are drawn in
``[0, STEPS_PER_COMMAND x branch commands]``."""

_STORE_OPERATIONS = (
    Operation.CLAIM,
    Operation.PROCESS,
    Operation.OBSERVE,
    Operation.PROCESS,
    Operation.CLAIM,
    Operation.PROCESS,
)
"""A store command's operation digit: processes and claims race, reads only watch."""
_OUTCOME_DIGITS = (
    Outcome.COMMIT,
    Outcome.COMMIT,
    Outcome.COMMIT,
    Outcome.COMMIT,
    Outcome.ABORT,
    Outcome.UNKNOWN_COMMITTED,
    Outcome.UNKNOWN_ABORTED,
)
"""An outcome digit: mostly a plain commit; the seam's other outcomes (a read gets commit
for the unknown ones, which it does not accept)."""

_NEW_ACTORS = ("assign",) * 13 + ("seek", "process", "stop")
_HOLDING_ACTORS = (
    ("process",) * 8 + ("seek",) * 2 + ("assign",) * 2 + ("revoke",) * 2 + ("stop", "process")
)
_LATE_ACTORS = ("assign", "seek", "process", "revoke", "stop")
"""A lifecycle command's actor digit (16 values), read against what the lifetime did so far
in the generating order: a fresh (or revoked) lifetime mostly assigns, a holding one mostly
processes, a stopped one gets late callbacks — as the sequential machines' preconditions
and ``pick`` keep their runs productive.  Digit 0 is the productive choice."""


def store_commands(partitions: int, faults: bool = True) -> st.SearchStrategy[StoreCommand]:
    """A store session's calls: one integer each (mixed radix: operation, partition,
    outcome), shrinking to ``claim`` of partition 0 with a plain commit."""
    outcomes = len(_OUTCOME_DIGITS) if faults else 1
    size = len(_STORE_OPERATIONS) * partitions * outcomes

    def decode(code: int) -> StoreCommand:
        code, op = divmod(code, len(_STORE_OPERATIONS))
        code, partition = divmod(code, partitions)
        operation = _STORE_OPERATIONS[op]
        outcome = _OUTCOME_DIGITS[code % outcomes]
        if outcome not in OUTCOMES_FOR[operation]:
            outcome = Outcome.COMMIT
        return StoreCommand(operation, partition, outcome)

    return st.integers(0, size - 1).map(decode)


def _fault_codes(actor: str) -> int:
    """Selector codes without a delay or an interleave (the lowest digits of
    :func:`~remora.testing.strategies.decode_selector`)."""
    return len(_operations(actor)) * 4 * len(_calls(3))


def lifecycle_program(
    partitions: int, lifetimes: int, faults: bool = True
) -> Callable[[st.DrawFn, int, int, list[tuple[int, int]]], tuple[list[Step], list[list[Step]]]]:
    """How a lifecycle program is drawn: ``draw_program(draw, prefix_min, prefix_max,
    branch_sizes)`` returns the prefix and the branches.  Each step is an actor, a lifetime,
    a partition and, for an I/O actor, no fault or one fault selector (no interleave, no
    delay: the threads are the interleaving); the actor digit is read against the lifetime's
    state after the prefix and the branch's earlier steps (:data:`_NEW_ACTORS`)."""

    def step(draw: st.DrawFn, state: dict[int, str]) -> Step:
        lifetime = draw(st.integers(0, lifetimes - 1))
        digit = draw(st.integers(0, 15))
        now = state.get(lifetime, "new")
        if now == "new":
            actor = _NEW_ACTORS[digit]
        elif now == "holding":
            actor = _HOLDING_ACTORS[digit]
        else:
            actor = _LATE_ACTORS[digit % len(_LATE_ACTORS)]
        if now != "stopped":
            state[lifetime] = {"assign": "holding", "revoke": "new", "stop": "stopped"}.get(
                actor, now
            )
        if actor in ("revoke", "stop"):
            return Step(actor, lifetime)  # type: ignore[arg-type]
        partition = draw(st.integers(0, partitions - 1))
        codes = _fault_codes(actor)
        fault = draw(st.integers(0, 2 * codes - 1)) if faults else 0
        selectors: tuple[FaultSelector, ...] = ()
        if fault % 2:
            draft = decode_selector(actor, fault // 2)
            selectors = (FaultSelector(draft.operation, draft.call, draft.outcome),)
        return Step(actor, lifetime, partition, selectors)  # type: ignore[arg-type]

    def steps(draw: st.DrawFn, state: dict[int, str], low: int, high: int) -> list[Step]:
        out: list[Step] = []
        while len(out) < high and (len(out) < low or draw(st.booleans())):
            out.append(step(draw, state))
        return out

    def program(
        draw: st.DrawFn, low: int, high: int, sizes: list[tuple[int, int]]
    ) -> tuple[list[Step], list[list[Step]]]:
        state: dict[int, str] = {}
        prefix = steps(draw, state, low, high)
        return prefix, [steps(draw, dict(state), lo, hi) for lo, hi in sizes]

    return program


class ParallelFailure(AssertionError):
    """A parallel example failed: ``failure`` is the stable failure string, ``path`` the
    exported example, ``reproduced`` of ``runs`` the re-runs of its recorded schedule
    that failed again."""

    def __init__(self, failure: str, detail: str, path: str, reproduced: int, runs: int) -> None:
        super().__init__(
            f"{failure}: {detail}\nreproduced in {reproduced} of {runs} runs of the recorded "
            f"schedule\nreplay: {replay_command(path)}"
        )
        self.failure = failure
        self.detail = detail
        self.path = path
        self.reproduced = reproduced
        self.runs = runs


class ParallelMachine:
    """The base of a parallel machine (module docstring): set the target and the shape."""

    kind: ClassVar[str] = "store"  # "store" | "lifecycle"
    store: ClassVar[str] = "memory"  # "memory" (one shared object) | "sqlite" | "postgres"
    # A Backend factory at the top level of a module (recorded in the export): called with
    # nothing for "memory", with a file path for "sqlite", with a DSN for "postgres".
    backend: ClassVar[Callable[..., Backend] | None] = None
    lifecycle_factory: ClassVar[Callable[..., Lifecycle] | None] = None
    settled: ClassVar[bool] = True  # the backend settles each call before it returns
    partitions: ClassVar[int] = 1
    lifetimes: ClassVar[int] = 2
    classes: ClassVar[tuple[str, ...]] = ("valid", "conflict")
    min_records: ClassVar[int] = 2
    max_records: ClassVar[int] = 8
    faults: ClassVar[bool] = True
    branches: ClassVar[tuple[int, int]] = (2, 3)
    prefix: ClassVar[tuple[int, int]] = (1, 4)
    length: ClassVar[tuple[int, int]] = (1, 4)
    depth: ClassVar[int] = 3  # PCT depth d: up to d - 1 priority change points
    runs: ClassVar[int] = 4  # k: schedules each example runs (its own + seeded variants)
    reproduce: ClassVar[int] = 5  # re-runs of the final failing example's recorded schedule
    stall_ms: ClassVar[int] = 50
    dsn: ClassVar[str | None] = None  # PostgreSQL server (default $REMORA_PG_DSN)
    stats: ClassVar[dict[str, int]]

    _failed: ClassVar[dict[str, tuple[ParallelExample, RunResult]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.stats = {}
        cls._failed = {}

    # -- what is drawn ----------------------------------------------------------------
    @classmethod
    def target(cls) -> TargetConfig:
        lifecycle = cls.lifecycle_factory
        return TargetConfig(
            cls.kind,
            cls.store,
            cls.partitions,
            cls.lifetimes,
            None if cls.backend is None else reference_of(cls.backend),
            None if lifecycle in (None, Lifecycle) else reference_of(lifecycle),
            cls.settled,
        )

    @classmethod
    def sources(cls, trace_class: str) -> st.SearchStrategy[list[SourceRecord]]:
        return source_histories(trace_class, cls.partitions, cls.max_records, cls.min_records)

    @classmethod
    def examples(cls) -> st.SearchStrategy[ParallelExample]:
        target = cls.target()

        @st.composite
        def draw(draw: st.DrawFn) -> ParallelExample:
            trace_class = draw(st.sampled_from(cls.classes), label="class")
            source = draw(cls.sources(trace_class), label="source")
            n = draw(st.integers(*cls.branches), label="branches")
            branches: list[list[Command]]
            if cls.kind == "lifecycle":
                program = lifecycle_program(cls.partitions, cls.lifetimes, cls.faults)
                steps, lists = program(draw, cls.prefix[0], cls.prefix[1], [cls.length] * n)
                prefix: list[Command] = list(steps)
                branches = [list(b) for b in lists]
            else:
                commands = store_commands(cls.partitions, cls.faults)
                prefix = draw(
                    st.lists(commands, min_size=cls.prefix[0], max_size=cls.prefix[1]),
                    label="prefix",
                )
                branches = [
                    draw(st.lists(commands, min_size=cls.length[0], max_size=cls.length[1]))
                    for _ in range(n)
                ]
            horizon = STEPS_PER_COMMAND * sum(len(b) for b in branches)
            priorities = draw(st.permutations(range(n)), label="priorities")
            points = draw(
                st.lists(
                    st.integers(0, max(horizon, 1)), max_size=max(cls.depth - 1, 0), unique=True
                ),
                label="change points",
            )
            return example_for(
                target,
                source,
                prefix,
                branches,
                PCT(tuple(priorities), tuple(sorted(points))),
                generator=f"hypothesis:{cls.__name__}",
                runs=cls.runs,
                stall_ms=cls.stall_ms,
            )

        return draw()

    # -- running ----------------------------------------------------------------------
    @classmethod
    @contextmanager
    def site(cls) -> Iterator[Site]:
        """Where this machine's runs keep their store (a scratch database for PostgreSQL,
        emptied before each run; a directory of fresh files for SQLite)."""
        dsn = None
        if cls.store == "postgres":
            dsn = cls.dsn or os.environ.get(PG_DSN_ENV)
        with site(cls.store, dsn) as where:
            yield where

    @classmethod
    def check(cls, example: ParallelExample, where: Site) -> None:
        """Run ``example`` under up to ``runs`` schedules; on a failure export it and raise
        :class:`ParallelFailure`."""
        note(_describe(example))
        stats = cls.stats
        ran, results = explore(example, where, example.runs, cls.depth)
        for result in results:
            stats["runs"] = stats.get("runs", 0) + 1
            stats["operations"] = stats.get("operations", 0) + result.operations
            stats["decisions"] = stats.get("decisions", 0) + len(result.schedule.decisions)
            stats["stalls"] = stats.get("stalls", 0) + result.schedule.stalls
            for name, count in result.results:
                stats[f"result {name}"] = stats.get(f"result {name}", 0) + count
        result = results[-1]
        final = _final_run()
        key = example.dumps()
        if result.failure is None:
            # An engine that blocks inside a statement (PostgreSQL) may fail an example once
            # and not again: the final replay then reports the run that failed, with how
            # often its recorded schedule came back (never a Hypothesis "flaky" error).
            seen = cls._failed.get(key)
            if seen is None or not final:
                return
            ran, result = seen
        else:
            cls._failed[key] = (ran, result)
        assert result.failure is not None
        stats["failures"] = stats.get("failures", 0) + 1
        recorded = ran
        reproduced, runs = 1, 1
        if final:
            runs = cls.reproduce
            reproduced = sum(
                run_once(recorded, recorded.schedule_policy(), where).failure is not None
                for _ in range(runs)
            )
        recorded = attrs.evolve(
            recorded, found=Found(result.failure, result.detail, reproduced, runs)
        )
        path = failures_dir() / f"parallel-{cls.__name__}.json"
        if final or not path.exists():
            write_output(path, recorded.dumps(), parents=True)
        note(f"example written: {replay_command(path)}")
        raise ParallelFailure(result.failure, result.detail, str(path), reproduced, runs)

    @classmethod
    def run(cls, settings: Settings | None = None) -> None:
        """Run the machine under ``settings`` (default: the loaded profile's)."""
        cls._failed = {}
        with cls.site() as where:

            @given(cls.examples())
            def test(example: ParallelExample) -> None:
                cls.check(example, where)

            if settings is not None:
                test = settings(test)
            test()

    @classmethod
    def test_case(cls) -> type[unittest.TestCase]:
        return machine_test_case(cls.__name__, cls.run)

    TestCase: ClassVar[type[unittest.TestCase]]


def machine_test_case(name: str, run: Callable[[], None]) -> type[unittest.TestCase]:
    """A :class:`unittest.TestCase` named ``NAME.TestCase`` whose one test calls ``run`` —
    what a parallel machine's ``TestCase`` is, as Hypothesis's
    ``RuleBasedStateMachine.TestCase``."""

    class TestCase(unittest.TestCase):
        def runTest(self) -> None:
            run()

    TestCase.__name__ = TestCase.__qualname__ = f"{name}.TestCase"
    return TestCase


def _describe(example: ParallelExample) -> str:
    lines = ["prefix: " + ", ".join(describe_command(c) for c in example.prefix)]
    for i, branch in enumerate(example.branches):
        lines.append(f"branch {i}: " + ", ".join(describe_command(c) for c in branch))
    lines.append(f"schedule: {example.policy}")
    return "\n".join(lines)


class _TestCaseDescriptor:
    """``Machine.TestCase``: a :class:`unittest.TestCase` running the machine (as
    Hypothesis's ``RuleBasedStateMachine.TestCase``)."""

    def __get__(self, obj: object, owner: type[ParallelMachine]) -> type[unittest.TestCase]:
        return owner.test_case()


ParallelMachine.TestCase = _TestCaseDescriptor()  # type: ignore[assignment]


__all__ = [
    "PG_DSN_ENV",
    "machine_test_case",
    "STEPS_PER_COMMAND",
    "store_commands",
    "lifecycle_program",
    "ParallelFailure",
    "ParallelMachine",
]
