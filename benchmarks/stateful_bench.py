"""Rule steps per second under Hypothesis for each state machine (ci profile budget).

    python benchmarks/stateful_bench.py [--repeat 3] [--all]

Counts rule invocations (the steps Hypothesis executes, initialize excluded) over a whole
``run_state_machine_as_test`` — generation, execution, invariants and teardown drains all
included — and reports the median rate.  A trivial 4-rule machine is measured alongside as
the raw-Hypothesis reference; the figure that matters is the heavy-faults machine's rate over
the trivial one's *in the same repeat* (both suffer the same machine load), whose median is
printed — per wall-clock second and per CPU second of this process (on a shared machine the
CPU-time ratio is the steadier one; the 1-minute load average at the end is printed too).
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remora.testing.machines import WorkerScheduleMachine
from remora.testing.profiles import register_profiles
from tests.stateful.machines import MACHINES


class Trivial(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    @rule()
    def a(self) -> None:
        self.n += 1

    @rule()
    def b(self) -> None:
        self.n -= 1

    @rule(x=st.integers())
    def c(self, x: int) -> None:
        self.n = x

    @rule()
    def d(self) -> None:
        self.n = 0


def rate(machine: type[RuleBasedStateMachine]) -> tuple[float, float]:
    """Rule steps per wall-clock second and per CPU second of this process."""
    counter = {"steps": 0}

    class Counted(machine):  # type: ignore[valid-type, misc]
        def __init__(self) -> None:
            super().__init__()
            counter["steps"] -= 1  # invariants are also checked once before the first step

        def check_invariants(self, *args: object, **kwargs: object) -> None:
            counter["steps"] += 1
            super().check_invariants(*args, **kwargs)

    Counted.__name__ = machine.__name__
    start, cpu = time.perf_counter(), time.process_time()
    run_state_machine_as_test(Counted, settings=settings(settings.get_profile("ci")))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return counter["steps"] / elapsed, counter["steps"] / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--all", action="store_true", help="every suite machine, not only the heavy-faults one"
    )
    args = parser.parse_args()
    register_profiles()
    machines = MACHINES if args.all else MACHINES[:1]
    rates: dict[str, list[float]] = {m.__name__: [] for m in (*machines, Trivial)}
    cpu_rates: dict[str, list[float]] = {m.__name__: [] for m in (*machines, Trivial)}
    ratios, cpu_ratios = [], []
    heavy = MACHINES[0].__name__
    for _ in range(args.repeat):  # each repeat measures every machine, the trivial one last
        for machine in (*machines, Trivial):
            wall, cpu = rate(machine)
            rates[machine.__name__].append(wall)
            cpu_rates[machine.__name__].append(cpu)
        ratios.append(rates[heavy][-1] / rates["Trivial"][-1])
        cpu_ratios.append(cpu_rates[heavy][-1] / cpu_rates["Trivial"][-1])
    print(
        json.dumps(
            {
                "rule_steps_per_s_median": {
                    n: round(statistics.median(r)) for n, r in rates.items()
                },
                "heavy_over_trivial_per_run": [round(r, 3) for r in ratios],
                "heavy_over_trivial_median": round(statistics.median(ratios), 3),
                # per CPU second of this process: what the load of other processes on a
                # shared machine disturbs least
                "rule_steps_per_cpu_s_median": {
                    n: round(statistics.median(r)) for n, r in cpu_rates.items()
                },
                "heavy_over_trivial_cpu_per_run": [round(r, 3) for r in cpu_ratios],
                "heavy_over_trivial_cpu_median": round(statistics.median(cpu_ratios), 3),
                "repeat": args.repeat,
                "loadavg_1min": os.getloadavg()[0],
            },
            indent=2,
        )
    )
    assert issubclass(MACHINES[0], WorkerScheduleMachine)


if __name__ == "__main__":
    main()
