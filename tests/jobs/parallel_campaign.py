"""The job-runtime concurrency campaign: every planted bug of
``tests/jobs/parallel_planted.py`` against the sequential job machine and against the
parallel job machine, in the same budget.

    python -m tests.jobs.parallel_campaign [--budget N] [--only NAME] [--no-sequential]

For each bug: the sequential :class:`~remora.testing.job_machines.JobRuntimeMachine` runs
with the planted stores as its twin (every step runs on both the reference stores and the
planted ones, which must agree after it, and the planted run is refinement-checked and
drained like the reference) for ``budget`` examples (derandomized, no shrinking); then the
parallel machine hunts it (derandomized).  Prints one row per bug: whether the sequential
machine killed it (after how many examples), whether the parallel machine did, its
examples and seconds to the first failure, and how many of 5 re-runs of the recorded
schedule failed again.  Exit 1 unless every bug is killed by the parallel machine and none
by the sequential one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs.coordination import MemoryCoordination
from remora.testing.job_machines import JobRuntimeMachine
from remora.testing.profiles import register_profiles
from tests.jobs.parallel_jobs import CASES, HUNT_BUDGET, PlantedJobs, hunt
from tests.jobs.parallel_planted import twin_stores


def sequential(case: PlantedJobs, budget: int) -> tuple[bool, int, float, str]:
    """The sequential job machine with ``case``'s stores as its twin, ``budget`` examples."""
    twin = twin_stores(
        durable=case.durable,
        coordination=case.coordination or MemoryCoordination,
    )
    machine: Any = type(f"Sequential-{case.name}", (JobRuntimeMachine,), {"twin_backends": twin})
    count = {"n": 0}
    original = machine.__init__

    def counting(self: Any) -> None:
        count["n"] += 1
        original(self)

    machine.__init__ = counting
    budget_settings = settings(
        max_examples=budget,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        stateful_step_count=30,
    )
    started = time.perf_counter()
    try:
        run_state_machine_as_test(machine, settings=budget_settings)
    except Exception as exc:  # killed
        return True, count["n"], time.perf_counter() - started, str(exc).splitlines()[0]
    return False, count["n"], time.perf_counter() - started, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=HUNT_BUDGET)
    parser.add_argument("--only", default=None)
    parser.add_argument("--no-sequential", action="store_true")
    args = parser.parse_args(argv)
    register_profiles()
    good = True
    for case in CASES:
        if args.only and case.name != args.only:
            continue
        seq = "-"
        if not args.no_sequential:
            killed, n, seconds, why = sequential(case, args.budget)
            seq = f"KILLED after {n} ({why})" if killed else f"no ({n} examples, {seconds:.0f} s)"
            good = good and not killed
        found = hunt(case, args.budget, Path(tempfile.mkdtemp(prefix="campaign-")))
        good = good and found.killed
        par = (
            f"yes: {found.examples} examples, {found.seconds:.1f} s, "
            f"{found.reproduced}/{found.runs} reproduced, {found.failure}"
            if found.killed
            else f"no ({found.examples} examples)"
        )
        print(f"{case.name}: sequential {seq}; parallel {par}", flush=True)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
