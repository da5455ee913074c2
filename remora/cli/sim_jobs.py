"""``remora sim-jobs``: replay a ``job-schedule-v1`` trace through the real job runtime
(memory stores, logical time, every step refinement-checked, the fair drain judged); and
the job-trace half of ``remora reduce``.

A ``job-parallel-v1`` example (a parallel job machine's failure,
:mod:`remora.sim.jobs.parallel`) is recognized and its recorded schedule re-run ``--runs K``
times (default 5), each on fresh stores; the report says in how many the failure came back
(``reproduced``).

Exit codes: 0 the run refines the spec and drains to quiescence; 1 it fails (the failure
string is printed in the JSON report, the same string the Hypothesis machine raised); 2 the
trace is rejected (one line naming the JSON path) or bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from remora.cli.common import EXIT_FAILED, EXIT_OK, exit_codes, read_input
from remora.errors import InvalidInput
from remora.outputs import write_new
from remora.sim.artifacts import failures_dir, job_replay_command
from remora.sim.jobs.trace import JobTrace, is_job_trace, loads


def read_job_trace(path: str) -> JobTrace:
    return read_input(path, loads)


def is_job_trace_file(path: str) -> bool:
    """Whether ``path`` holds a job trace (``remora reduce`` dispatches on this)."""
    try:
        return is_job_trace(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return False


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sim-jobs",
        help="replay a job-runtime schedule (job-schedule-v1) and print its report",
        description="Replay a saved job trace through the real job runtime on memory stores "
        "and logical time, refinement-checking every step against Remora.tla, then the "
        "fault-free fair drain; a failure is explained on stderr.",
        epilog=exit_codes(
            "the run passes",
            "a failure (refinement, invariant or drain)",
            "bad usage or a rejected trace",
        ),
    )
    p.add_argument("--replay", metavar="FILE", required=True, help="the job trace to replay")
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="K",
        help="a parallel example (job-parallel-v1): how often to re-run its recorded "
        "schedule (default 5)",
    )
    p.add_argument(
        "--dsn",
        default=None,
        help="a postgres parallel example: a PostgreSQL database it may empty of its "
        "remora_jobs rows",
    )
    p.add_argument(
        "--redis",
        default="redis://127.0.0.1:6379/0",
        metavar="URL",
        help="a postgres parallel example: the Redis server (default %(default)s; a "
        "namespace of its own per run)",
    )
    p.set_defaults(func=sim_jobs)


def is_parallel_file(path: str) -> bool:
    from remora.sim.jobs.parallel import is_job_parallel

    try:
        with Path(path).open(encoding="utf-8") as f:
            return is_job_parallel(f.read(400))
    except (OSError, UnicodeDecodeError):
        return False


def replay_parallel(args: argparse.Namespace) -> int:
    from remora.sim.jobs import parallel

    example = read_input(args.replay, parallel.loads)
    if args.runs is not None and args.runs < 1:
        raise InvalidInput("--runs must be at least 1")
    if (example.store == "postgres") != (args.dsn is not None):
        raise InvalidInput("--dsn is required for a postgres example, and only then")
    services = None if args.dsn is None else parallel.Services(args.dsn, args.redis)
    report = parallel.replay(example, args.runs, services=services)
    print(json.dumps(report.document(example), indent=2, ensure_ascii=False))
    if report.first is not None:
        print(
            f"remora sim-jobs: {report.first.failure}: reproduced in {report.failed} of "
            f"{report.runs} runs of the recorded schedule",
            file=sys.stderr,
        )
        print(f"remora sim-jobs: {report.first.detail}", file=sys.stderr)
    return EXIT_OK if report.status == "PASS" else EXIT_FAILED


def sim_jobs(args: argparse.Namespace) -> int:
    from remora.sim.jobs.run import run_trace

    if is_parallel_file(args.replay):
        return replay_parallel(args)
    if args.runs is not None or args.dsn is not None:
        raise InvalidInput("--runs and --dsn apply to a parallel example (job-parallel-v1) only")
    trace = read_job_trace(args.replay)
    out = run_trace(trace)
    report = {
        "implementation": "job-schedule-v1",
        "status": "PASS" if out.failure is None else "ERROR",
        "failure": out.failure,
        "detail": out.detail,
        "steps": out.steps,
        "actions": dict(sorted(out.actions.items())),
    }
    print(json.dumps(report, indent=2))
    return EXIT_OK if out.failure is None else EXIT_FAILED


def reduce_jobs(path: str) -> int:
    """``remora reduce FILE`` for a job trace."""
    from remora.sim.jobs.reduce import JobReducer

    trace = read_job_trace(path)
    try:
        reducer = JobReducer(trace)
    except InvalidInput as exc:
        print(f"remora reduce: {path}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    where = failures_dir()
    stem = Path(path).stem.removesuffix("-reduced")
    original = write_new(where / f"{stem}.json", trace.dumps())
    best = reducer.run()
    reduced = write_new(where / f"{stem}-reduced.json", best.dumps())
    print(f"failure: {reducer.failure}")
    print(f"steps: {len(trace.steps)} -> {len(best.steps)} ({reducer.tries} replays)")
    print(f"original: {job_replay_command(original)}")
    print(f"reduced:  {job_replay_command(reduced)}")
    return EXIT_OK


__all__ = ["is_job_trace_file", "reduce_jobs", "register"]
