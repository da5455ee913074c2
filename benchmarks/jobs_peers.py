"""Remora jobs beside its peers, interleaved in one run on this machine and the same servers:
jobs per second, CPU per job, synchronous commits and transactions per job, and
submit-to-terminal latency with 1, 2 and 4 worker processes, for a no-op body and a 10 ms
sleep body; and the recovery time of a SIGKILLed worker's job.  A benchmark, not a test: it
asserts nothing.

    python benchmarks/jobs_peers.py --jobs 500 --repeat 3 [--json FILE]

Systems (every worker process executes one job at a time — so Remora's ``--batch``, passed
through, never forms a batch of more than one), each with its guarantee:

* ``remora``: ``remora jobs worker`` on PostgreSQL (durable, target) + Redis (coordination),
  fencing on (it cannot be turned off: every publication is a durable compare-and-swap on
  the attempt's token); every run is recorded (``--record``) and the recording is
  validated against the spec afterwards (``remora.sim.jobs.refinement.validate_run``);
* ``procrastinate``: ``procrastinate worker --concurrency 1`` on the same PostgreSQL;
* ``rq``: ``rq worker --worker-class rq.worker.SimpleWorker`` (no fork per job; the default
  forking ``rq.Worker`` with ``--rq-worker-class rq.Worker``) on the private Redis server;
* ``pgqueuer``: a worker started as ``pgq run`` would (``pgqueuer.run``; batch size 1,
  ``max_concurrent_tasks`` 2, its smallest; the bodies hold a per-process lock; its
  quick-start driver, asyncpg) on the same PostgreSQL, heartbeat timeout 3 s (Remora's
  lease) and an idle worker's dequeue timeout 0.5 s (Remora's reconcile interval: a stale
  job is re-picked only by a dequeue).

The peers live only in the benchmark's own environment, created on first use (or with
``--no-install``: refuse to create it):

    python3 -m venv benchmarks/.venv-peers
    benchmarks/.venv-peers/bin/pip install procrastinate 'psycopg[binary]' rq 'pgqueuer[asyncpg]'

Fairness.  For each repeat and worker count every (system, body) is measured once, the
systems in an order rotated by one place per repeat and per worker count.  Each
measurement gets a fresh scratch PostgreSQL database (``remora.sim.scratch``; server
``--pg``) and a ``FLUSHALL`` of the benchmark's own ``redis-server`` on a free port (the
shared 6379 is never touched).  The benchmark reads through one persistent connection per
measurement (PostgreSQL, or Redis for RQ) and subtracts its own transactions.

Timestamps are the servers' own: for the PostgreSQL systems a trigger (identical for all
three) stamps ``clock_timestamp()`` when a job row is inserted and when it first turns
terminal; RQ keeps ``enqueued_at``/``ended_at`` in its job hashes, read once at the end by
the ids in its finished/failed registries (completion is polled by the registries' sizes,
not by a scan).

* **throughput**: ``--jobs`` jobs are submitted with no worker running, then K worker
  processes start; jobs/s between the 10th and the 90th percentile of the terminal times;
* **CPU per job**: user + system time from ``/proc/PID/stat`` of the worker processes (with
  their reaped children), their PostgreSQL backends (client backends of the measurement's
  database) and the ``redis-server``, sampled with the progress every ``POLL_S``; the
  difference between the samples where 10 % and 90 % of the jobs were terminal, divided by
  the jobs that turned terminal between them;
* **commits per job** (synchronous: ``synchronous_commit`` is on): the ``COMMIT`` records
  in the WAL (``pg_walinspect``) of the transactions that wrote in the measurement's
  database, between the same two samples, per job; **transactions / rollbacks per job**:
  ``pg_stat_database`` deltas of the database over the workers' whole run (start-up and
  shutdown included), less the benchmark's own reads;
* **latency**: K worker processes, one warm-up job, then ``--latency-jobs`` jobs submitted
  one by one at ``--rate`` per second; terminal minus submit, p50 and p99;
* **recovery** (once per system, no-op body): worker A takes a job that stalls on its
  first run, worker B is started and ready, A is SIGKILLed; the time from the kill until
  the job is terminal.

``--json FILE`` writes ``{"load": [before, after], "systems": {NAME: {"1": {"jobs_per_s",
"cpu_ms_per_job", "commits_per_job", "p50_ms", "p99_ms"}, "2": …, "4": …}}}`` — medians
of the repeats; NAME is the system for the no-op body and ``SYSTEM/sleep10`` for the 10 ms
body; ``load`` is the 1-minute load average before and after — plus ``detail`` (the same
with transactions and rollbacks per job), ``guarantees``, ``repeats`` (every
measurement), ``validation`` (Remora's recordings) and ``recovery``.
``--table-from FILE`` prints the tables of such a file again.

Exit codes: 0 done (a measurement that failed is reported in one line and recorded in the
JSON as ``{"error": …}``; the run goes on); 1 the run could not go on (e.g. the private
``redis-server`` did not start); 2 bad usage, a missing ``redis-server``, ``--no-install``
without the peers' environment, or a ``--table-from`` file that is not a report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import redis
from psycopg.conninfo import conninfo_to_dict

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(REPO))

from remora.sim.scratch import scratch_database  # noqa: E402

# REMORA_BENCH_PEERS_VENV: another place for it (the smoke test points it at a missing one).
PEERS_VENV = Path(os.environ.get("REMORA_BENCH_PEERS_VENV") or BENCH / ".venv-peers")
PEER_PY = PEERS_VENV / "bin" / "python"
PEER_PACKAGES = ["procrastinate", "psycopg[binary]", "rq", "pgqueuer[asyncpg]"]
REMORA_CONFIG = {"tick_ms": 100, "lease_ticks": 30, "reservation_ticks": 30, "max_attempts": 3}
RECONCILE_EVERY = 0.5
LEASE_S = REMORA_CONFIG["tick_ms"] * REMORA_CONFIG["lease_ticks"] / 1000
POLL_S = 0.05
CLK_TCK = os.sysconf("SC_CLK_TCK")
BODIES = {"noop": "", "sleep10": "/sleep10"}
PEERS = ("procrastinate", "rq", "pgqueuer")

GUARANTEES = {
    "remora": "exactly-once effect: fenced (a stale attempt's publication is refused by a "
    "durable compare-and-swap on its token), durable; a lost worker's job is retried after "
    "its lease",
    "procrastinate": "durable, no fencing; a job whose worker died stays 'doing' "
    "(retrying stalled jobs is left to the application): at most once unless retried",
    "rq": "not durable here (Redis without persistence), no fencing; a job whose worker "
    "died is failed once its timeout has passed: at most once",
    "pgqueuer": "durable, at least once, no fencing: a job whose heartbeat stops is "
    "re-picked while its old worker may still finish it",
}

SHORT = {
    "remora": "exactly-once effect, fenced, durable",
    "procrastinate": "durable, not fenced; a dead worker's job stays 'doing'",
    "rq": "not durable here, not fenced; a dead worker's job fails after its timeout",
    "pgqueuer": "durable, at least once, not fenced",
}

TRIGGER_ROWS = """
CREATE TABLE bench_times (id TEXT PRIMARY KEY, submitted TIMESTAMPTZ, terminal TIMESTAMPTZ);
CREATE FUNCTION bench_ins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO bench_times VALUES (NEW.id::text, clock_timestamp(), NULL) ON CONFLICT DO NOTHING;
  RETURN NEW; END $$;
CREATE TRIGGER bench_ins AFTER INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION bench_ins();
"""
TRIGGER_UPDATE = """
CREATE FUNCTION bench_upd() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  IF NEW.{col}::text IN ({terminal}) THEN
    UPDATE bench_times SET terminal = clock_timestamp()
      WHERE id = NEW.{key}::text AND terminal IS NULL;
  END IF; RETURN NEW; END $$;
CREATE TRIGGER bench_upd AFTER {event} ON {table} FOR EACH ROW EXECUTE FUNCTION bench_upd();
"""
POLL_SQL = """
SELECT (SELECT count(*) FROM bench_times WHERE terminal IS NOT NULL),
       ARRAY(SELECT pid FROM pg_stat_activity WHERE datname = current_database()
             AND backend_type = 'client backend' AND pid <> pg_backend_pid()),
       pg_current_wal_insert_lsn()::text
"""


class BenchError(Exception):
    """A measurement could not be taken (one line, exit 1)."""


# -- environment ---------------------------------------------------------------------------


def ensure_peers_venv(install: bool) -> None:
    if PEER_PY.exists():
        return
    if not install:
        raise BenchError(f"{PEERS_VENV} is missing and --no-install was given")
    print(f"creating {PEERS_VENV} ({', '.join(PEER_PACKAGES)}) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run([str(PEERS_VENV / "bin" / "pip"), "install", "-q", *PEER_PACKAGES], check=True)


def peer_versions() -> dict[str, str]:
    if not PEER_PY.exists():
        return {}
    code = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({p: m.version(p) for p in ['procrastinate', 'rq', 'pgqueuer']}))"
    )
    out = subprocess.run([str(PEER_PY), "-c", code], capture_output=True, text=True, check=False)
    return dict(json.loads(out.stdout)) if out.returncode == 0 else {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """The benchmark's own ``redis-server`` on a free port (no persistence)."""

    def __init__(self) -> None:
        port = free_port()
        self.proc = subprocess.Popen(
            [
                *("redis-server", "--port", str(port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{port}/0"
        self.client = redis.Redis.from_url(self.url)
        for _ in range(200):
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            raise BenchError("the private redis-server did not start")

    def flush(self) -> None:
        self.client.flushall()  # the private server, never the shared 6379

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait()


def proc_cpu(pid: int) -> float | None:
    """User + system seconds of a process and its reaped children, or None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2 :].split()
    return sum(int(x) for x in f[11:15]) / CLK_TCK


def pctl(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def median(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


# -- the systems ---------------------------------------------------------------------------


class System:
    """One system under measurement, on a fresh scratch database and a flushed private
    Redis, read through one persistent connection."""

    name = ""
    uses_pg = True

    def __init__(self, dsn: str, rds: PrivateRedis, body: str, record: Path) -> None:
        self.dsn = dsn
        self.rds = rds
        self.body = body
        self.record = record
        self.procs: list[subprocess.Popen[bytes]] = []
        self.conn: psycopg.Connection[Any] | None = None
        self.reads = 0  # statements (= transactions) the benchmark sent to the database
        self.dboid = 0

    # PostgreSQL reads, all through self.conn -------------------------------------------

    def q(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        assert self.conn is not None
        self.reads += 1
        return self.conn.execute(sql.encode() if not params else sql, params or None).fetchall()

    def one(self, sql: str, *params: Any) -> Any:
        rows = self.q(sql, *params)
        return rows[0][0] if rows else None

    def connect(self) -> None:
        if self.uses_pg:
            self.conn = psycopg.connect(self.dsn, autocommit=True)
            if not self.dboid:
                self.dboid = int(
                    self.one("SELECT oid FROM pg_database WHERE datname = current_database()")
                )

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": f"{BENCH}{os.pathsep}{REPO}",
            "PEERS_PG_DSN": self.dsn,
        }

    def run(self, argv: list[str]) -> None:
        out = subprocess.run(argv, cwd=REPO, env=self.env(), capture_output=True, check=False)
        if out.returncode != 0:
            err = out.stderr.decode(errors="replace").strip().splitlines()
            raise BenchError(f"{self.name}: {' '.join(argv[:4])} … failed: {err[-1:]}")

    def install_triggers(self, table: str, col: str, terminal: str, key: str = "id") -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            c.execute(TRIGGER_ROWS.format(table=table).encode())
            c.execute(
                TRIGGER_UPDATE.format(
                    table=table, col=col, terminal=terminal, key=key, event="UPDATE"
                ).encode()
            )
            c.execute(b"CREATE EXTENSION IF NOT EXISTS pg_walinspect")

    # per system ---------------------------------------------------------------------------

    def setup(self) -> None: ...

    def worker_argv(self, i: int) -> list[str]:
        raise NotImplementedError

    def submit(self, count: int, rate: float = 0.0, task: str | None = None) -> None:
        raise NotImplementedError

    def ready_workers(self) -> int:
        raise NotImplementedError

    def poll(self) -> tuple[int, list[int], str | None]:
        """(terminal jobs, PostgreSQL backend pids, WAL insert position) in one read."""
        done, pids, lsn = self.q(POLL_SQL)[0]
        return int(done), list(pids), str(lsn)

    def times(self) -> list[tuple[float, float | None]]:
        """(submitted, terminal or None) per job, epoch seconds."""
        rows = self.q(
            "SELECT extract(epoch FROM submitted), extract(epoch FROM terminal) FROM bench_times"
        )
        return [(float(s), float(t) if t is not None else None) for s, t in rows]

    def running(self) -> bool:
        """Whether the one stalling job has started."""
        raise NotImplementedError

    def requeued(self) -> bool | None:
        """Whether the stalled job was taken back after its worker was killed; None when
        the system does not say."""
        return None

    def server_pids(self) -> list[int]:
        return [self.rds.proc.pid]

    # processes ----------------------------------------------------------------------------

    def start_worker(self, i: int) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(
            self.worker_argv(i),
            cwd=REPO,
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(p)
        return p

    def wait_ready(self, k: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.ready_workers() < k:
            if time.monotonic() > deadline:
                raise BenchError(f"{self.name}: {k} workers not ready after {timeout} s")
            if any(p.poll() is not None for p in self.procs):
                raise BenchError(f"{self.name}: a worker exited while starting")
            time.sleep(POLL_S)

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()

    def validate(self) -> dict[str, Any] | None:
        return None


class Remora(System):
    name = "remora"
    #: ``remora jobs worker --batch`` (``--batch``): capped by the worker's one slot, so a
    #: batch never forms here — every system takes one job at a time per process.
    batch = 1

    def stores(self) -> list[str]:
        return ["--dsn", self.dsn, "--redis", self.rds.url, "--namespace", "bench"]

    def cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "remora", "jobs", *args, *self.stores()]

    def setup(self) -> None:
        self.run(self.cli("status", "--config", json.dumps(REMORA_CONFIG)))
        self.install_triggers("remora_jobs_job", "phase", "'Succeeded', 'Failed', 'Cancelled'")

    def worker_argv(self, i: int) -> list[str]:
        return self.cli(
            "worker",
            "--app",
            "jobs_peers_remora_app",
            "--concurrency",
            "1",
            "--batch",
            str(self.batch),
            "--reconcile-every",
            str(RECONCILE_EVERY),
            "--record",
            str(self.record),
        )

    def submit(self, count: int, rate: float = 0.0, task: str | None = None) -> None:
        task = task or self.body
        if rate <= 0:
            self.run(self.cli("submit", task, "--count", str(count), "--record", str(self.record)))
            return
        self.run(
            [
                *(sys.executable, str(BENCH / "jobs_peers_remora_app.py"), "submit"),
                *("--dsn", self.dsn, "--redis", self.rds.url, "--namespace", "bench"),
                *("--record", str(self.record), "--count", str(count), "--rate", str(rate)),
                *("--task", task, "--prefix", f"p{time.monotonic_ns()}"),
            ]
        )

    def ready_workers(self) -> int:
        return int(self.one("SELECT count(*) FROM remora_jobs_worker WHERE up = 1"))

    def running(self) -> bool:
        return bool(self.one("SELECT count(*) FROM remora_jobs_job WHERE phase = 'Running'"))

    def requeued(self) -> bool | None:
        # ReapLostAttempt, ScheduleRetry and Enqueue are taken in one reconcile pass: the
        # job leaves Running (or already runs again under the next token).
        return bool(
            self.one(
                "SELECT count(*) FROM remora_jobs_job WHERE phase <> 'Running' OR current_token > 1"
            )
        )

    def validate(self) -> dict[str, Any]:
        """Validate the measurement's recording against the spec (as
        ``benchmarks/jobs_validation.py``)."""
        from jobs_validation import validate_recording

        try:
            report = validate_recording(self.dsn, self.record, local_limit=1)
        except AssertionError as exc:  # RefinementViolation
            return {"valid": False, "error": " ".join(str(exc).split())[:300]}
        return {
            "valid": True,
            "steps": report.steps,
            "explored": report.explored,
            "seconds": round(report.seconds, 2),
        }


class Procrastinate(System):
    name = "procrastinate"

    def app_argv(self, *args: str) -> list[str]:
        return [str(PEER_PY), "-m", "procrastinate", "--app=jobs_peers_peer_app.app", *args]

    def setup(self) -> None:
        self.run(self.app_argv("schema", "--apply"))
        self.install_triggers(
            "procrastinate_jobs", "status", "'succeeded', 'failed', 'cancelled', 'aborted'"
        )

    def worker_argv(self, i: int) -> list[str]:
        return self.app_argv("worker", "--queues", "bench", "--concurrency", "1")

    def submit(self, count: int, rate: float = 0.0, task: str | None = None) -> None:
        self.run(
            [
                *(str(PEER_PY), str(BENCH / "jobs_peers_peer_app.py"), "submit", self.name),
                *("--count", str(count), "--rate", str(rate), "--task", task or self.body),
                *("--redis", self.rds.url),
            ]
        )

    def ready_workers(self) -> int:
        return int(self.one("SELECT count(*) FROM procrastinate_workers"))

    def running(self) -> bool:
        return bool(self.one("SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'"))


class PgQueuer(Procrastinate):
    name = "pgqueuer"

    def setup(self) -> None:
        d = conninfo_to_dict(self.dsn)  # pgq's asyncpg takes URLs only
        url = f"postgresql://{d['user']}@{d['host']}:{d['port']}/{d['dbname']}"
        self.run([str(PEERS_VENV / "bin" / "pgq"), "--pg-dsn", url, "install"])
        with psycopg.connect(self.dsn, autocommit=True) as c:
            c.execute(TRIGGER_ROWS.format(table="pgqueuer").encode())
            # A finished job's row is deleted and its end logged in pgqueuer_log.
            c.execute(
                TRIGGER_UPDATE.format(
                    table="pgqueuer_log",
                    col="status",
                    terminal="'successful', 'exception', 'canceled', 'deleted', 'failed'",
                    key="job_id",
                    event="INSERT",
                ).encode()
            )
            c.execute(b"CREATE TABLE bench_ready (pid INT)")
            c.execute(b"CREATE TABLE bench_stall (n SERIAL)")
            c.execute(b"CREATE EXTENSION IF NOT EXISTS pg_walinspect")

    def worker_argv(self, i: int) -> list[str]:
        return [
            *(str(PEER_PY), str(BENCH / "jobs_peers_peer_app.py"), "pgq-worker"),
            *("--heartbeat-timeout", str(LEASE_S), "--dequeue-timeout", str(RECONCILE_EVERY)),
        ]

    def ready_workers(self) -> int:
        return int(self.one("SELECT count(*) FROM bench_ready"))

    def running(self) -> bool:
        return bool(self.one("SELECT count(*) FROM bench_stall"))

    def requeued(self) -> bool | None:
        return bool(self.one("SELECT count(*) FROM bench_stall WHERE n > 1"))


class RQ(System):
    name = "rq"
    uses_pg = False
    worker_class = "rq.worker.SimpleWorker"

    def __init__(self, dsn: str, rds: PrivateRedis, body: str, record: Path) -> None:
        super().__init__(dsn, rds, body, record)
        self.r = redis.Redis.from_url(rds.url)  # the one polling connection

    def close(self) -> None:
        self.r.close()

    def worker_argv(self, i: int) -> list[str]:
        argv = [str(PEERS_VENV / "bin" / "rq"), "worker", "--url", self.rds.url]
        return [*argv, "--worker-class", self.worker_class, "bench"]

    def submit(self, count: int, rate: float = 0.0, task: str | None = None) -> None:
        self.run(
            [
                *(str(PEER_PY), str(BENCH / "jobs_peers_peer_app.py"), "submit", self.name),
                *("--count", str(count), "--rate", str(rate), "--task", task or self.body),
                *("--redis", self.rds.url),
            ]
        )

    def ready_workers(self) -> int:
        return int(self.r.scard("rq:workers"))

    def poll(self) -> tuple[int, list[int], str | None]:
        p = self.r.pipeline(transaction=False)
        p.zcard("rq:finished:bench")
        p.zcard("rq:failed:bench")
        fin, failed = p.execute()
        return int(fin) + int(failed), [], None

    def times(self) -> list[tuple[float, float | None]]:
        ids = self.r.zrange("rq:finished:bench", 0, -1) + self.r.zrange("rq:failed:bench", 0, -1)
        queued = self.r.lrange("rq:queue:bench", 0, -1)

        def ts(v: bytes | None) -> float | None:
            if not v:
                return None
            return datetime.fromisoformat(v.decode().replace("Z", "+00:00")).timestamp()

        p = self.r.pipeline(transaction=False)
        for i in ids:
            p.hmget(b"rq:job:" + bytes(i), "enqueued_at", "ended_at")  # type: ignore[arg-type]
        out: list[tuple[float, float | None]] = []
        for enq, end in p.execute():
            s = ts(enq)
            if s is not None:
                out.append((s, ts(end)))
        out += [(0.0, None)] * len(queued)
        return out

    def running(self) -> bool:
        return bool(self.r.zcard("rq:wip:bench"))


SYSTEMS: dict[str, type[System]] = {
    "remora": Remora,
    "procrastinate": Procrastinate,
    "rq": RQ,
    "pgqueuer": PgQueuer,
}


# -- measurements ----------------------------------------------------------------------------


@contextmanager
def system(kind: str, body: str, pg: str, rds: PrivateRedis) -> Iterator[System]:
    rds.flush()
    with (
        scratch_database(pg, f"bench_{kind}") as dsn,
        tempfile.TemporaryDirectory(prefix="bench-record-") as rec,
    ):
        s = SYSTEMS[kind](dsn, rds, body, Path(rec))
        s.setup()
        s.connect()
        try:
            yield s
        finally:
            s.stop_all()
            s.close()


class Sampler:
    """Progress, CPU and WAL position sampled together every ``POLL_S``."""

    def __init__(self, s: System) -> None:
        self.s = s
        self.cpu: dict[int, float] = {}
        self.samples: list[tuple[float, int, float, str | None]] = []

    def sample(self) -> int:
        done, backends, lsn = self.s.poll()
        for pid in [p.pid for p in self.s.procs] + backends + self.s.server_pids():
            c = proc_cpu(pid)
            if c is None:
                continue
            # A process first seen after the window's first sample started since the
            # previous sample: it counts whole (the sum had nothing for it before).
            self.cpu[pid] = c
        self.samples.append((time.time(), done, sum(self.cpu.values()), lsn))
        return done

    def at(self, frac: float, n: int) -> tuple[float, int, float, str | None] | None:
        for smp in self.samples:
            if smp[1] >= frac * n:
                return smp
        return None


def pg_stats(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute(
            b"SELECT xact_commit, xact_rollback FROM pg_stat_database "
            b"WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def wait_backends_gone(dsn: str, timeout: float = 10) -> int:
    """Wait until no other backend is connected to ``dsn``'s database (an exiting backend
    flushes its statistics); returns the transactions this wait sent."""
    deadline = time.monotonic() + timeout
    sent = 0
    with psycopg.connect(dsn, autocommit=True) as c:
        while time.monotonic() < deadline:
            sent += 1
            row = c.execute(
                b"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                b"AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.05)
    time.sleep(0.3)
    return sent


def wal_commits(s: System, lo: str, hi: str) -> tuple[int, int]:
    """(COMMIT records, ABORT records) of the transactions that wrote in ``s``'s database
    between the WAL positions ``lo`` and ``hi``."""
    rows = s.q(
        "SELECT xid::text, record_type, description FROM pg_get_wal_records_info("
        "%s::pg_lsn, least(%s::pg_lsn, pg_current_wal_flush_lsn())) "
        "WHERE resource_manager = 'Transaction' OR block_ref LIKE %s",
        lo,
        hi,
        f"%rel %/{s.dboid}/%",
    )
    wrote: set[str] = set()
    ends: list[tuple[str, str, str]] = []
    for xid, kind, desc in rows:
        if kind in ("COMMIT", "ABORT"):
            ends.append((xid, kind, desc or ""))
        else:
            wrote.add(xid)
    commits = aborts = 0
    for xid, kind, desc in ends:
        subs = desc.split("subxacts:", 1)[1].split(";")[0].split() if "subxacts:" in desc else []
        if xid in wrote or any(x in wrote for x in subs):
            if kind == "COMMIT":
                commits += 1
            else:
                aborts += 1
    return commits, aborts


def drive(s: System, n: int, timeout: float) -> Sampler:
    """Sample until ``n`` jobs are terminal (or the timeout, or every worker exited)."""
    smp = Sampler(s)
    deadline = time.monotonic() + timeout
    while smp.sample() < n and time.monotonic() < deadline:
        if s.procs and all(p.poll() is not None for p in s.procs):
            break
        time.sleep(POLL_S)
    return smp


def throughput(
    kind: str, body: str, k: int, n: int, pg: str, rds: PrivateRedis, timeout: float
) -> dict[str, Any]:
    with system(kind, body, pg, rds) as s:
        s.submit(n)
        own = reads0 = 0  # the benchmark's own transactions between the two pg_stats reads
        stats0 = (0, 0)
        if s.uses_pg:
            s.close()
            wait_backends_gone(s.dsn)
            stats0 = pg_stats(s.dsn)
            s.connect()
            reads0 = s.reads
            own = 1  # the first pg_stats read (its commit is counted after its snapshot)
            # Other sessions' checkpoints must not recycle the WAL read afterwards: a
            # temporary slot of the polling session keeps it (dropped when that ends).
            s.q(
                "SELECT pg_create_physical_replication_slot(%s, true, true)",
                f"bench_{os.getpid()}_{time.monotonic_ns()}",
            )
        for i in range(k):
            s.start_worker(i)
        smp = drive(s, n, timeout)
        out: dict[str, Any] = {"done": smp.samples[-1][1] if smp.samples else 0}
        ends = sorted(e for _, e in s.times() if e is not None)
        lo_s, hi_s = smp.at(0.1, n), smp.at(0.9, n)
        if lo_s is not None and lo_s is hi_s:
            # A tiny run may go from under 10 % to 90 % between two samples: the window
            # starts at the sample before (it may hold some of the workers' start-up).
            lo_s = smp.samples[max(0, smp.samples.index(lo_s) - 1)]
        if len(ends) < max(10, n // 2) or lo_s is None or hi_s is None or hi_s[1] <= lo_s[1]:
            out["jobs_per_s"] = None
            return out
        lo, hi = int(0.1 * (len(ends) - 1)), int(0.9 * (len(ends) - 1))
        out["jobs_per_s"] = (hi - lo) / (ends[hi] - ends[lo]) if ends[hi] > ends[lo] else None
        window_jobs = hi_s[1] - lo_s[1]
        out["cpu_ms_per_job"] = 1000 * (hi_s[2] - lo_s[2]) / window_jobs
        if s.uses_pg and lo_s[3] and hi_s[3]:
            c, a = wal_commits(s, lo_s[3], hi_s[3])
            out["commits_per_job"] = c / window_jobs
            out["write_aborts_per_job"] = a / window_jobs
        else:
            out["commits_per_job"] = 0.0  # no PostgreSQL; Redis without persistence
        reads = s.reads - reads0
        s.stop_all()
        if s.uses_pg:
            s.close()
            own += reads + wait_backends_gone(s.dsn)
            x1, r1 = pg_stats(s.dsn)
            out["xacts_per_job"] = (x1 - stats0[0] - own) / out["done"]
            out["rollbacks_per_job"] = (r1 - stats0[1]) / out["done"]
        out["validation"] = s.validate()
        return out


def latency(
    kind: str, body: str, k: int, n: int, rate: float, pg: str, rds: PrivateRedis, timeout: float
) -> dict[str, Any]:
    with system(kind, body, pg, rds) as s:
        for i in range(k):
            s.start_worker(i)
        s.wait_ready(k)
        s.submit(1)  # warm-up: every system has taken one job before the paced ones
        drive(s, 1, timeout)
        warm = max(b for b, _ in s.times())
        s.submit(n, rate=rate)
        drive(s, n + 1, timeout)
        lat = [e - b for b, e in s.times() if e is not None and b > warm]
        s.stop_all()
        out: dict[str, Any] = {"done": len(lat)}
        if lat:
            out["p50_ms"] = 1000 * statistics.median(lat)
            out["p99_ms"] = 1000 * pctl(lat, 0.99)
        out["validation"] = s.validate()
        return out


def recovery(kind: str, pg: str, rds: PrivateRedis, wait: float) -> dict[str, Any]:
    with system(kind, "noop", pg, rds) as s:
        a = s.start_worker(0)
        s.wait_ready(1)
        s.submit(1, task="stall")
        deadline = time.monotonic() + 60
        while not s.running():
            if time.monotonic() > deadline:
                return {"recovered": False, "note": "the stalling job never started"}
            time.sleep(0.05)
        s.start_worker(1)
        s.wait_ready(2)
        killed = time.time()
        os.killpg(a.pid, signal.SIGKILL)
        a.wait()
        requeued: float | None = None
        ends: list[float] = []
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not ends:
            if requeued is None and s.requeued():
                requeued = time.time() - killed
            ends = [e for _, e in s.times() if e is not None]
            time.sleep(0.01)
        if not ends:
            return {"recovered": False, "waited_s": wait}
        out: dict[str, Any] = {"recovered": True, "recovery_s": ends[0] - killed}
        if requeued is not None:
            out["requeued_s"] = requeued
        return out


# -- report ----------------------------------------------------------------------------------


def guarded(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One measurement; a failed one is reported (one line) and recorded, and the run
    goes on."""
    try:
        return measure()
    except (BenchError, psycopg.Error, redis.RedisError, OSError) as exc:
        line = " ".join(str(exc).split())[:300]
        print(f"jobs_peers: measurement failed: {type(exc).__name__}: {line}", file=sys.stderr)
        return {"error": f"{type(exc).__name__}: {line}"}


def fmt(x: float | None, spec: str = ".0f") -> str:
    return "—" if x is None else format(x, spec)


def summarize(
    runs: list[dict[str, Any]], units: list[str], counts: list[int]
) -> tuple[dict[str, Any], dict[str, Any]]:
    systems: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    for u in units:
        systems[u], detail[u] = {}, {}
        for k in counts:
            mine = [r for r in runs if r["unit"] == u and r["workers"] == k]
            tp = [r["throughput"] for r in mine]
            lat = [r["latency"] for r in mine]
            row = {
                "jobs_per_s": median([t.get("jobs_per_s") for t in tp]),
                "cpu_ms_per_job": median([t.get("cpu_ms_per_job") for t in tp]),
                "commits_per_job": median([t.get("commits_per_job") for t in tp]),
                "p50_ms": median([x.get("p50_ms") for x in lat]),
                "p99_ms": median([x.get("p99_ms") for x in lat]),
            }
            systems[u][str(k)] = row
            detail[u][str(k)] = {
                **row,
                "xacts_per_job": median([t.get("xacts_per_job") for t in tp]),
                "rollbacks_per_job": median([t.get("rollbacks_per_job") for t in tp]),
                "repeats": len(mine),
            }
    return systems, detail


def print_table(systems: dict[str, Any], detail: dict[str, Any], counts: list[int]) -> None:
    ks = "/".join(str(k) for k in counts)
    print(
        f"| system | jobs/s, {ks} workers | CPU ms/job, {ks} | sync commits/job, {ks} | "
        f"transactions / rollbacks per job | latency p50 / p99 ms, {ks} workers | guarantee |"
    )
    print("|---" * 7 + "|")
    for u, per in systems.items():
        d = detail[u]
        rate = " / ".join(fmt(per[str(k)]["jobs_per_s"]) for k in counts)
        cpu = " / ".join(fmt(per[str(k)]["cpu_ms_per_job"], ".1f") for k in counts)
        com = " / ".join(fmt(per[str(k)]["commits_per_job"], ".2f") for k in counts)
        xr = " / ".join(
            fmt(d[str(k)]["xacts_per_job"], ".1f")
            + ", "
            + fmt(d[str(k)]["rollbacks_per_job"], ".1f")
            for k in counts
        )
        lat = " / ".join(
            f"{fmt(per[str(k)]['p50_ms'])}, {fmt(per[str(k)]['p99_ms'])}" for k in counts
        )
        print(f"| {u} | {rate} | {cpu} | {com} | {xr} | {lat} | {SHORT[u.split('/')[0]]} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=500, help="jobs per throughput run (500)")
    p.add_argument("--repeat", type=int, default=1, help="repeats of every measurement (1)")
    p.add_argument("--workers", default="1,2,4", help="worker process counts (1,2,4)")
    p.add_argument("--bodies", default="noop,sleep10", help="job bodies (noop,sleep10)")
    p.add_argument("--latency-jobs", type=int, default=100, help="jobs per latency run (100)")
    p.add_argument("--rate", type=float, default=10.0, help="latency runs' submit rate (10/s)")
    p.add_argument("--systems", default="remora,procrastinate,rq,pgqueuer")
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--no-recovery", action="store_true", help="skip the SIGKILL recovery runs")
    p.add_argument(
        "--no-install", action="store_true", help=f"never create {PEERS_VENV.name} (exit 2)"
    )
    p.add_argument(
        "--rq-worker-class",
        default="rq.worker.SimpleWorker",
        help="rq.worker.SimpleWorker (default: no fork per job) or rq.Worker (forks per job)",
    )
    p.add_argument(
        "--batch",
        type=int,
        default=1,
        help="remora workers' --batch (1); each worker has one slot (as every peer's), which "
        "caps a batch at one job: the figures stay those of one job per transaction",
    )
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--table-from", metavar="FILE", help="only print the tables of a JSON report")
    args = p.parse_args()
    if args.table_from:
        try:
            report(json.loads(Path(args.table_from).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"jobs_peers: {args.table_from}: not a report ({exc})", file=sys.stderr)
            sys.exit(2)
        return
    kinds = [x for x in args.systems.split(",") if x]
    bodies = [x for x in args.bodies.split(",") if x]
    try:
        counts = [int(x) for x in args.workers.split(",") if x]
    except ValueError:
        counts = []
    bad = [x for x in kinds if x not in SYSTEMS] + [x for x in bodies if x not in BODIES]
    if bad or not kinds or not bodies or not counts or min(counts) < 1:
        p.error(f"bad --systems/--bodies/--workers (unknown: {', '.join(bad) or 'none'})")
    if args.jobs < 10 or args.repeat < 1 or args.latency_jobs < 1 or args.rate <= 0:
        p.error("--jobs must be at least 10, --repeat and --latency-jobs at least 1, --rate > 0")
    RQ.worker_class = args.rq_worker_class
    if args.batch < 1:
        p.error("--batch must be at least 1")
    Remora.batch = args.batch
    try:
        if any(k in PEERS for k in kinds):
            ensure_peers_venv(install=not args.no_install)
    except BenchError as exc:
        print(f"jobs_peers: {exc}", file=sys.stderr)
        sys.exit(2)
    if not shutil.which("redis-server"):
        print("jobs_peers: redis-server is not on PATH", file=sys.stderr)
        sys.exit(2)
    timeout = max(120.0, args.jobs / 2)
    units = [k + BODIES[b] for b in bodies for k in kinds]
    load_before = os.getloadavg()
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    recov: dict[str, Any] = {}
    rds = PrivateRedis()
    try:
        for rep in range(args.repeat):
            for ki, k in enumerate(counts):
                shift = (rep + ki) % len(kinds)
                order = kinds[shift:] + kinds[:shift]
                for kind in order:
                    for b in bodies:
                        u = kind + BODIES[b]
                        la = os.getloadavg()[0]
                        tp = guarded(
                            partial(throughput, kind, b, k, args.jobs, args.pg, rds, timeout)
                        )
                        lat = guarded(
                            partial(
                                latency,
                                kind,
                                b,
                                k,
                                args.latency_jobs,
                                args.rate,
                                args.pg,
                                rds,
                                timeout,
                            )
                        )
                        run = {
                            "repeat": rep + 1,
                            "workers": k,
                            "unit": u,
                            "load": la,
                            "throughput": tp,
                            "latency": lat,
                        }
                        runs.append(run)
                        print(json.dumps(run), file=sys.stderr)
        if not args.no_recovery:
            for kind in kinds:
                wait = 3 * (LEASE_S + RECONCILE_EVERY) + 5
                recov[kind] = guarded(partial(recovery, kind, args.pg, rds, wait))
                print(f"{kind} recovery: {recov[kind]}", file=sys.stderr)
    except BenchError as exc:
        print(f"jobs_peers: {exc}", file=sys.stderr)
        sys.exit(1)
    finally:
        rds.close()
    load_after = os.getloadavg()
    systems, detail = summarize(runs, units, counts)
    validations = [
        dict(v, unit=r["unit"], workers=r["workers"], repeat=r["repeat"], run=what)
        for r in runs
        for what in ("throughput", "latency")
        if (v := r[what].get("validation")) is not None
    ]
    doc = {
        "load": [load_before[0], load_after[0]],
        "systems": systems,
        "detail": detail,
        "guarantees": {k: GUARANTEES[k] for k in kinds},
        "loadavg": {"before": list(load_before), "after": list(load_after)},
        "minutes": round((time.monotonic() - started) / 60, 1),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "config": {
            "jobs": args.jobs,
            "repeat": args.repeat,
            "workers": counts,
            "bodies": bodies,
            "latency_jobs": args.latency_jobs,
            "rate": args.rate,
            "remora": REMORA_CONFIG,
            "reconcile_every_s": RECONCILE_EVERY,
            "rq_worker_class": RQ.worker_class,
            "peers": peer_versions(),
        },
        "validation": {
            "valid": sum(1 for v in validations if v["valid"]),
            "runs": len(validations),
            "each": validations,
        },
        "recovery": recov,
        "repeats": runs,
    }
    report(doc)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")


def report(doc: dict[str, Any]) -> None:
    """The Markdown table, recovery, validation and load lines of a run's JSON."""
    counts = doc["config"]["workers"]
    print_table(doc["systems"], doc["detail"], counts)
    rec_cells = []
    for kind, rec in doc["recovery"].items():
        if "error" in rec:
            cell = "failed (see the JSON)"
        elif rec.get("recovered"):
            cell = f"{rec['recovery_s']:.2f} s"
            if "requeued_s" in rec:
                cell += f" (re-queued after {rec['requeued_s']:.2f} s)"
        else:
            cell = f"not recovered in {rec.get('waited_s', 0):.0f} s"
        rec_cells.append(f"{kind} {cell}")
    if rec_cells:
        print("\nrecovery after SIGKILL: " + "; ".join(rec_cells))
    val = doc["validation"]
    if val["runs"]:
        print(
            f"Remora recordings validated against the spec: {val['valid']} of {val['runs']} "
            f"({sum(v['steps'] for v in val['each'])} spec steps)"
        )
    lb, la = doc["loadavg"]["before"], doc["loadavg"]["after"]
    print(
        f"load average (1/5/15 min) before {lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f}, "
        f"after {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}; {doc['config']['repeat']} repeat(s), "
        f"medians; {doc.get('minutes', 0):.0f} min"
    )


if __name__ == "__main__":
    main()
