"""The peers' side of ``benchmarks/jobs_peers.py``: a no-op task and a "stall on the first
run" task for procrastinate and RQ, and a submitter.  Runs only in the benchmark's own
environment (``benchmarks/.venv-peers``), never in the project's: the peers are not project
dependencies.

    python jobs_peers_peer_app.py submit procrastinate|rq --count N [--rate R] --dsn|--redis X
"""

from __future__ import annotations

import argparse
import os
import time

import procrastinate

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(
        conninfo=os.environ.get("PEERS_PG_DSN", "postgresql://postgres@127.0.0.1/postgres")
    )
)


@app.task(name="noop", queue="bench")
def noop() -> None:
    """Does nothing: the benchmark measures the queue, not the work."""


@app.task(name="stall", queue="bench", pass_context=True)
def stall(context: procrastinate.JobContext) -> None:
    """Sleeps for a minute on its first attempt (the benchmark SIGKILLs the worker)."""
    if context.job.attempts == 0:
        time.sleep(60)


def rq_noop() -> None:
    """RQ's no-op job."""


def rq_stall() -> None:
    """RQ's stalling job: sleeps for a minute on its first run (the benchmark SIGKILLs the
    worker); a re-run returns at once."""
    import rq

    job = rq.get_current_job()
    assert job is not None
    if job.connection.incr("bench:stall-runs") == 1:
        time.sleep(60)


def submit(system: str, count: int, rate: float, task: str, redis_url: str) -> None:
    gap = 1.0 / rate if rate > 0 else 0.0
    start = time.monotonic()
    if system == "procrastinate":
        with app.open():
            t = noop if task == "noop" else stall
            for i in range(count):
                if gap:
                    time.sleep(max(0.0, start + i * gap - time.monotonic()))
                t.defer()
    else:
        import redis
        import rq

        q = rq.Queue("bench", connection=redis.Redis.from_url(redis_url))
        f = "jobs_peers_peer_app.rq_noop" if task == "noop" else "jobs_peers_peer_app.rq_stall"
        for i in range(count):
            if gap:
                time.sleep(max(0.0, start + i * gap - time.monotonic()))
            q.enqueue(f, job_timeout=600, result_ttl=3600)


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit")
    s.add_argument("system", choices=["procrastinate", "rq"])
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--rate", type=float, default=0.0)
    s.add_argument("--task", choices=["noop", "stall"], default="noop")
    s.add_argument("--redis", default="")
    args = p.parse_args()
    submit(args.system, args.count, args.rate, args.task, args.redis)


if __name__ == "__main__":
    main()
