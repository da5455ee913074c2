"""The peers' side of ``benchmarks/jobs_peers.py``: the measured bodies (a no-op and a
10 ms sleep) and a "stall on the first run" task for procrastinate, RQ and pgqueuer, the
pgqueuer worker factory, and a submitter.  Runs only in the benchmark's own environment
(``benchmarks/.venv-peers``), never in the project's: the peers are not project
dependencies.

    python jobs_peers_peer_app.py submit procrastinate|rq|pgqueuer --count N [--rate R]
        [--task noop|sleep10|stall] [--redis URL]     (PostgreSQL: $PEERS_PG_DSN)
    python jobs_peers_peer_app.py pgq-worker [--heartbeat-timeout S] [--dequeue-timeout S]

Every worker process runs one body at a time: procrastinate ``--concurrency 1``, RQ's
worker is single-threaded, and pgqueuer's bodies hold a per-process lock (pgqueuer may
pick a second job while one runs: its smallest ``--max-concurrent-tasks`` is twice the
batch size, 1 here).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import procrastinate

DSN = os.environ.get("PEERS_PG_DSN", "postgresql://postgres@127.0.0.1/postgres")
SLEEP_S = 0.01

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=DSN))


@app.task(name="noop", queue="bench")
def noop() -> None:
    """Does nothing: the benchmark measures the queue, not the work."""


@app.task(name="sleep10", queue="bench")
def sleep10() -> None:
    """Sleeps 10 ms (a body that waits without using the CPU)."""
    time.sleep(SLEEP_S)


@app.task(name="stall", queue="bench", pass_context=True)
def stall(context: procrastinate.JobContext) -> None:
    """Sleeps for a minute on its first attempt (the benchmark SIGKILLs the worker)."""
    if context.job.attempts == 0:
        time.sleep(60)


def rq_noop() -> None:
    """RQ's no-op job."""


def rq_sleep10() -> None:
    """RQ's 10 ms job."""
    time.sleep(SLEEP_S)


def rq_stall() -> None:
    """RQ's stalling job: sleeps for a minute on its first run (the benchmark SIGKILLs the
    worker); a re-run returns at once."""
    import rq

    job = rq.get_current_job()
    assert job is not None
    if job.connection.incr("bench:stall-runs") == 1:
        time.sleep(60)


@asynccontextmanager
async def pgq_factory() -> AsyncIterator[Any]:
    """A pgqueuer worker (``pgq run jobs_peers_peer_app:pgq_factory``) on ``$PEERS_PG_DSN``
    with the three bodies; it marks itself in ``bench_ready`` once set up."""
    import asyncpg
    import psycopg
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.models import Job

    conn = await asyncpg.connect(dsn_url())
    pgq = PgQueuer(AsyncpgDriver(conn))
    one_at_a_time = asyncio.Lock()

    @pgq.entrypoint("noop")
    async def pgq_noop(job: Job) -> None:
        async with one_at_a_time:
            pass

    @pgq.entrypoint("sleep10")
    async def pgq_sleep10(job: Job) -> None:
        async with one_at_a_time:
            await asyncio.sleep(SLEEP_S)

    @pgq.entrypoint("stall")
    async def pgq_stall(job: Job) -> None:
        async with one_at_a_time:
            async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as c:
                row = await (
                    await c.execute("INSERT INTO bench_stall DEFAULT VALUES RETURNING n")
                ).fetchone()
            if row is not None and row[0] == 1:
                await asyncio.sleep(60)

    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as c:
        await c.execute("INSERT INTO bench_ready VALUES (pg_backend_pid())")
    try:
        yield pgq
    finally:
        await conn.close()


def dsn_url() -> str:
    """``DSN`` as a URL (asyncpg takes no ``key=value`` connection strings)."""
    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(DSN)
    return (
        f"postgresql://{d.get('user', 'postgres')}@{d.get('host', '127.0.0.1')}:"
        f"{d.get('port', 5432)}/{d.get('dbname', 'postgres')}"
    )


async def pgq_submit(count: int, gap: float, task: str) -> None:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(dsn_url())
    try:
        q = Queries(AsyncpgDriver(conn))
        if not gap:
            await q.enqueue([task] * count, [None] * count, [0] * count)
            return
        start = time.monotonic()
        for i in range(count):
            await asyncio.sleep(max(0.0, start + i * gap - time.monotonic()))
            await q.enqueue(task, None)
    finally:
        await conn.close()


def submit(system: str, count: int, rate: float, task: str, redis_url: str) -> None:
    gap = 1.0 / rate if rate > 0 else 0.0
    start = time.monotonic()
    if system == "procrastinate":
        with app.open():
            t = {"noop": noop, "sleep10": sleep10, "stall": stall}[task]
            for i in range(count):
                if gap:
                    time.sleep(max(0.0, start + i * gap - time.monotonic()))
                t.defer()
    elif system == "pgqueuer":
        asyncio.run(pgq_submit(count, gap, task))
    else:
        import redis
        import rq

        q = rq.Queue("bench", connection=redis.Redis.from_url(redis_url))
        f = f"jobs_peers_peer_app.rq_{task}"
        for i in range(count):
            if gap:
                time.sleep(max(0.0, start + i * gap - time.monotonic()))
            q.enqueue(f, job_timeout=600, result_ttl=3600)


def pgq_worker(heartbeat_timeout: float, dequeue_timeout: float) -> None:
    """A pgqueuer worker, as ``pgq run jobs_peers_peer_app:pgq_factory --batch-size 1
    --max-concurrent-tasks 2`` would start it (``pgqueuer.run``: pgqueuer 1.6.0's ``pgq
    run`` fails on its own ``--log-level`` option); SIGTERM stops it."""
    from datetime import timedelta

    import pgqueuer

    asyncio.run(
        pgqueuer.run(
            pgq_factory,
            batch_size=1,
            max_concurrent_tasks=2,
            heartbeat_timeout=timedelta(seconds=heartbeat_timeout),
            dequeue_timeout=timedelta(seconds=dequeue_timeout),
        )
    )


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("pgq-worker")
    w.add_argument("--heartbeat-timeout", type=float, default=30.0)
    w.add_argument("--dequeue-timeout", type=float, default=30.0)
    s = sub.add_parser("submit")
    s.add_argument("system", choices=["procrastinate", "rq", "pgqueuer"])
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--rate", type=float, default=0.0)
    s.add_argument("--task", choices=["noop", "sleep10", "stall"], default="noop")
    s.add_argument("--redis", default="")
    args = p.parse_args()
    if args.cmd == "pgq-worker":
        pgq_worker(args.heartbeat_timeout, args.dequeue_timeout)
        return
    submit(args.system, args.count, args.rate, args.task, args.redis)


if __name__ == "__main__":
    main()
