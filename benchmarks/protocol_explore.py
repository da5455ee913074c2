"""Benchmark of ``remora explore`` on the named configurations of issue 5.

Each measurement runs in a fresh interpreter so that peak RSS is per run::

    python benchmarks/protocol_explore.py                  # safety + drain, 2 workers, all configs
    python benchmarks/protocol_explore.py --liveness tiny retry credentials
    python benchmarks/protocol_explore.py --workers 1 faults-1w
    python benchmarks/protocol_explore.py --json out.json

Reported per run: distinct states, states generated, depth, wall time of the exploration,
distinct states per wall-clock second and per CPU second (all processes; the machine may be
shared, so the 1-minute load average at the end of the run is printed too), peak RSS
(coordinator and largest worker process; their sum bounds the total), the fair-drain bound
and, with ``--liveness``, each liveness property's result.
Speed is measured here only; no test asserts wall-clock time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from remora.protocol.config import NAMED_CONFIGS
from remora.protocol.explore import ExploreOptions, explore
from remora.protocol.liveness import DrainChecker, check_liveness
from remora.protocol.parallel import explore_parallel
from remora.protocol.spec import Remora


def one(name: str, workers: int, liveness: bool, drain: bool) -> dict[str, Any]:
    model = Remora(NAMED_CONFIGS[name])
    t0 = time.monotonic()
    out: dict[str, Any] = {
        "config": name,
        "workers": workers,
        "mode": "liveness" if liveness else "safety",
    }
    if liveness:
        checker = DrainChecker(model) if drain else None
        r = explore(model, name, ExploreOptions(keep_graph=True, on_state=checker))
        drained = (checker.max_length, checker.failures) if checker else None
        t1 = time.monotonic()
        assert r.graph is not None
        live = check_liveness(model, r.graph, name)
        out["liveness_seconds"] = round(time.monotonic() - t1, 2)
        out["liveness"] = {x.label: x.holds for x in live}
    elif workers == 1:
        checker = DrainChecker(model) if drain else None
        r = explore(model, name, ExploreOptions(on_state=checker))
        drained = (checker.max_length, checker.failures) if checker else None
    else:
        r, drained = explore_parallel(model, name, workers=workers, drain=drain)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rc = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru.ru_utime + ru.ru_stime + rc.ru_utime + rc.ru_stime
    out.update(
        cpu_seconds=round(cpu, 2),
        distinct_per_cpu_second=round(r.distinct / cpu) if cpu else None,
        load_average_1min=round(os.getloadavg()[0], 2),
        distinct=r.distinct,
        generated=r.generated,
        depth=r.depth,
        explore_seconds=round(r.elapsed, 2),
        distinct_per_second=round(r.states_per_second),
        violation=None if r.violation is None else f"{r.violation.kind}:{r.violation.name}",
        drain=None if drained is None else {"max_steps": drained[0], "failures": drained[1]},
        total_seconds=round(time.monotonic() - t0, 2),
        peak_rss_mib_coordinator=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        peak_rss_mib_largest_worker=round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        ),
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", default=list(NAMED_CONFIGS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--liveness", action="store_true")
    ap.add_argument("--no-drain", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.workers, a.liveness, not a.no_drain)))
        return 0
    rows = []
    for name in a.configs:
        cmd = [sys.executable, __file__, "--one", name, "--workers", str(a.workers)]
        if a.liveness:
            cmd.append("--liveness")
        if a.no_drain:
            cmd.append("--no-drain")
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        row = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(
        "| config | distinct | generated | depth | explore s | distinct/s | distinct/CPU-s "
        "| load | RSS MiB (coord/worker) | drain bound | liveness |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        live = r.get("liveness")
        live_s = (
            "-"
            if live is None
            else (
                "all hold"
                if all(live.values())
                else "VIOLATED: " + ", ".join(k for k, v in live.items() if not v)
            )
        )
        drain = (
            "-"
            if r["drain"] is None
            else (
                f"{r['drain']['max_steps']} steps"
                if r["drain"]["failures"] == 0
                else f"{r['drain']['failures']} failures"
            )
        )
        print(
            f"| {r['config']} | {r['distinct']:,} | {r['generated']:,} | {r['depth']} | "
            f"{r['explore_seconds']} | {r['distinct_per_second']:,} | "
            f"{r['distinct_per_cpu_second']:,} | {r['load_average_1min']} | "
            f"{r['peak_rss_mib_coordinator']}/{r['peak_rss_mib_largest_worker']} | "
            f"{drain} | {live_s} |"
        )
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
