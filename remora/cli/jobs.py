"""``remora jobs``: submit, run, cancel, inspect and reconcile jobs.

Stores: SQLite (``--db``, default ``remora-jobs.sqlite3``) with target staging and vault
directories beside it, and in-process coordination — or PostgreSQL (``--dsn``: durable,
target and vault schemas) and Redis (``--redis URL``: coordination).  Exit codes: 0 done,
1 a failure (e.g. an unreachable server, a worker error), 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import attrs

from remora import strictjson
from remora.cli import jobs_views as views
from remora.cli.common import EXIT_FAILED, EXIT_OK, exit_codes, int_at_least, int_in
from remora.clock import Clock, EpochClock
from remora.context import Context
from remora.errors import InvalidInput, OutageExceeded, Unavailable
from remora.jobs.coordination import Coordination, MemoryCoordination
from remora.jobs.handlers import load_app, load_worker_app
from remora.jobs.io import NULL_RECORDER, Actor, FileRecorder, LogRecorder, Recorder, TeeRecorder
from remora.jobs.loop import DEFAULT_BATCH, WorkerLoop
from remora.jobs.model import DEFAULT_QUEUE, MAX_PRIORITY, JobsConfig
from remora.jobs.processes import ProcessExecutor
from remora.jobs.reconciler import Reconciler
from remora.jobs.settlement import quietly
from remora.jobs.stores import Stores
from remora.jobs.target import DirectoryTarget, DirectoryVault, check_id
from remora.jobs.worker import Worker
from remora.worker.outage import DEFAULT_OUTAGE_BUDGET, OutageWatch, outage_policy

# psycopg logs "error ignored terminating <psycopg.Pipeline …>" when a broken connection
# ends a pipelined transaction; the store has already turned that failure into a typed
# error (settled, resolved or reported on its own line), so the command keeps its
# one-line errors instead of printing the driver's log line beside them.
logging.getLogger("psycopg").addHandler(logging.NullHandler())
logging.getLogger("psycopg").propagate = False

DEFAULT_DB = "remora-jobs.sqlite3"
WIDTH = 100
"""The human output of ``status`` and ``history`` fits in this many columns."""
EMBEDDED_LOCK = 0x52454D4A4F42  # "REMJOB": one in-process-coordination worker per database
LOCK_WAIT = 2.0  # seconds a worker waits for that lock before it is refused

MAX_PAYLOAD_BYTES = 1 << 20
"""The largest payload accepted (``--payload`` or ``--payload-file``), in UTF-8 bytes."""
MAX_CONFIG_VALUE = 1_000_000_000
"""The largest value of a ``--config`` field."""

_positive = int_at_least(1)


def _instant(text: str) -> float:
    """``--at``: an ISO 8601 time (UTC unless it has an offset) as seconds since 1970."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 time: {text!r} (e.g. 2026-12-01T08:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _budget(text: str) -> float:
    value = _seconds(text)
    if value > 86400:
        raise argparse.ArgumentTypeError(f"must be in 0..86400 seconds, got {text}")
    return value


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "jobs",
        help="the job runtime: submit, worker, cancel, status, reconcile",
        description="Fenced, exactly-once jobs (docs/jobs.md).  Default stores: SQLite "
        f"({DEFAULT_DB}) + in-process coordination; --dsn/--redis for PostgreSQL/Redis.",
    )
    cmds = p.add_subparsers(dest="jobs_command", metavar="COMMAND", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        where = q.add_mutually_exclusive_group()
        where.add_argument("--db", metavar="FILE", help=f"SQLite file (default {DEFAULT_DB})")
        where.add_argument("--dsn", metavar="DSN", help="PostgreSQL DSN (durable, target, vault)")
        q.add_argument("--redis", metavar="URL", help="Redis URL for the coordination store")
        q.add_argument(
            "--namespace", default="remora:jobs", help="Redis key namespace (default remora:jobs)"
        )
        q.add_argument(
            "--config",
            metavar="JSON",
            help='deployment limits on first use, e.g. \'{"max_attempts": 3, "tick_ms": 1000, '
            '"lease_ticks": 10}\' (stored in the durable store, then fixed)',
        )
        q.add_argument(
            "--record", metavar="DIR", help="append every step this process takes to DIR/*.jsonl"
        )

    fail = "a failure (e.g. an unreachable server, a worker error)"
    bad = "bad usage or bad input"
    s = cmds.add_parser(
        "submit",
        help="durably accept jobs",
        epilog=exit_codes("the jobs were accepted", fail, bad),
    )
    common(s)
    s.add_argument("handler", metavar="HANDLER", help="the registered handler that runs the job")
    given = s.add_mutually_exclusive_group()
    given.add_argument("--payload", metavar="JSON", help="the job's input (JSON; default null)")
    given.add_argument(
        "--payload-file",
        metavar="FILE",
        help=f"read the job's input (JSON) from FILE, or '-' for stdin (at most "
        f"{MAX_PAYLOAD_BYTES} bytes)",
    )
    s.add_argument("--id", dest="job_id", metavar="ID", help="job id (default: generated)")
    s.add_argument("--count", type=_positive, default=1, metavar="N", help="submit N jobs")
    s.add_argument("--app", metavar="MODULE", help="check HANDLER is registered by MODULE")
    s.add_argument(
        "--timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        help="an attempt of the job still running after SECONDS ends as a retryable failure "
        "(kept with the job; the handler's own timeout applies instead when smaller)",
    )
    s.add_argument(
        "--queue",
        default=DEFAULT_QUEUE,
        metavar="NAME",
        help=f"the named queue the job waits in (default {DEFAULT_QUEUE}); a worker takes "
        "jobs of the queues it names",
    )
    s.add_argument(
        "--priority",
        type=int_in(-MAX_PRIORITY, MAX_PRIORITY),
        default=0,
        metavar="N",
        help="higher first among a queue's queued jobs (default 0; "
        f"{-MAX_PRIORITY} to {MAX_PRIORITY})",
    )
    later = s.add_mutually_exclusive_group()
    later.add_argument(
        "--at",
        type=_instant,
        metavar="TIME",
        help="not before TIME: ISO 8601, e.g. 2026-12-01T08:00:00Z (no offset: UTC)",
    )
    later.add_argument(
        "--in",
        dest="delay",
        type=_seconds,
        metavar="SECONDS",
        help="not before SECONDS from now (the durable store's clock)",
    )
    s.set_defaults(func=submit)

    w = cmds.add_parser(
        "worker",
        help="run a worker incarnation",
        epilog=exit_codes(
            "stopped cleanly (a first SIGTERM/SIGINT, or idle with --until-idle)",
            "a failure: a store unavailable at start or for longer than --outage-budget, "
            "the incarnation declared down, a second signal",
            bad,
        ),
    )
    common(w)
    w.add_argument("--app", required=True, metavar="MODULE", help="module registering handlers")
    w.add_argument(
        "--concurrency",
        type=_positive,
        default=1,
        metavar="N",
        help="jobs executed at once (default 1)",
    )
    w.add_argument(
        "--batch",
        type=_positive,
        default=DEFAULT_BATCH,
        metavar="N",
        help="batch the durable transitions (at most --concurrency): reserve and authorize up "
        "to N jobs in one transaction, commit up to N finished attempts in one, each row "
        f"guarded by its own attempt token (default {DEFAULT_BATCH}: one transaction where "
        "there were N once slots free up together, a few ms of wait for a finished attempt "
        "only while others still run; 1: every transition in its own transaction)",
    )
    w.add_argument("--id", dest="worker_id", metavar="ID", help="incarnation id (default fresh)")
    w.add_argument("--until-idle", action="store_true", help="exit once every job is terminal")
    w.add_argument(
        "--poll",
        type=float,
        default=0.05,
        metavar="SECONDS",
        help="pause between looks for work when idle (default 0.05)",
    )
    w.add_argument(
        "--reconcile-every",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="run the reconciler's ambient actions this often (default 0.5)",
    )
    w.add_argument(
        "--grace",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, let running attempts finish this long, then abandon them "
        "(default 30); a second signal ends the worker at once (exit 1)",
    )
    w.add_argument(
        "--isolation",
        choices=("process", "thread"),
        default="process",
        help="where handlers run: process (default; a pool of --concurrency child processes, "
        "reused, killed to end an attempt that overran its timeout or was cancelled) or "
        "thread (cannot end a handler that hangs: its thread is left behind)",
    )
    w.add_argument(
        "--outage-budget",
        type=_budget,
        default=DEFAULT_OUTAGE_BUDGET,
        metavar="SECONDS",
        help="while PostgreSQL or Redis is unavailable, retry with backoff for up to SECONDS, "
        "saying once that it waits, then resume; past it, exit 1 with one line "
        f"(default {DEFAULT_OUTAGE_BUDGET:g})",
    )
    w.add_argument(
        "--queue",
        dest="queues",
        action="append",
        metavar="NAME",
        help=f"take jobs of this queue (repeat for several; default {DEFAULT_QUEUE})",
    )
    w.add_argument(
        "--metrics-port",
        type=int_in(0, 65535),
        metavar="N",
        help="serve Prometheus metrics on port N (0: a free one; the address is printed on stderr)",
    )
    w.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address the metrics are served on (default 127.0.0.1)",
    )
    w.add_argument(
        "--log-format",
        choices=("text", "json", "none"),
        default="text",
        help="one stderr line per attempt transition (reserve, start, checkpoint, outcome, "
        "accept, reap, declare-down) and per outage (waiting, resumed): text (default), json, "
        "or none",
    )
    w.set_defaults(func=worker)

    c = cmds.add_parser(
        "cancel",
        help="request cancellation of jobs",
        epilog=exit_codes(
            "every cancellation was recorded", f"{fail}, or a job not cancelable", bad
        ),
    )
    common(c)
    c.add_argument("jobs", nargs="+", metavar="JOB", help="ids of the jobs to cancel")
    c.set_defaults(func=cancel)

    st = cmds.add_parser(
        "status",
        help="show jobs (reads only the durable store)",
        description="Each job's phase, handler, queue, current attempt and its worker, "
        "times, elapsed time, progress, and the current attempt's error.  A table of every "
        "job; with JOB ids, each job in full.  Reads only the durable store (works with "
        "Redis down).",
        epilog=exit_codes("the jobs were shown", fail, bad),
    )
    common(st)
    st.add_argument("jobs", nargs="*", metavar="JOB", help="ids of the jobs to show (default all)")
    st.add_argument("--json", action="store_true", help="print the jobs as JSON (docs/jobs.md)")
    st.set_defaults(func=status)

    h = cmds.add_parser(
        "history",
        help="every attempt of a job and why it ended (reads only the durable store)",
        epilog=exit_codes("the history was shown", fail, f"{bad} (an unknown job)"),
    )
    common(h)
    h.add_argument("job", metavar="JOB", help="the job's id")
    h.add_argument("--json", action="store_true", help="print the history as JSON")
    h.set_defaults(func=history_cmd)

    d = cmds.add_parser(
        "dashboard",
        help="serve a live, read-only page of the jobs (reads only the durable store)",
        description="Jobs by phase and queue, running attempts, workers and their "
        "heartbeats, recent failures, each job's attempt history; the page refreshes "
        "itself.  Served by Python's http.server until interrupted.",
        epilog=exit_codes("stopped by SIGINT/SIGTERM", fail, bad),
    )
    common(d)
    d.add_argument(
        "--port", type=int_in(0, 65535), default=8022, metavar="N", help="port (default 8022)"
    )
    d.add_argument(
        "--host", default="127.0.0.1", metavar="HOST", help="address (default 127.0.0.1)"
    )
    d.add_argument(
        "--refresh",
        type=int_in(1, 3600),
        default=5,
        metavar="SECONDS",
        help="the page reloads itself this often (default 5)",
    )
    d.set_defaults(func=dashboard)

    r = cmds.add_parser(
        "reconcile",
        help="run the reconciler's ambient actions once",
        epilog=exit_codes("the actions ran", fail, bad),
    )
    common(r)
    r.set_defaults(func=reconcile)


def parse_config(text: str) -> JobsConfig:
    """``--config``: a strict JSON object of :class:`JobsConfig` fields, each an integer in
    its range; refused with one line naming the field."""
    try:
        doc = strictjson.loads(text)
    except InvalidInput as exc:
        raise InvalidInput(f"--config is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidInput("--config must be a JSON object of limits")
    fields = [f.name for f in attrs.fields(JobsConfig)]
    for name, value in doc.items():
        if name not in fields:
            known = ", ".join(fields)
            raise InvalidInput(f"--config: unknown field {strictjson.short(name)} (known: {known})")
        low = 0 if name == "down_after_ticks" else 1
        if not strictjson.is_int(value) or not low <= value <= MAX_CONFIG_VALUE:
            raise InvalidInput(
                f"--config: {name} must be an integer from {low} to {MAX_CONFIG_VALUE}, "
                f"not {strictjson.short(value)}"
            )
    try:
        return JobsConfig(**doc)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"--config: {exc}") from None


def open_stores(
    args: argparse.Namespace,
    clock: Clock,
    *,
    existing: bool = False,
    coordination: bool = True,
) -> Stores:
    """``existing``: refuse a missing SQLite file rather than create it (commands that
    only read or change existing jobs).  ``coordination=False``: never reach Redis (the
    command reads only the durable store)."""
    config = parse_config(args.config) if args.config else None
    ctx = Context(clock)
    if args.dsn is None:
        db = Path(args.db or DEFAULT_DB)
        if db.is_dir():
            raise InvalidInput(f"{db}: is a directory; --db names an SQLite database file")
        if existing and not db.is_file():
            raise InvalidInput(f"{db}: no such jobs database file (jobs submit creates it)")
    if args.dsn is not None:
        from remora.jobs.durable import open_postgres
        from remora.jobs.postgres import PostgresTarget, PostgresVault

        durable = open_postgres(args.dsn)
        target: Any = PostgresTarget(args.dsn)
        vault: Any = PostgresVault(args.dsn)
    else:
        from remora.jobs.durable import open_sqlite

        db = Path(args.db or DEFAULT_DB)
        if db.is_dir():
            raise InvalidInput(f"{db}: is a directory; --db names an SQLite database file")
        durable = open_sqlite(db)
        target = DirectoryTarget(db.with_name(db.name + ".stage"))
        vault = DirectoryVault(db.with_name(db.name + ".vault"))
    chosen = durable.ensure_config(ctx, config)
    coord: Coordination
    if args.redis and coordination:
        from remora.jobs.redis_coordination import RedisCoordination

        redis_store = RedisCoordination(args.redis, chosen, namespace=args.namespace)
        redis_store.ping()
        coord = redis_store
    else:
        coord = MemoryCoordination(clock, chosen)
    return Stores(durable, coord, target, vault, clock, chosen)


def recorder_for(args: argparse.Namespace, name: str) -> Recorder:
    if not args.record:
        return NULL_RECORDER
    return FileRecorder(Path(args.record) / f"{name}.jsonl")


def read_payload(args: argparse.Namespace) -> Any:
    """The job's input: ``--payload``, or ``--payload-file`` (``-``: stdin), at most
    :data:`MAX_PAYLOAD_BYTES` bytes of UTF-8, read by the strict JSON reader."""
    if args.payload_file is None:
        what = "--payload"
        raw = (args.payload if args.payload is not None else "null").encode(
            "utf-8", "surrogatepass"
        )
    else:
        what = "--payload-file " + args.payload_file
        try:
            if args.payload_file == "-":
                raw = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
            else:
                with open(args.payload_file, "rb") as f:
                    raw = f.read(MAX_PAYLOAD_BYTES + 1)
        except OSError as exc:
            raise InvalidInput(f"{what}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise InvalidInput(f"{what}: larger than {MAX_PAYLOAD_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{what}: not UTF-8 text") from None
    try:
        return strictjson.loads(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{what} is not JSON: {exc}") from None


def submit(args: argparse.Namespace) -> int:
    payload = read_payload(args)
    if args.app:
        load_app(args.app).get(args.handler)
    if args.job_id:
        check_id("job", args.job_id)
    check_id("queue", args.queue)
    clock = EpochClock()
    stores = open_stores(args, clock)
    name = f"client-{secrets.token_hex(4)}"
    actor = Actor(name, Context(clock), recorder=recorder_for(args, name))
    try:
        for i in range(args.count):
            job_id = args.job_id or f"job-{secrets.token_hex(6)}"
            if args.job_id and args.count > 1:
                job_id = f"{args.job_id}-{i + 1}"
            # With Redis the submitter enqueues at once (workers see the job without
            # waiting for a reconcile pass); embedded coordination is the worker's own.
            stores.submit(
                actor,
                job_id,
                args.handler,
                payload,
                enqueue=bool(args.redis),
                timeout=args.timeout or 0.0,
                queue=args.queue,
                priority=args.priority,
                delay=args.delay,
                due_at=args.at,
            )
            print(job_id)
    finally:
        stores.close()
    return EXIT_OK


@contextmanager
def sole_embedded_worker(args: argparse.Namespace) -> Iterator[None]:
    """Without ``--redis`` the coordination store lives inside the worker process, so only
    one worker process may run per durable store: a second one would see none of the first
    one's leases and reap its live attempts.  Held: an exclusive lock on a file beside the
    SQLite database, or a PostgreSQL session advisory lock."""
    if args.redis:
        yield
        return
    busy = InvalidInput(
        "another worker process already runs on this store with in-process coordination; "
        "use --redis to run several"
    )
    if args.dsn is None:
        import fcntl

        db = Path(args.db or DEFAULT_DB)
        with db.with_name(db.name + ".worker-lock").open("a") as f:
            give_up = time.monotonic() + LOCK_WAIT
            while True:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() >= give_up:
                        raise busy from None
                    time.sleep(0.05)
            yield
        return
    try:
        import psycopg
    except ImportError:
        raise InvalidInput("--dsn needs psycopg: pip install 'remora[postgres]'") from None

    try:
        conn = psycopg.connect(args.dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise Unavailable(f"cannot reach PostgreSQL: {' '.join(str(exc).split())}") from None
    except Exception as exc:  # e.g. a malformed DSN (psycopg raises ProgrammingError)
        raise InvalidInput(f"--dsn: {' '.join(str(exc).split())}") from None
    with conn:
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (EMBEDDED_LOCK,)).fetchone()
        except psycopg.Error as exc:
            raise Unavailable(f"PostgreSQL worker lock: {' '.join(str(exc).split())}") from None
        if not (row and row[0]):
            raise busy
        yield


def worker(args: argparse.Namespace) -> int:
    registry = load_worker_app(args.app)
    with sole_embedded_worker(args):
        return _worker(args, registry)


def _worker(args: argparse.Namespace, registry: Any) -> int:
    queues = tuple(dict.fromkeys(args.queues or [DEFAULT_QUEUE]))
    for queue in queues:
        check_id("queue", queue)
    clock = EpochClock()
    stores = open_stores(args, clock)
    worker_id = args.worker_id or _fresh_id()
    check_id("worker", worker_id)
    recorder = recorder_for(args, worker_id)
    if args.log_format != "none":
        recorder = TeeRecorder(recorder, LogRecorder(sys.stderr, args.log_format))
    metrics = None
    if args.metrics_port is not None:
        from remora.jobs.metrics import JobMetrics

        metrics = JobMetrics(stores.durable)
        recorder = TeeRecorder(recorder, metrics.recorder())
        try:
            port = metrics.serve(args.metrics_host, args.metrics_port)
        except OSError as exc:
            stores.close()
            raise InvalidInput(
                f"--metrics-port {args.metrics_port}: cannot serve on "
                f"{args.metrics_host}: {exc.strerror or exc}"
            ) from None
        _say(f"remora jobs worker: metrics at http://{args.metrics_host}:{port}/metrics")
    w = Worker(
        stores,
        worker_id,
        concurrency=args.concurrency,
        recorder=recorder,
        registry=registry,
        durable_guard=not args.redis,
        retry=outage_policy(args.outage_budget),
        queues=queues,
    )
    outage = OutageWatch(args.outage_budget, clock, _outage_line(args.log_format))
    executor: ProcessExecutor | None = None
    if args.isolation == "process":
        executor = ProcessExecutor(args.app, args.concurrency, name=worker_id)
    stop = threading.Event()

    signals: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Counted first: a second signal's handler may run in the middle of this one.
        signals.append(signum)
        name = signal.Signals(signum).name
        if len(signals) > 1:
            # The second signal: end now, the handlers' processes with it (nothing is
            # marked down: like a crash, the next incarnation or the reaper takes the
            # attempts back).
            if executor is not None:
                executor.kill_now()
            _say(f"remora jobs worker: {name} again: exiting at once")
            os._exit(EXIT_FAILED)
        stop.set()
        _say(
            f"remora jobs worker: {name}: stopping (no new jobs; running attempts get "
            f"{args.grace:g}s); a second signal exits at once"
        )

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def idle() -> None:
        # Jobs of handlers this worker lacks, or of queues it does not serve, stay queued
        # for another worker: not its work.
        names = set(registry.names())
        if args.until_idle and not any(
            j.handler in names and j.queue in queues for j in stores.durable.jobs(active_only=True)
        ):
            stop.set()

    try:
        if executor is not None:
            executor.prestart()  # before the incarnation starts: a child that fails is exit 2
        w.start()
        if not args.redis:
            declare_earlier_incarnations_down(stores, w, recorder)
        WorkerLoop(
            w,
            poll=args.poll,
            reconcile_every=args.reconcile_every,
            on_idle=idle,
            grace=args.grace,
            executor=executor,
            outage=outage,
            batch=args.batch,
        ).run(stop)
        # A last pass: clean staging and coordination of what just finished.  Best
        # effort: a store out of reach now (a link cut) leaves it to the next pass of
        # any reconciler — the work is done, so the worker still exits 0 (it exited 1 on
        # a PostgreSQL cut that landed here: tests/jobs/test_real_faults.py).
        final = Reconciler(stores, f"{worker_id}.final", recorder=recorder)
        quietly(final.reconcile_once)
    except OutageExceeded as exc:
        _say(f"remora jobs worker: {exc}")
        return EXIT_FAILED
    finally:
        if executor is not None:
            executor.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if metrics is not None:
            metrics.close()
        stores.close()
    return EXIT_OK


def _outage_line(log_format: str) -> Callable[[str], None]:
    """How the worker says it waits for a store (and that it resumed): a log line in the
    worker's ``--log-format`` (none: nothing)."""
    if log_format == "none":
        return lambda line: None
    if log_format == "json":
        return lambda line: _say(
            json.dumps({"ts": round(time.time(), 3), "event": "outage", "message": line})
        )
    return lambda line: _say(f"remora jobs worker: {line}")


def declare_earlier_incarnations_down(stores: Any, w: Worker, recorder: Any) -> int:
    """Embedded mode: this process holds the store's worker lock, so every other
    incarnation still up is a dead process — declared down now (``CrashWorker``, its
    ``OtherCapacity`` given by this one), without waiting for its heartbeat to expire, so
    its staging can be cleaned and a checkpoint it owned resumed."""
    r = Reconciler(stores, f"{w.id}.start", recorder=recorder, incarnation=w.id)
    _, rows = stores.durable.liveness(stores.clock.now())
    return sum(
        r.declare_down(other, down_after=float("-inf")) for other, _, _ in rows if other != w.id
    )


def cancel(args: argparse.Namespace) -> int:
    for job in args.jobs:
        check_id("job", job)
    clock = EpochClock()
    stores = open_stores(args, clock, existing=True)
    name = f"client-{secrets.token_hex(4)}"
    actor = Actor(name, Context(clock), recorder=recorder_for(args, name))
    code = EXIT_OK
    try:
        for job in args.jobs:
            from remora.jobs.model import NotEnabled, UnknownJob

            try:
                before = stores.durable.job(job)
            except UnknownJob as exc:
                raise InvalidInput(str(exc)) from None
            if before.phase.terminal:
                print(f"{job}: already {before.phase.value}, nothing to cancel")
                continue
            if before.cancel_requested:
                print(f"{job}: cancellation already requested ({before.phase.value})")
                continue
            try:
                row = stores.request_cancel(actor, job)
                print(f"{job}: {row.phase.value}")
            except UnknownJob as exc:
                raise InvalidInput(str(exc)) from None
            except NotEnabled as exc:
                # Raced: the job became terminal (or was cancelled) since the read above.
                now = stores.durable.job(job)
                if now.phase.terminal or now.cancel_requested:
                    print(f"{job}: already {now.phase.value}, nothing to cancel")
                else:
                    print(f"{job}: not cancelled ({exc})")
                    code = EXIT_FAILED
    finally:
        stores.close()
    return code


def status(args: argparse.Namespace) -> int:
    from remora.jobs.history import statuses

    for job in args.jobs:
        check_id("job", job)
    # Everything shown is durable: Redis is never reached (status works with it down).
    stores = open_stores(args, EpochClock(), existing=True, coordination=False)
    try:
        rows = statuses(stores.durable, stores.target, stores.result, args.jobs)
    finally:
        stores.close()
    missing = set(args.jobs) - {r.job.id for r in rows}
    if missing:
        raise InvalidInput(f"no such job: {', '.join(sorted(missing))}")
    if args.json:
        print(json.dumps({"jobs": [r.to_json() for r in rows]}, indent=2))
        return EXIT_OK
    if not rows:
        print("no jobs")
        return EXIT_OK
    if args.jobs:
        for i, r in enumerate(rows):
            if i:
                print()
            for line in views.status_lines(r):
                print(views.clip(line, WIDTH))
        return EXIT_OK
    for line in views.status_table(rows, WIDTH):
        print(line)
    return EXIT_OK


def history_cmd(args: argparse.Namespace) -> int:
    from remora.jobs.history import history
    from remora.jobs.model import UnknownJob

    check_id("job", args.job)
    stores = open_stores(args, EpochClock(), existing=True, coordination=False)
    try:
        try:
            found = history(stores.durable, args.job)
        except UnknownJob:
            raise InvalidInput(f"no such job: {args.job}") from None
    finally:
        stores.close()
    if args.json:
        print(json.dumps(found.to_json(), indent=2))
        return EXIT_OK
    for line in views.history_lines(found, WIDTH):
        print(line)
    return EXIT_OK


def dashboard(args: argparse.Namespace) -> int:
    from remora.cli.jobs_dashboard import serve

    stores = open_stores(args, EpochClock(), existing=True, coordination=False)
    try:
        return serve(stores, args.host, args.port, args.refresh, _say)
    finally:
        stores.close()


def reconcile(args: argparse.Namespace) -> int:
    clock = EpochClock()
    stores = open_stores(args, clock)
    name = f"reconciler-{secrets.token_hex(4)}"
    try:
        r = Reconciler(stores, name, recorder=recorder_for(args, name), durable_only=not args.redis)
        steps = r.reconcile_once()
    finally:
        stores.close()
    print(f"{steps} steps")
    return EXIT_OK


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a reentrant write
        pass


def _fresh_id() -> str:
    host = "".join(ch for ch in socket.gethostname() if ch.isalnum() or ch in "-.")[:20]
    return f"{host or 'worker'}-{os.getpid()}-{secrets.token_hex(3)}"


__all__ = ["DEFAULT_DB", "register"]
