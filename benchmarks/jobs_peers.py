"""Remora jobs beside its peers, in one run on this machine and the same servers: no-op jobs
per second with 1, 2 and 4 worker processes, median/p99 submit-to-terminal latency, and the
recovery time of a SIGKILLed worker's job.  A benchmark, not a test: it asserts nothing.

    python benchmarks/jobs_peers.py --jobs 500 [--json FILE]

Systems (every worker process executes one job at a time):

* ``remora``: ``remora jobs worker`` on PostgreSQL (durable, target) + Redis (coordination),
  fencing on (it cannot be turned off: every publication is a durable compare-and-swap);
* ``procrastinate``: ``procrastinate worker --concurrency 1`` on the same PostgreSQL;
* ``rq``: ``rq worker --worker-class rq.worker.SimpleWorker`` (no fork per job; the default
  forking ``rq.Worker`` with ``--rq-worker-class rq.Worker``) on a private Redis server.

Each system gets a fresh scratch PostgreSQL database per measurement
(``remora.sim.scratch``; default server postgres@127.0.0.1:5432, ``--pg``) and one
private ``redis-server`` on a free port for the whole run (the shared 6379 is not touched).
The peers live only in the benchmark's own environment, created on first use:

    python3 -m venv benchmarks/.venv-peers
    benchmarks/.venv-peers/bin/pip install procrastinate 'psycopg[binary]' rq

Timestamps come from the servers, not from polling: for the PostgreSQL systems a trigger
(installed in the scratch database, identical for both) stamps ``clock_timestamp()`` when a
job row is inserted and when it first turns terminal; RQ keeps ``enqueued_at``/``ended_at``
in its job hashes.

* **throughput**: ``--jobs`` no-op jobs are submitted with no worker running, then K worker
  processes start; jobs/s is measured between the 10th and the 90th percentile of the
  terminal times (worker start-up and the tail are excluded);
* **latency**: one worker process, ``--latency-jobs`` no-op jobs submitted one by one at
  ``--rate`` per second (default 5, below every system's capacity here), terminal minus
  submit;
* **recovery**: worker A takes a job that stalls on its first run, worker B is started and
  ready, A is SIGKILLed; recovery is the time from the kill until the job is terminal
  (Remora: lease ``lease_ticks * tick_ms`` plus the reconcile interval is the aim).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import redis

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(REPO))

from remora.sim.scratch import scratch_database  # noqa: E402

PEERS_VENV = BENCH / ".venv-peers"
PEER_PY = PEERS_VENV / "bin" / "python"
REMORA_CONFIG = {"tick_ms": 100, "lease_ticks": 30, "reservation_ticks": 30, "max_attempts": 3}
RECONCILE_EVERY = 0.5
RQ_WORKER_CLASS = "rq.worker.SimpleWorker"  # --rq-worker-class
LEASE_S = REMORA_CONFIG["tick_ms"] * REMORA_CONFIG["lease_ticks"] / 1000

TRIGGER = """
CREATE TABLE bench_times (id TEXT PRIMARY KEY, submitted TIMESTAMPTZ, terminal TIMESTAMPTZ);
CREATE FUNCTION bench_ins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO bench_times VALUES (NEW.id::text, clock_timestamp(), NULL) ON CONFLICT DO NOTHING;
  RETURN NEW; END $$;
CREATE FUNCTION bench_upd() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  IF NEW.{col}::text IN ({terminal}) THEN
    UPDATE bench_times SET terminal = clock_timestamp()
      WHERE id = NEW.id::text AND terminal IS NULL;
  END IF; RETURN NEW; END $$;
CREATE TRIGGER bench_ins AFTER INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION bench_ins();
CREATE TRIGGER bench_upd AFTER UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION bench_upd();
"""


def ensure_peers_venv() -> None:
    if PEER_PY.exists():
        return
    print(f"creating {PEERS_VENV} (procrastinate, rq) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run(
        [
            str(PEERS_VENV / "bin" / "pip"),
            "install",
            "-q",
            "procrastinate",
            "psycopg[binary]",
            "rq",
        ],
        check=True,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def private_redis() -> Iterator[str]:
    port = free_port()
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
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait()


def pctl(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


class System:
    """One system under measurement, on one fresh scratch database / cleared private Redis."""

    name = ""

    def __init__(self, dsn: str, redis_url: str) -> None:
        self.dsn = dsn
        self.redis_url = redis_url
        self.procs: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": f"{BENCH}{os.pathsep}{REPO}",
            "PEERS_PG_DSN": self.dsn,
        }

    def setup(self) -> None: ...
    def worker_argv(self, i: int) -> list[str]:
        raise NotImplementedError

    def submit(self, count: int, rate: float = 0.0, task: str = "noop") -> None:
        raise NotImplementedError

    def ready_workers(self) -> int:
        raise NotImplementedError

    def times(self) -> list[tuple[float, float | None]]:
        """(submitted, terminal or None) per job, epoch seconds."""
        with psycopg.connect(self.dsn, autocommit=True) as c:
            rows = c.execute(
                "SELECT extract(epoch FROM submitted), extract(epoch FROM terminal)"
                " FROM bench_times"
            ).fetchall()
        return [(float(s), float(t) if t is not None else None) for s, t in rows]

    def running(self) -> bool:
        """Whether the one stalling job has started."""
        raise NotImplementedError

    def requeued(self) -> bool | None:
        """Whether the stalled job was taken back (re-queued) after its worker was killed;
        None when the system does not take it back on its own."""
        return None

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
                raise RuntimeError(f"{self.name}: {k} workers not ready after {timeout} s")
            time.sleep(0.05)

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()


class Remora(System):
    name = "remora"

    def __init__(self, dsn: str, redis_url: str) -> None:
        super().__init__(dsn, redis_url)
        self.stores = ["--dsn", dsn, "--redis", redis_url, "--namespace", "bench"]

    def cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "remora", "jobs", *args, *self.stores]

    def setup(self) -> None:
        subprocess.run(
            self.cli("status", "--config", json.dumps(REMORA_CONFIG)),
            check=True,
            capture_output=True,
            env=self.env(),
        )
        with psycopg.connect(self.dsn, autocommit=True) as c:
            c.execute(
                TRIGGER.format(
                    table="remora_jobs_job",
                    col="phase",
                    terminal="'Succeeded', 'Failed', 'Cancelled'",
                ).encode()
            )

    def worker_argv(self, i: int) -> list[str]:
        return self.cli(
            "worker",
            "--app",
            "jobs_peers_remora_app",
            "--concurrency",
            "1",
            "--reconcile-every",
            str(RECONCILE_EVERY),
        )

    def submit(self, count: int, rate: float = 0.0, task: str = "noop") -> None:
        if rate <= 0:
            subprocess.run(
                self.cli("submit", task, "--count", str(count)),
                check=True,
                capture_output=True,
                env=self.env(),
            )
            return
        # Paced: one client process, as the peers' submitter is.
        code = (
            "import sys,time,argparse,secrets\n"
            "from remora.cli.jobs import open_stores\n"
            "from remora.jobs.io import Actor\nfrom remora.context import Context\n"
            "from remora.clock import MonotonicClock\n"
            "a=argparse.Namespace(dsn=sys.argv[1],redis=sys.argv[2],namespace='bench',"
            "config=None,db=None)\n"
            "clock=MonotonicClock(); st=open_stores(a, clock)\n"
            "act=Actor('client', Context(clock))\n"
            "n=int(sys.argv[3]); gap=1/float(sys.argv[4]); t0=time.monotonic()\n"
            "for i in range(n):\n"
            "    time.sleep(max(0.0, t0+i*gap-time.monotonic()))\n"
            "    st.submit(act, f'lat-{i}', sys.argv[5], None, enqueue=True)\n"
            "st.close()\n"
        )
        subprocess.run(
            [sys.executable, "-c", code, self.dsn, self.redis_url, str(count), str(rate), task],
            check=True,
            env=self.env(),
        )

    def ready_workers(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            row = c.execute("SELECT count(*) FROM remora_jobs_worker WHERE up = 1").fetchone()
        return int(row[0]) if row else 0

    def running(self) -> bool:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            row = c.execute(
                "SELECT count(*) FROM remora_jobs_job WHERE phase = 'Running'"
            ).fetchone()
        return bool(row and row[0])

    def requeued(self) -> bool | None:
        # ReapLostAttempt, ScheduleRetry and Enqueue are taken in one reconcile pass: the
        # job leaves Running (or already runs again under the next token).
        with psycopg.connect(self.dsn, autocommit=True) as c:
            row = c.execute(
                "SELECT count(*) FROM remora_jobs_job WHERE phase <> 'Running' "
                "OR current_token > 1"
            ).fetchone()
        return bool(row and row[0])


class Procrastinate(System):
    name = "procrastinate"

    def app_argv(self, *args: str) -> list[str]:
        return [str(PEER_PY), "-m", "procrastinate", "--app=jobs_peers_peer_app.app", *args]

    def setup(self) -> None:
        subprocess.run(
            self.app_argv("schema", "--apply"), check=True, capture_output=True, env=self.env()
        )
        with psycopg.connect(self.dsn, autocommit=True) as c:
            c.execute(
                TRIGGER.format(
                    table="procrastinate_jobs",
                    col="status",
                    terminal="'succeeded', 'failed', 'cancelled', 'aborted'",
                ).encode()
            )

    def worker_argv(self, i: int) -> list[str]:
        return self.app_argv("worker", "--queues", "bench", "--concurrency", "1")

    def submit(self, count: int, rate: float = 0.0, task: str = "noop") -> None:
        subprocess.run(
            [
                str(PEER_PY),
                str(BENCH / "jobs_peers_peer_app.py"),
                "submit",
                "procrastinate",
                "--count",
                str(count),
                "--rate",
                str(rate),
                "--task",
                task,
            ],
            check=True,
            env=self.env(),
        )

    def ready_workers(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            row = c.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
        return int(row[0]) if row else 0

    def running(self) -> bool:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            row = c.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'"
            ).fetchone()
        return bool(row and row[0])


class RQ(System):
    name = "rq"

    def setup(self) -> None:
        redis.Redis.from_url(self.redis_url).flushall()  # the private server, not 6379

    def worker_argv(self, i: int) -> list[str]:
        argv = [str(PEERS_VENV / "bin" / "rq"), "worker", "--url", self.redis_url]
        return [*argv, "--worker-class", RQ_WORKER_CLASS, "bench"]

    def submit(self, count: int, rate: float = 0.0, task: str = "noop") -> None:
        subprocess.run(
            [
                str(PEER_PY),
                str(BENCH / "jobs_peers_peer_app.py"),
                "submit",
                "rq",
                "--count",
                str(count),
                "--rate",
                str(rate),
                "--task",
                task,
                "--redis",
                self.redis_url,
            ],
            check=True,
            env=self.env(),
        )

    def ready_workers(self) -> int:
        return int(redis.Redis.from_url(self.redis_url).scard("rq:workers"))

    def times(self) -> list[tuple[float, float | None]]:
        r = redis.Redis.from_url(self.redis_url)
        out: list[tuple[float, float | None]] = []

        def ts(v: bytes | None) -> float | None:
            if not v:
                return None
            return datetime.fromisoformat(v.decode().replace("Z", "+00:00")).timestamp()

        for key in r.scan_iter("rq:job:*", count=1000):
            if r.type(key) != b"hash":
                continue
            enq, end, status = r.hmget(key, "enqueued_at", "ended_at", "status")
            s = ts(enq)
            if s is None:
                continue
            done = status in (b"finished", b"failed", b"stopped", b"canceled")
            out.append((s, ts(end) if done else None))
        return out

    def running(self) -> bool:
        r = redis.Redis.from_url(self.redis_url)
        return any(r.hget(k, "status") == b"started" for k in r.scan_iter("rq:job:*"))


SYSTEMS: dict[str, type[System]] = {"remora": Remora, "procrastinate": Procrastinate, "rq": RQ}


def wait_terminal(sys_: System, n: int, timeout: float) -> list[tuple[float, float | None]]:
    deadline = time.monotonic() + timeout
    while True:
        t = sys_.times()
        if sum(1 for _, e in t if e is not None) >= n or time.monotonic() > deadline:
            return t
        time.sleep(0.2)


@contextmanager
def system(kind: str, pg: str, redis_url: str) -> Iterator[System]:
    with scratch_database(pg, f"bench_{kind}") as dsn:
        s = SYSTEMS[kind](dsn, redis_url)
        s.setup()
        try:
            yield s
        finally:
            s.stop_all()


def throughput(
    kind: str, k: int, n: int, pg: str, redis_url: str, timeout: float
) -> dict[str, Any]:
    with system(kind, pg, redis_url) as s:
        s.submit(n)
        for i in range(k):
            s.start_worker(i)
        t = wait_terminal(s, n, timeout)
        ends = sorted(e for _, e in t if e is not None)
        if len(ends) < max(10, n // 2):
            return {"done": len(ends), "jobs_per_s": None}
        lo, hi = int(0.1 * (len(ends) - 1)), int(0.9 * (len(ends) - 1))
        return {"done": len(ends), "jobs_per_s": (hi - lo) / (ends[hi] - ends[lo])}


def latency(
    kind: str, n: int, rate: float, pg: str, redis_url: str, timeout: float
) -> dict[str, Any]:
    with system(kind, pg, redis_url) as s:
        s.start_worker(0)
        s.wait_ready(1)
        s.submit(n, rate=rate)
        t = wait_terminal(s, n, timeout)
        lat = [e - b for b, e in t if e is not None]
        if not lat:
            return {"done": 0}
        return {
            "done": len(lat),
            "median_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * pctl(lat, 0.99),
        }


def recovery(kind: str, pg: str, redis_url: str, wait: float) -> dict[str, Any]:
    with system(kind, pg, redis_url) as s:
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
        # Poll every 10 ms: when the job is taken back (re-queued), and when it is terminal
        # (the trigger's timestamp).
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


def fmt(x: float | None, spec: str = ".0f") -> str:
    return "—" if x is None else format(x, spec)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=500, help="no-op jobs per throughput run (500)")
    p.add_argument("--workers", default="1,2,4", help="worker process counts (1,2,4)")
    p.add_argument("--latency-jobs", type=int, default=100, help="jobs in the latency run (100)")
    p.add_argument("--rate", type=float, default=5.0, help="latency run's submit rate (5/s)")
    p.add_argument("--systems", default="remora,procrastinate,rq")
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--no-recovery", action="store_true")
    p.add_argument(
        "--rq-worker-class",
        default="rq.worker.SimpleWorker",
        help="rq.worker.SimpleWorker (default: no fork per job) or rq.Worker (forks per job)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = p.parse_args()
    global RQ_WORKER_CLASS
    RQ_WORKER_CLASS = args.rq_worker_class
    kinds = [x for x in args.systems.split(",") if x]
    for kind in kinds:
        if kind not in SYSTEMS:
            sys.exit(f"jobs_peers: unknown system {kind!r} (remora, procrastinate, rq)")
    ensure_peers_venv()
    counts = [int(x) for x in args.workers.split(",") if x]
    timeout = max(120.0, args.jobs / 2)
    results: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "loadavg_before": os.getloadavg(),
        "config": {
            "remora": REMORA_CONFIG,
            "reconcile_every_s": RECONCILE_EVERY,
            "rq_worker_class": RQ_WORKER_CLASS,
        },
        "systems": {},
    }
    with private_redis() as url:
        for kind in kinds:
            r: dict[str, Any] = {}
            for k in counts:
                r[f"w{k}"] = throughput(kind, k, args.jobs, args.pg, url, timeout)
                print(f"{kind} {k} workers: {r[f'w{k}']}", file=sys.stderr)
            r["latency"] = latency(kind, args.latency_jobs, args.rate, args.pg, url, timeout)
            print(f"{kind} latency: {r['latency']}", file=sys.stderr)
            if not args.no_recovery:
                r["recovery"] = recovery(
                    kind, args.pg, url, wait=3 * (LEASE_S + RECONCILE_EVERY) + 5
                )
                print(f"{kind} recovery: {r['recovery']}", file=sys.stderr)
            results["systems"][kind] = r
    results["loadavg_after"] = os.getloadavg()
    head = "| system | " + " | ".join(f"jobs/s, {k} worker{'s' if k > 1 else ''}" for k in counts)
    head += " | latency median | latency p99 | recovery after SIGKILL |"
    print(head)
    print("|---" * (len(counts) + 4) + "|")
    for kind, r in results["systems"].items():
        cells = [fmt(r[f"w{k}"]["jobs_per_s"]) for k in counts]
        lat = r["latency"]
        rec = r.get("recovery")
        if rec is None:
            recs = "not measured"
        elif rec.get("recovered"):
            recs = f"{rec['recovery_s']:.2f} s"
            if "requeued_s" in rec:
                recs += f" (re-queued after {rec['requeued_s']:.2f} s)"
        else:
            recs = f"not recovered in {rec.get('waited_s', 0):.0f} s"
        print(
            f"| {kind} | "
            + " | ".join(cells)
            + f" | {fmt(lat.get('median_ms'))} ms | {fmt(lat.get('p99_ms'))} ms | {recs} |"
        )
    la, lb = results["loadavg_before"], results["loadavg_after"]
    print(
        f"\nload average (1/5/15 min) before {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}, "
        f"after {lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f}; Remora lease {LEASE_S:.1f} s, "
        f"reconcile every {RECONCILE_EVERY} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
