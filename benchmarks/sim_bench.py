"""Simulation speed: scheduler steps/s with oracle checks on, the 16-run corpus wall time,
and the replay time of one 64-step trace.  Reports medians over repetitions.

    python benchmarks/sim_bench.py [--repeat 9]

Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from remora.sim.corpus import run_corpus
from remora.sim.generate import generate
from remora.sim.report import replay, run_trace
from remora.sim.trace import loads


def steps_per_second() -> tuple[float, int]:
    traces = [generate(s, c) for s in range(1, 9) for c in ("valid", "conflict")]
    start = time.perf_counter()
    attempts = sum(len(replay(t).attempts) for t in traces)
    return attempts / (time.perf_counter() - start), attempts


def corpus_seconds() -> float:
    start = time.perf_counter()
    run_corpus()
    return time.perf_counter() - start


def replay_seconds() -> float:
    text = generate(17, "valid").dumps()
    start = time.perf_counter()
    run_trace(loads(text)).dumps()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    rates, corpus, replays = [], [], []
    attempts = 0
    for _ in range(args.repeat):
        rate, attempts = steps_per_second()
        rates.append(rate)
        corpus.append(corpus_seconds())
        replays.append(replay_seconds())
    print(
        json.dumps(
            {
                "repeat": args.repeat,
                "scheduler_steps_per_s_median": round(statistics.median(rates)),
                "scheduler_steps_per_run": attempts,
                "corpus_16_runs_s_median": round(statistics.median(corpus), 4),
                "replay_64_step_trace_ms_median": round(statistics.median(replays) * 1000, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
