"""The parallel job machines of the tests, their budgets, the planted bugs' cases and the
hunt that runs a machine against one until it fails (shared by
``tests/jobs/test_parallel_jobs.py`` and the campaign, ``python -m
tests.jobs.parallel_campaign``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, Phase, settings

from remora.sim.jobs.parallel import JobParallelExample, loads
from remora.testing.parallel_jobs import JobParallelFailure, JobParallelMachine
from tests.jobs import parallel_planted as planted


class JobsInParallel(JobParallelMachine):
    """Two incarnations and the reconciler over SQLite (a connection each, one file on
    tmpfs) and the memory coordination store."""


REAL_BUDGET = 40
"""Examples of :class:`JobsInParallel` on the real stores under ``ci`` (k = 4 each; twenty
times as many under ``nightly``: :func:`run_share`)."""

PG_BUDGET = 5
"""Examples of the machine over PostgreSQL + Redis (``tests/postgres/
test_parallel_jobs_pg.py``; k = 3 each, ~0.6 s a run)."""

HUNT_BUDGET = 400
"""Examples a planted bug gets before it is said to survive (a hunt stops at the first
failure; the campaign gives the sequential machines as many)."""


@attrs.frozen
class PlantedJobs:
    """A planted bug: its name and what it replaces in the machine."""

    name: str
    durable: Any = None
    coordination: Any = None

    def machine(self) -> type[JobParallelMachine]:
        overrides: dict[str, Any] = {}
        if self.durable is not None:
            overrides["durable"] = staticmethod(self.durable)
        if self.coordination is not None:
            overrides["coordination"] = self.coordination
        return type(f"JobsInParallel-{self.name}", (JobsInParallel,), overrides)


CASES = (
    PlantedJobs("SplitTransition", durable=planted.split_transition),
    PlantedJobs("UnlockedHold", durable=planted.unlocked_hold),
    PlantedJobs("CoordinationLockGap", coordination=planted.CoordinationLockGap),
)


def hunt_settings(budget: int, shrink: bool = False) -> settings:
    """Derandomized, no database, shrinking only if asked."""
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.generate)
    return settings(
        max_examples=budget,
        derandomize=True,
        database=None,
        deadline=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=False,
    )


def run_share(machine: type[JobParallelMachine], ci_examples: int) -> dict[str, int]:
    """Run ``machine`` for its share of the loaded profile — ``ci_examples`` under ``ci``,
    twenty times that under ``nightly``, in proportion under ``default`` — and return its
    counters (runs, steps, decisions, stalls, results by kind)."""
    from remora.testing.profiles import CI_EXAMPLES

    budget = settings.default
    assert budget is not None
    examples = max(1, ci_examples * budget.max_examples // CI_EXAMPLES)
    machine.stats.clear()
    machine.run(
        settings(
            budget,
            max_examples=examples,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
    )
    assert machine.stats["runs"] >= examples
    return machine.stats


@attrs.define
class Hunt:
    killed: bool
    examples: int
    seconds: float
    failure: str = "survived"
    detail: str = ""
    path: str | None = None
    reproduced: int = 0
    runs: int = 0

    def example(self) -> JobParallelExample:
        assert self.path is not None
        return loads(Path(self.path).read_text(encoding="utf-8"))


def hunt(case: PlantedJobs, budget: int, folder: Path, shrink: bool = False) -> Hunt:
    """Run the machine with ``case`` planted for up to ``budget`` examples."""
    machine = case.machine()
    started = time.perf_counter()
    seen: dict[str, Any] = {}
    check = machine.check.__func__  # type: ignore[attr-defined]

    def counting(cls: type[JobParallelMachine], example: JobParallelExample) -> None:
        seen["n"] = seen.get("n", 0) + 1
        try:
            check(cls, example)
        except JobParallelFailure:
            seen.setdefault("first", (seen["n"], time.perf_counter() - started))
            raise

    machine.check = classmethod(counting)  # type: ignore[assignment,method-assign]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REMORA_ARTIFACT_DIR", str(folder))
        try:
            machine.run(hunt_settings(budget, shrink))
        except JobParallelFailure as exc:
            n, seconds = seen["first"]
            return Hunt(
                True, n, seconds, exc.failure, exc.detail, exc.path, exc.reproduced, exc.runs
            )
    return Hunt(False, seen.get("n", 0), time.perf_counter() - started)


__all__ = [
    "CASES",
    "HUNT_BUDGET",
    "PG_BUDGET",
    "REAL_BUDGET",
    "Hunt",
    "JobsInParallel",
    "PlantedJobs",
    "hunt",
]
