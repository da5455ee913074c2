"""The guard-mutation campaign: run the stateful suite against every named mutation.

    python -m tests.stateful.campaign [--machine NAME] [--no-shrink]

Prints, per mutation: killed?, the machine that killed it, examples and seconds to the first
failure, the shrunk trace length (steps of the exported replay trace) and the failure; the
shrunk traces stay in ``artifacts/campaign/``.  Uses the ``ci`` profile's budget
(derandomized, no database).  Exit 1 if any mutation survives.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import attrs
import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.sim.mutations import MUTATIONS, Mutation
from remora.sim.trace import loads
from remora.testing.machines import ScheduleFailure, WorkerScheduleMachine
from remora.testing.profiles import register_profiles
from tests.stateful.machines import MACHINES

CAMPAIGN_DIR = Path("artifacts") / "campaign"
"""Where the campaign keeps each mutation's exported (shrunk) trace."""


@attrs.define
class Outcome:
    mutation: str
    killed: bool
    machine: str = "-"
    examples: int = 0
    seconds: float = 0.0
    steps: int | None = None
    failure: str = "survived"
    trace: str | None = None


def ci_settings(shrink: bool) -> settings:
    register_profiles()
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    return settings(settings.get_profile("ci"), phases=phases, report_multiple_bugs=False)


def hunt(
    mutation: Mutation, machine: type[WorkerScheduleMachine], shrink: bool, artifacts: Path
) -> Outcome:
    """Run ``machine`` against ``mutation`` until the first failure (then shrink)."""
    counts = {"examples": 0, "first": 0.0, "first_examples": 0}
    start = time.perf_counter()

    planted, planted_lifecycle = mutation.name, mutation.lifecycle

    class Mutant(machine):  # type: ignore[valid-type, misc]
        lifecycle_factory = planted_lifecycle
        mutation = planted  # recorded in the exported trace: its replay runs the same bug

        def __init__(self) -> None:
            super().__init__()
            counts["examples"] += 1

        def fail(self, failure: str, detail: str) -> None:
            if not counts["first"]:
                counts["first"] = time.perf_counter() - start
                counts["first_examples"] = counts["examples"]
            super().fail(failure, detail)

    Mutant.__name__ = Mutant.__qualname__ = f"{machine.__name__}-{mutation.name}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REMORA_ARTIFACT_DIR", str(artifacts))
        try:
            with mutation.applied():
                run_state_machine_as_test(Mutant, settings=ci_settings(shrink))
        except ScheduleFailure as exc:
            trace = loads(Path(exc.trace_path).read_text())
            return Outcome(
                mutation.name,
                True,
                machine.__name__,
                int(counts["first_examples"]),
                round(counts["first"], 2),
                len(trace.steps),
                exc.failure,
                exc.trace_path,
            )
    return Outcome(mutation.name, False, examples=int(counts["examples"]))


def run_campaign(
    machines: tuple[type[WorkerScheduleMachine], ...] = MACHINES,
    shrink: bool = True,
    artifacts: Path = CAMPAIGN_DIR,
) -> list[Outcome]:
    """Every mutation against ``machines``; the traces stay under ``artifacts``."""
    outcomes = []
    for mutation in MUTATIONS:
        outcome = Outcome(mutation.name, False)
        for machine in machines:
            outcome = hunt(mutation, machine, shrink, artifacts)
            if outcome.killed:
                break
        outcomes.append(outcome)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    rows = [("mutation", "killed", "machine", "examples", "seconds", "shrunk steps", "failure")]
    for o in outcomes:
        rows.append(
            (
                o.mutation,
                "yes" if o.killed else "NO",
                o.machine,
                str(o.examples),
                f"{o.seconds:.2f}",
                "-" if o.steps is None else str(o.steps),
                o.failure,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", choices=[m.__name__ for m in MACHINES])
    parser.add_argument("--no-shrink", action="store_true")
    args = parser.parse_args()
    machines = tuple(m for m in MACHINES if args.machine in (None, m.__name__))
    outcomes = run_campaign(machines, shrink=not args.no_shrink)
    print(table(outcomes))
    print(f"traces: {CAMPAIGN_DIR}/hypothesis-<Machine>-<mutation>.json")
    killed = [o for o in outcomes if o.killed]
    if killed:
        print(f"median time to kill: {statistics.median(o.seconds for o in killed):.2f} s")
    return 0 if len(killed) == len(outcomes) else 1


if __name__ == "__main__":
    os.environ.setdefault("REMORA_HYPOTHESIS_PROFILE", "ci")
    sys.exit(main())
