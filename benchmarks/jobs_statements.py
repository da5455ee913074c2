"""PostgreSQL statements and Redis calls per job of the job runtime (docs/jobs.md,
"Performance beside peers").

One worker (``--workers K``: K, each with its own connections), in this process (its loop,
its handler thread and its reconciler), drains N no-op jobs on a scratch PostgreSQL
database and a private ``redis-server``; every
``psycopg`` cursor ``execute`` and every Redis command it issues is counted (the submits
before it starts are not, nor the watcher that stops it when every job is terminal).  A
benchmark, not a test: it asserts nothing.

    python benchmarks/jobs_statements.py --jobs 300 [--workers K] [--concurrency C]
        [--batch N] [--by-statement] [--by-step]

``--by-step`` attributes every statement, round trip, ``COMMIT``/``ROLLBACK`` and Redis call
to the step that sent it: the innermost method of ``remora/jobs/worker.py`` or
``remora/jobs/reconciler.py`` on the calling stack (``Worker.authorize`` is
``AuthorizeAttempt``, ``Worker.advance`` the stage write, ``Worker.send_outcome``
``SendOutcome``, ``process_outcome`` the ``Accept…``/``RejectOutcome`` step,
``Reconciler.clean_terminal`` ``CleanTerminalCoordination``, ``Reconciler.reconcile_once``
and ``Reconciler._incremental`` the passes' reads; docs/jobs.md "Spec action → code").

Run it against another checkout by putting that checkout first on ``PYTHONPATH`` (the
submit's ``enqueue`` is used only where it exists).
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import redis

from remora.clock import MonotonicClock
from remora.context import Context
from remora.jobs.durable import open_postgres
from remora.jobs.handlers import Registry
from remora.jobs.io import Actor
from remora.jobs.model import JobsConfig
from remora.jobs.postgres import PostgresTarget, PostgresVault
from remora.jobs.redis_coordination import RedisCoordination
from remora.jobs.stores import Stores
from remora.jobs.worker import Worker
from remora.sim.scratch import scratch_database

WATCHER = "jobs-statements-watcher"
# As benchmarks/jobs_peers.py's (not imported from it: it puts this checkout first on
# sys.path, and the point is to be able to measure another one).
REMORA_CONFIG = {"tick_ms": 100, "lease_ticks": 30, "reservation_ticks": 30, "max_attempts": 3}
RECONCILE_EVERY = 0.5


@contextmanager
def private_redis() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield url
    finally:
        client.close()
        proc.terminate()
        proc.wait()


# The modules whose methods are steps (the later split of the worker loop included: loop,
# attempt, settlement, incarnations, credentials); the store layers below them are not.
STEP_FILES = tuple(
    os.path.join("remora", "jobs", f)
    for f in (
        *("worker.py", "reconciler.py", "stores.py", "loop.py", "attempt.py"),
        *("settlement.py", "incarnations.py", "credentials.py"),
    )
)
HELPERS = {"serial", "DaemonPool"}


def step_of_caller() -> str:
    """The innermost worker/reconciler/stores method on the calling stack."""
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if code.co_filename.endswith(STEP_FILES):
            name = code.co_qualname.split(".<locals>")[0]
            if name.split(".")[0] not in HELPERS:
                return name
        f = f.f_back  # type: ignore[assignment]
    return "(other)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=300, help="no-op jobs (300)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="workers in this process, each with its own connections and reconciler (1)",
    )
    p.add_argument(
        "--concurrency", type=int, default=1, help="each worker's slots (--concurrency: 1)"
    )
    p.add_argument(
        "--batch",
        type=int,
        default=1,
        help="each worker's --batch (1: unbatched; at most --concurrency takes effect); "
        "ignored by a checkout without batching",
    )
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--by-statement", action="store_true", help="also list statements per job")
    p.add_argument(
        "--by-step",
        action="store_true",
        help="also attribute statements, round trips, commits and Redis calls to steps",
    )
    args = p.parse_args()
    if args.jobs < 1 or args.workers < 1:
        sys.exit("jobs_statements: --jobs and --workers must be at least 1")
    counting = threading.Event()
    counts: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    steps: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)

    def at_step(what: str) -> None:
        if args.by_step:
            steps[step_of_caller()][what] += 1

    execute = psycopg.Cursor.execute
    command = redis.Redis.execute_command

    fetch_pipeline = psycopg.Cursor._fetch_pipeline
    pipeline_exit = psycopg.Pipeline.__exit__
    pipeline_sync = psycopg.Pipeline.sync

    def counting_here() -> bool:
        return counting.is_set() and threading.current_thread().name != WATCHER

    def counted_execute(self: Any, query: Any, *a: Any, **k: Any) -> Any:
        if counting_here():
            counts["pg"] += 1
            text = " ".join(str(query).split())
            kinds[text[:70]] += 1
            at_step("statements")
            if text in ("COMMIT", "ROLLBACK"):
                at_step(text)
            if self.connection._pipeline is None:
                counts["pg_trips"] += 1  # outside a pipeline every statement waits
                at_step("trips")
        return execute(self, query, *a, **k)

    def counted_fetch_pipeline(self: Any) -> None:
        # A fetch in pipeline mode waits for the server only if the reply is not in yet.
        if counting_here() and not self.pgresult and self.connection._pipeline is not None:
            counts["pg_trips"] += 1
            at_step("trips")
        fetch_pipeline(self)

    def counted_exit(self: Any, *a: Any) -> None:
        if counting_here():
            counts["pg_trips"] += 1  # the Sync: waits for every reply still out
            at_step("trips")
        pipeline_exit(self, *a)

    def counted_sync(self: Any) -> None:
        if counting_here():
            counts["pg_trips"] += 1
            at_step("trips")
        pipeline_sync(self)

    psycopg.Cursor._fetch_pipeline = counted_fetch_pipeline  # type: ignore[method-assign]
    psycopg.Pipeline.__exit__ = counted_exit  # type: ignore[method-assign]
    psycopg.Pipeline.sync = counted_sync  # type: ignore[method-assign]

    def counted_command(self: Any, *a: Any, **k: Any) -> Any:
        if counting.is_set() and threading.current_thread().name != WATCHER:
            counts["redis"] += 1
            at_step("redis")
        return command(self, *a, **k)

    psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
    redis.Redis.execute_command = counted_command  # type: ignore[method-assign]
    with scratch_database(args.pg, "bench_statements") as dsn, private_redis() as url:
        clock = MonotonicClock()
        config = open_postgres(dsn).ensure_config(Context(clock), JobsConfig(**REMORA_CONFIG))

        def open_stores() -> Stores:
            # One set of connections per worker, as each worker process has its own.
            return Stores(
                open_postgres(dsn),
                RedisCoordination(url, config, namespace="statements"),
                PostgresTarget(dsn),
                PostgresVault(dsn),
                clock,
                config,
            )

        stores = open_stores()
        others = [open_stores() for _ in range(args.workers - 1)]
        try:
            client = Actor("client", Context(clock))
            extra = (
                {"enqueue": True}
                if "enqueue" in inspect.signature(stores.submit).parameters
                else {}
            )
            for i in range(args.jobs):
                stores.submit(client, f"job-{i:06d}", "noop", None, **extra)
            registry = Registry()
            registry.handler("noop")(lambda ctx: None)
            workers = [
                Worker(st, f"worker-{i + 1}", registry=registry, concurrency=args.concurrency)
                for i, st in enumerate([stores, *others])
            ]
            for w in workers:
                w.start()
            stop = threading.Event()

            def watch() -> None:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    while True:
                        row = conn.execute(
                            "SELECT count(*) FROM remora_jobs_job "
                            "WHERE phase NOT IN ('Succeeded', 'Failed', 'Cancelled')"
                        ).fetchone()
                        if row is not None and row[0] == 0:
                            break
                        time.sleep(0.02)
                stop.set()

            counting.set()
            started = time.monotonic()
            cpu = time.process_time()
            threading.Thread(target=watch, name=WATCHER, daemon=True).start()
            options: dict[str, Any] = {"reconcile_every": RECONCILE_EVERY}
            if args.batch != 1:  # a checkout without batching takes no such option
                options["batch"] = args.batch
            more = [
                threading.Thread(target=w.run, kwargs={"stop": stop, **options})
                for w in workers[1:]
            ]
            for t in more:
                t.start()
            workers[0].run(stop=stop, **options)
            for t in more:
                t.join()
            seconds = time.monotonic() - started
            cpu = time.process_time() - cpu
            counting.clear()
        finally:
            for st in [stores, *others]:
                st.close()
    n = args.jobs
    print(
        json.dumps(
            {
                "jobs": n,
                "concurrency": args.concurrency,
                "batch": args.batch,
                "seconds": round(seconds, 2),
                "cpu_ms_per_job": round(cpu * 1000 / n, 2),
                "pg_statements_per_job": round(counts["pg"] / n, 1),
                "pg_round_trips_per_job": round(counts["pg_trips"] / n, 1),
                "redis_calls_per_job": round(counts["redis"] / n, 1),
            }
        )
    )
    if args.by_statement:
        for text, k in kinds.most_common(20):
            print(f"{k / n:6.2f}  {text}")
    if args.by_step:
        cols = ("statements", "trips", "COMMIT", "ROLLBACK", "redis")
        print("| step (per job) | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        order = sorted(steps.items(), key=lambda kv: -kv[1]["statements"] - kv[1]["redis"])
        for name, c in order:
            print(f"| {name} | " + " | ".join(f"{c[x] / n:.2f}" for x in cols) + " |")


if __name__ == "__main__":
    main()
