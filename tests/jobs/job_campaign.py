"""The guard-mutation campaign of the job runtime: every named mutation against the job
machines.

    python -m tests.jobs.job_campaign [--no-shrink] [--shrink-seconds N] [--seed N]
        [--machine NAME]

Prints, per mutation: killed?, the machine that killed it, examples and seconds to the first
failure, the shrunk trace length (steps of the exported ``job-schedule-v1`` trace; Hypothesis
shrinking is capped at ``--shrink-seconds``, default 20, as it is slow on this machine), the
length after ``remora reduce``'s reducer, and the failure string.  Uses the ``ci``
profile's budget (derandomized, no database; ``--seed N`` runs the same budget from another
seed — the check that what is killed does not hang on one derandomized search).  The
machines hunt in :data:`~tests.jobs.job_machines.HUNTERS` order (the race machine
first); ``--machine NAME`` hunts with that machine alone.  The shrunk
traces stay in ``artifacts/job-campaign/``.  Exit 1 if any mutation survives.
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
from hypothesis import Phase, seed, settings
from hypothesis.stateful import get_state_machine_test

from remora.sim.jobs.mutations import MUTATIONS, JobMutation
from remora.sim.jobs.trace import loads
from remora.testing.job_machines import JobMachineBase, JobScheduleFailure
from remora.testing.profiles import register_profiles
from tests.jobs.job_machines import HUNTERS

CAMPAIGN_DIR = Path("artifacts") / "job-campaign"


@attrs.define
class Outcome:
    mutation: str
    killed: bool
    machine: str = "-"
    examples: int = 0
    seconds: float = 0.0
    steps: int | None = None
    reduced: int | None = None
    failure: str = "survived"
    trace: str | None = None


def ci_settings(shrink: bool) -> settings:
    register_profiles()
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    return settings(settings.get_profile("ci"), phases=phases, report_multiple_bugs=False)


def hunt(
    mutation: JobMutation,
    machine: type[JobMachineBase],
    shrink: bool,
    artifacts: Path,
    at_seed: int | None = None,
) -> Outcome:
    counts = {"examples": 0, "first": 0.0, "first_examples": 0}
    start = time.perf_counter()
    planted = mutation.name

    class Mutant(machine):  # type: ignore[valid-type, misc]
        mutation = planted

        def __init__(self) -> None:
            super().__init__()
            counts["examples"] += 1

        def fail(self, exc: object) -> None:
            if not counts["first"]:
                counts["first"] = time.perf_counter() - start
                counts["first_examples"] = counts["examples"]
            super().fail(exc)  # type: ignore[arg-type]

    Mutant.__name__ = Mutant.__qualname__ = f"{machine.__name__}-{mutation.name}"
    artifacts.mkdir(parents=True, exist_ok=True)  # a clean checkout has no artifacts/
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REMORA_ARTIFACT_DIR", str(artifacts))
        try:
            test = get_state_machine_test(Mutant, settings=ci_settings(shrink))
            if at_seed is not None:
                test = seed(at_seed)(test)
            test()  # the machine's runs plant the mutation (config.mutation)
        except JobScheduleFailure as exc:
            trace = loads(Path(exc.trace_path).read_text())
            reduced = None
            if shrink:
                from remora.sim.jobs.reduce import JobReducer

                reduced = len(JobReducer(trace).run().steps)
            return Outcome(
                mutation.name,
                True,
                machine.__name__,
                int(counts["first_examples"]),
                round(counts["first"], 2),
                len(trace.steps),
                reduced,
                exc.failure,
                exc.trace_path,
            )
    return Outcome(mutation.name, False, examples=int(counts["examples"]))


def run_campaign(
    shrink: bool = True,
    artifacts: Path = CAMPAIGN_DIR,
    at_seed: int | None = None,
    machines: tuple[type[JobMachineBase], ...] = HUNTERS,
) -> list[Outcome]:
    outcomes = []
    for mutation in MUTATIONS:
        outcome = Outcome(mutation.name, False)
        for machine in machines:
            outcome = hunt(mutation, machine, shrink, artifacts, at_seed)
            if outcome.killed:
                break
        outcomes.append(outcome)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    rows = [
        (
            "mutation",
            "killed",
            "machine",
            "examples",
            "seconds",
            "shrunk steps",
            "reduced",
            "failure",
        )
    ]
    for o in outcomes:
        rows.append(
            (
                o.mutation,
                "yes" if o.killed else "NO",
                o.machine,
                str(o.examples),
                f"{o.seconds:.2f}",
                "-" if o.steps is None else str(o.steps),
                "-" if o.reduced is None else str(o.reduced),
                o.failure[:90],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--shrink-seconds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--machine", choices=[m.__name__ for m in HUNTERS], default=None)
    args = parser.parse_args()
    machines = tuple(m for m in HUNTERS if args.machine in (None, m.__name__))
    import hypothesis.internal.conjecture.engine as engine

    engine.MAX_SHRINKING_SECONDS = args.shrink_seconds  # type: ignore[misc]
    outcomes = run_campaign(shrink=not args.no_shrink, at_seed=args.seed, machines=machines)
    print(table(outcomes))
    print(f"traces: {CAMPAIGN_DIR}/hypothesis-<Machine>-<mutation>.json")
    killed = [o for o in outcomes if o.killed]
    if killed:
        print(f"median time to kill: {statistics.median(o.seconds for o in killed):.2f} s")
    return 0 if len(killed) == len(outcomes) else 1


if __name__ == "__main__":
    os.environ.setdefault("REMORA_HYPOTHESIS_PROFILE", "ci")
    sys.exit(main())
