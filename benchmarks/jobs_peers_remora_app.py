"""Remora's side of ``benchmarks/jobs_peers.py``: the measured bodies (a no-op and a 10 ms
sleep), a handler that stalls on its first attempt (the benchmark SIGKILLs the worker
running it), and a paced submitter (the latency runs).

    python jobs_peers_remora_app.py submit --dsn DSN --redis URL --namespace NS
        --count N --rate R --task noop|sleep10|stall [--record DIR]
"""

from __future__ import annotations

import argparse
import secrets
import time

from remora import jobs

SLEEP_S = 0.01


@jobs.handler("noop")
def noop(ctx: jobs.JobContext) -> None:
    """Does nothing: the benchmark measures the runtime, not the work."""


@jobs.handler("sleep10")
def sleep10(ctx: jobs.JobContext) -> None:
    """Sleeps 10 ms: a body that waits (an I/O call) without using the CPU."""
    time.sleep(SLEEP_S)


@jobs.handler("stall")
def stall(ctx: jobs.JobContext) -> str:
    """Sleeps (up to a minute) on its first attempt; a retry returns at once."""
    if ctx.token == 1:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not ctx.cancelled:
            time.sleep(0.02)
    return f"attempt {ctx.token}"


def submit_paced(args: argparse.Namespace) -> None:
    """One client process submitting ``count`` jobs ``1/rate`` seconds apart, each enqueued
    at once (as ``remora jobs submit --redis`` does), its steps recorded like the CLI's."""
    from remora.cli.jobs import open_stores, recorder_for
    from remora.clock import MonotonicClock
    from remora.context import Context
    from remora.jobs.io import Actor

    clock = MonotonicClock()
    stores = open_stores(args, clock)
    name = f"client-{secrets.token_hex(4)}"
    actor = Actor(name, Context(clock), recorder=recorder_for(args, name))
    gap = 1.0 / args.rate if args.rate > 0 else 0.0
    start = time.monotonic()
    try:
        for i in range(args.count):
            if gap:
                time.sleep(max(0.0, start + i * gap - time.monotonic()))
            stores.submit(actor, f"{args.prefix}-{i:06d}", args.task, None, enqueue=True)
    finally:
        stores.close()


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit")
    s.add_argument("--dsn", required=True)
    s.add_argument("--redis", required=True)
    s.add_argument("--namespace", required=True)
    s.add_argument("--record", default=None)
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--rate", type=float, default=0.0)
    s.add_argument("--task", choices=["noop", "sleep10", "stall"], default="noop")
    s.add_argument("--prefix", default="lat")
    args = p.parse_args()
    args.config = None
    args.db = None
    submit_paced(args)


if __name__ == "__main__":
    main()
