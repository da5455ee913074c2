"""Replay time as the source grows: is replay linear in steps plus records?

For each size N it builds one trace — a generated 64-step schedule with faults and
interleaves (seed 17, 4 partitions) whose source is replaced by N records (mostly valid
amendments, with invisible records, offset gaps and some conflicts that quarantine and block
subjects) — and times, in a child process, what ``remora sim-worker --replay`` does with it:
parse the text, run the schedule and the drain (which processes every record under the
oracle's checks), build and serialize the report::

    python benchmarks/replay_scale.py                         # 5k, 20k and 100k records
    python benchmarks/replay_scale.py --records 5000 20000 --timeout 300
    python benchmarks/replay_scale.py --json results.json

Each size runs in its own child process (so one size's memory does not slow the next) with a
timeout: a size that does not finish is reported as ``> timeout``.  Speed is measured here,
never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4


def build_trace_text(records: int, partitions: int = PARTITIONS, seed: int = 17) -> str:
    """The trace text for ``records`` source records (module docstring)."""
    import attrs

    from remora.domain import SourceRecord
    from remora.sim.generate import generate

    base = generate(seed, "conflict", 64, partitions, drain=True)
    source: list[SourceRecord] = []
    per = records // partitions
    for p in range(partitions):
        offset = 0
        revision: dict[str, int] = {}
        for i in range(per if p else records - per * (partitions - 1)):
            subject = f"p{p}-s{i % 97}"
            rev = revision.get(subject, 0) + 1
            if i % 53 == 7:  # a conflict: quarantined, and the subject blocked
                value = {"subject": subject, "op": "correct", "revision": rev + 5, "body": {}}
                visible = True
            elif i % 31 == 3:  # invisible: never processed
                value = {"subject": subject, "op": "correct", "revision": 99, "body": {}}
                visible = False
            else:
                op = "submit" if rev == 1 else "correct"
                value = {"subject": subject, "op": op, "revision": rev, "body": {"n": i}}
                visible = True
                revision[subject] = rev
            data = json.dumps(value, sort_keys=True).encode()
            source.append(SourceRecord(p, offset, visible, subject, data))
            offset += 2 if i % 17 == 0 else 1
    return attrs.evolve(base, source=tuple(source)).dumps()


def measure(records: int) -> dict[str, Any]:
    """Build, then time parse + replay + report for one size (in this process)."""
    from remora.sim.report import run_trace
    from remora.sim.trace import loads

    text = build_trace_text(records)
    start = time.perf_counter()
    trace = loads(text)
    parsed = time.perf_counter()
    report = run_trace(trace)
    ran = time.perf_counter()
    report.dumps()
    done = time.perf_counter()
    return {
        "records": records,
        "trace_mb": round(len(text.encode()) / 1e6, 2),
        "attempts": len(report.document["attempts"]),
        "status": report.status,
        "parse_s": round(parsed - start, 3),
        "replay_s": round(ran - parsed, 3),
        "report_s": round(done - ran, 3),
        "total_s": round(done - start, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[5_000, 20_000, 100_000])
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per size")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child)))
        return
    rows: list[dict[str, Any]] = []
    print(f"{'records':>8} {'trace MB':>8} {'attempts':>8} {'status':<21} {'total s':>8}")
    for n in args.records:
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(n)],
                capture_output=True,
                text=True,
                timeout=args.timeout,
                cwd=REPO,
                check=True,
            )
            row = json.loads(out.stdout)
        except subprocess.TimeoutExpired:
            row = {"records": n, "total_s": None, "timeout_s": args.timeout}
        rows.append(row)
        if row.get("total_s") is None:
            print(f"{n:>8} {'':>8} {'':>8} {'':<21} {'> ' + str(int(args.timeout)):>8}")
        else:
            print(
                f"{n:>8} {row['trace_mb']:>8} {row['attempts']:>8} {row['status']:<21} "
                f"{row['total_s']:>8}"
            )
        sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
