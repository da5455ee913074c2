"""Running a parallel machine against a planted bug until it fails (shared by the planted-bug
tests and the campaign; the PostgreSQL ones use it too)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, Phase, settings

from remora.sim.parallel import ParallelExample, loads
from remora.testing.parallel import ParallelFailure, ParallelMachine


@attrs.frozen
class Planted:
    """A planted bug: its name, the machine that runs it, and what it replaces there."""

    name: str
    machine: type[ParallelMachine]
    backend: Any = None
    lifecycle: Any = None

    def machine_class(self) -> type[ParallelMachine]:
        """The machine with the bug planted (recorded in the export by reference)."""
        overrides: dict[str, Any] = {}
        if self.backend is not None:
            overrides["backend"] = self.backend
        if self.lifecycle is not None:
            overrides["lifecycle_factory"] = self.lifecycle
        name = f"{self.machine.__name__}-{self.name}"
        return type(name, (self.machine,), overrides)


@attrs.define
class Hunt:
    """What one hunt saw: killed or not, the examples and seconds to the first failure,
    the failure, the exported example and how often its schedule reproduced."""

    killed: bool
    examples: int
    seconds: float
    failure: str = "survived"
    detail: str = ""
    path: str | None = None
    reproduced: int = 0
    runs: int = 0

    def example(self) -> ParallelExample:
        assert self.path is not None
        return loads(Path(self.path).read_text(encoding="utf-8"))


def hunt_settings(budget: int, shrink: bool = False) -> settings:
    """Derandomized (a hunt is the same every time), no database, no shrinking unless
    asked: the planted-bug tests want the first failure, the campaign its shrunk form."""
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.generate)
    return settings(
        max_examples=budget,
        derandomize=True,
        database=None,
        deadline=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=False,
    )


@contextmanager
def artifacts_in(folder: Path) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REMORA_ARTIFACT_DIR", str(folder))
        yield


def hunt(planted: Planted, budget: int, artifacts: Path, shrink: bool = False) -> Hunt:
    """Run ``planted``'s machine for at most ``budget`` examples until it fails."""
    machine = planted.machine_class()
    counted = {"examples": 0, "first": 0.0, "at": 0}
    start = time.perf_counter()
    check = machine.check.__func__  # type: ignore[attr-defined]

    def counting(cls: type[ParallelMachine], example: ParallelExample, where: Any) -> None:
        counted["examples"] += 1
        try:
            check(cls, example, where)
        except ParallelFailure:
            if not counted["first"]:
                counted["first"] = time.perf_counter() - start
                counted["at"] = counted["examples"]
            raise

    machine.check = classmethod(counting)  # type: ignore[assignment]
    with artifacts_in(artifacts):
        try:
            machine.run(hunt_settings(budget, shrink))
        except ParallelFailure as exc:
            return Hunt(
                True,
                int(counted["at"]),
                round(counted["first"], 2),
                exc.failure,
                exc.detail,
                exc.path,
                exc.reproduced,
                exc.runs,
            )
    return Hunt(False, int(counted["examples"]), round(time.perf_counter() - start, 2))


def run_share(machine: type[ParallelMachine], ci_examples: int) -> dict[str, int]:
    """Run ``machine`` for its share of the loaded profile — ``ci_examples`` under ``ci``,
    twenty times that under ``nightly``, in proportion under ``default`` — and return its
    counters (runs, operations, decisions, stalls, results by kind)."""
    from remora.testing.profiles import CI_EXAMPLES

    budget = settings.default
    assert budget is not None
    examples = max(1, ci_examples * budget.max_examples // CI_EXAMPLES)
    machine.stats.clear()
    machine.run(settings(budget, max_examples=examples))
    assert machine.stats["runs"] >= examples
    return machine.stats


__all__ = ["Planted", "Hunt", "hunt_settings", "artifacts_in", "hunt", "run_share"]
