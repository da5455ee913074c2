"""Where a Remora worker process spends its CPU during a ``jobs_peers.py`` throughput run:
``py-spy`` samples every worker process (idle threads excluded; ``--gil``: only the thread
holding the GIL) from the moment they are up while K workers drain N
jobs, exactly as ``benchmarks/jobs_peers.py`` runs them (same scratch database, private
Redis, CLI workers, recording on).  A benchmark, not a test: it asserts nothing.

    python benchmarks/jobs_profile.py --jobs 500 --workers 1 [--body noop] [--out DIR]

Needs ``py-spy`` on ``PATH`` (``pip install py-spy``: a profiling tool, not a project
dependency) and the right to trace the workers (root, or ``ptrace_scope`` 0).  Prints the
top functions by self time, the share of the samples by package of the leaf frame, and the
share by step (the innermost method of ``remora/jobs/worker.py``/``reconciler.py`` on the
stack, as ``jobs_statements.py --by-step``); the raw stacks stay in ``--out``.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jobs_peers  # benchmarks/ is this script's directory, first on sys.path

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
PACKAGES = (
    ("psycopg", "/psycopg/"),
    ("psycopg_binary", "/psycopg_binary/"),
    ("redis-py", "/redis/"),
    ("hiredis", "/hiredis/"),
    ("remora", "/remora/"),
    ("attrs", "/attr/"),
)
# Leaf frames that are waits, not work (py-spy counts a timed lock wait as active).
WAITS = {"Condition.wait", "Event.wait", "Lock.acquire", "select", "poll", "sleep"}
STEP_FILES = tuple(
    f"remora/jobs/{f}"
    for f in (
        *("worker.py", "reconciler.py", "stores.py", "loop.py", "attempt.py"),
        *("settlement.py", "incarnations.py", "credentials.py"),
    )
)


def parse(line: str) -> tuple[list[tuple[str, str]], int]:
    stack, _, count = line.rstrip().rpartition(" ")
    frames = []
    for raw in stack.split(";"):
        m = FRAME.match(raw)
        if m:
            frames.append((m["func"], m["file"]))
    return frames, int(count)


def package(file: str) -> str:
    for name, part in PACKAGES:
        if part in file:
            return name
    return "python stdlib/other" if file else "native/unknown"


def step(frames: list[tuple[str, str]]) -> str:
    for func, file in reversed(frames):
        if file.endswith(STEP_FILES):
            name = func.split(".<locals>")[0]
            if name.split(".")[0] not in ("serial", "DaemonPool"):
                return name
    return "(outside a step)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--body", default="noop", choices=sorted(jobs_peers.BODIES))
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second (200)")
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--out", help="keep the raw stacks here (default: a temporary folder)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--gil",
        action="store_true",
        help="sample only the thread holding the GIL (default: py-spy's idle detection)",
    )
    args = p.parse_args()
    spy = shutil.which("py-spy")
    if spy is None:
        sys.exit("jobs_profile: py-spy is not on PATH (pip install py-spy)")
    out = Path(args.out or tempfile.mkdtemp(prefix="jobs-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    rds = jobs_peers.PrivateRedis()
    spies: list[subprocess.Popen[bytes]] = []
    try:
        with jobs_peers.system("remora", args.body, args.pg, rds) as s:
            s.submit(args.jobs)
            started = time.monotonic()
            workers = [s.start_worker(i) for i in range(args.workers)]
            # Attached once the workers are up: their imports and start-up are not profiled.
            s.wait_ready(args.workers)
            for i, w in enumerate(workers):
                spies.append(
                    subprocess.Popen(
                        [
                            *(spy, "record", "--pid", str(w.pid), "--rate", str(args.rate)),
                            *("--format", "raw", "--full-filenames"),
                            *(["--gil"] if args.gil else []),
                            *("--output", str(out / f"worker-{i}.txt")),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            smp = jobs_peers.drive(s, args.jobs, max(120.0, args.jobs / 2))
            seconds = time.monotonic() - started
            s.stop_all()
            for sp in spies:
                sp.wait(timeout=60)
            validation = s.validate()
    finally:
        rds.close()
    self_time: collections.Counter[str] = collections.Counter()
    by_package: collections.Counter[str] = collections.Counter()
    by_step: collections.Counter[str] = collections.Counter()
    total = 0
    waiting = 0
    for path in sorted(out.glob("worker-*.txt")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            frames, count = parse(line)
            if not frames:
                continue
            if frames[-1][0] in WAITS:
                waiting += count  # a blocking wait py-spy did not see as idle
                continue
            func, file = frames[-1]
            total += count
            self_time[f"{func} ({file})"] += count
            by_package[package(file)] += count
            by_step[step(frames)] += count
    done = smp.samples[-1][1] if smp.samples else 0
    print(
        f"{args.workers} worker(s), {done} {args.body} jobs in {seconds:.1f} s "
        f"(py-spy attached, {args.rate} Hz); {total} samples ({waiting} more in waits, left "
        "out); recording "
        f"{'valid' if validation and validation['valid'] else validation}; stacks in {out}"
    )
    if not total:
        return
    print("\n| self time | function (file) |\n|---|---|")
    for name, c in self_time.most_common(args.top):
        print(f"| {100 * c / total:.1f} % | {name} |")
    print("\n| share of samples (leaf frame) | package |\n|---|---|")
    for name, c in by_package.most_common():
        print(f"| {100 * c / total:.1f} % | {name} |")
    print("\n| share of samples (inclusive) | step |\n|---|---|")
    for name, c in by_step.most_common(15):
        print(f"| {100 * c / total:.1f} % | {name} |")


if __name__ == "__main__":
    main()
