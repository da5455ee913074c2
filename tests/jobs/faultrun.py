"""The harness of the real-fault evidence tests (``test_real_faults.py``): a private
``redis-server``, a TCP proxy that cuts and restores links, a PostgreSQL-aware proxy that
loses the COMMIT reply of chosen transactions, and a batch of jobs run by ``remora jobs
worker`` processes, checked at the end (every job terminal exactly once, the winner's result,
nothing lost, the recorded run validated against the spec)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from remora.jobs.durable import DurableStore, open_postgres
from remora.jobs.io import StepRecord
from remora.jobs.model import AttemptId, JobsConfig, Phase
from remora.jobs.postgres import PostgresTarget
from remora.sim.jobs.refinement import (
    RefinementViolation,
    ValidationReport,
    constants_of_run,
    merge_records,
    target_staging,
    validate_run,
)
from tests.common.services import unavailable
from tests.jobs.fault_app import winning_result

REPO = Path(__file__).resolve().parents[2]
BOUND = 90.0  # seconds a whole batch may take before the test fails
TERMINAL_ACTIONS = {
    "AcceptSuccess",
    "AcceptPermanentFailure",
    "AcceptRetryableFailureExhausted",
    "FinalizeCancel",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def private_redis(tmp_path: Path) -> Iterator[str]:
    """A ``redis-server`` of our own on a free TCP port (no persistence): FLUSHALL wipes
    only it, and a proxy can stand between it and the workers."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server", "the binary is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [
            str(binary),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(250):
            try:
                redis.Redis.from_url(url).ping()
                break
            except (redis.RedisError, OSError):
                time.sleep(0.02)
        else:
            unavailable("redis-server", f"did not answer on port {port}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- proxies -------------------------------------------------------------------------------


class _Pipe:
    def __init__(self, proxy: TcpProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = socket.create_connection(proxy.upstream)
        for sock in (client, self.server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def start(self) -> None:
        for src, dst in ((self.client, self.server), (self.server, self.client)):
            threading.Thread(target=self._copy, args=(src, dst), daemon=True).start()

    def passes(self, src: socket.socket, data: bytes) -> bool:
        """Whether ``data`` read from ``src`` is forwarded (False: the connection ends)."""
        return True

    def _copy(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data or not self.passes(src, data):
                    break
                dst.sendall(data)
        except OSError:
            pass
        self.close()
        self.proxy._forget(self)


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream`` byte for byte.  :meth:`cut` severs every
    open connection and refuses new ones until :meth:`restore` (a link down, both ways)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._pipes: set[_Pipe] = set()
        self.down = False
        self.cuts = 0  #: how many times the link was cut
        self.severed = 0  #: open connections closed by cuts
        self.refused = 0  #: connections refused while the link was down
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self.down:
                    self.refused += 1
                    client.close()
                    continue
                self.accepted += 1
            try:
                pipe = self.pipe(client)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pipes.add(pipe)
            pipe.start()

    def pipe(self, client: socket.socket) -> _Pipe:
        """The forwarding of one accepted connection."""
        return _Pipe(self, client)

    def _forget(self, pipe: _Pipe) -> None:
        with self._lock:
            self._pipes.discard(pipe)

    def cut(self) -> int:
        with self._lock:
            self.down = True
            self.cuts += 1
            pipes, self._pipes = self._pipes, set()
            self.severed += len(pipes)
        for pipe in pipes:
            pipe.close()
        return len(pipes)

    def restore(self) -> None:
        with self._lock:
            self.down = False

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            pipes, self._pipes = self._pipes, set()
        for pipe in pipes:
            pipe.close()


class _Spied(_Pipe):
    """A connection whose client bytes the proxy looks at before forwarding them."""

    proxy: SiteCutter

    def passes(self, src: socket.socket, data: bytes) -> bool:
        # spotted: the link is cut, these bytes never arrive
        return src is not self.client or not self.proxy.spotted(data)


class SiteCutter(TcpProxy):
    """A :class:`TcpProxy` that cuts the link at one call site: the ``n``-th time a client
    sends bytes holding ``marker`` (a spec action's name in a PostgreSQL transaction, a
    coordination script's SHA in a Redis ``EVALSHA``), every connection is severed before
    those bytes are forwarded and new ones are refused; ``window`` seconds later the link
    is restored."""

    def __init__(
        self, upstream: tuple[str, int], marker: bytes, n: int = 1, window: float = 1.5
    ) -> None:
        self.marker = marker
        self.n = n
        self.window = window
        self.seen = 0
        self.fired_at: float | None = None
        super().__init__(upstream)

    def pipe(self, client: socket.socket) -> _Pipe:
        return _Spied(self, client)

    def spotted(self, data: bytes) -> bool:
        with self._lock:
            if self.fired_at is not None or self.marker not in data:
                return False
            self.seen += 1
            if self.seen < self.n:
                return False
            self.fired_at = time.monotonic()
        self.cut()
        threading.Timer(self.window, self.restore).start()
        return True


def pg_upstream(dsn: str) -> tuple[str, int]:
    params = conninfo_to_dict(dsn)
    return str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)


def via(dsn: str, port: int) -> str:
    """``dsn`` rerouted through a proxy on ``port``, without encryption."""
    return make_conninfo(
        dsn,
        host="127.0.0.1",
        hostaddr="127.0.0.1",
        port=str(port),
        sslmode="disable",
        gssencmode="disable",
    )


# -- the batch -------------------------------------------------------------------------------


class Batch:
    """``n`` ``nap`` jobs on one PostgreSQL database and one Redis, run by worker processes
    (each may reach the services through its own proxies), recorded to ``tmp/record``."""

    def __init__(
        self, dsn: str, redis_url: str, tmp: Path, config: dict[str, int], n: int, nap: float
    ) -> None:
        self.dsn = dsn
        self.redis_url = redis_url
        self.ns = f"remora-fault:{secrets.token_hex(4)}"
        self.record = tmp / "record"
        self.config = config
        self.jobs = [f"b-{i + 1}" for i in range(n)]
        self.workers: list[subprocess.Popen[str]] = []
        self.started = time.monotonic()
        submit = self.remora(
            self.dsn,
            self.redis_url,
            "submit",
            "nap",
            "--id",
            "b",
            "--count",
            str(n),
            "--payload",
            json.dumps({"seconds": nap}),
            "--config",
            json.dumps(config),
        )
        out, err = submit.communicate(timeout=BOUND)
        assert submit.returncode == 0, f"submit failed: {out}{err}"
        self.durable: DurableStore = open_postgres(dsn)

    def remora(self, dsn: str, redis_url: str, *args: str) -> subprocess.Popen[str]:
        stores = ["--dsn", dsn, "--redis", redis_url, "--namespace", self.ns]
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "remora",
                "jobs",
                args[0],
                *args[1:],
                *stores,
                "--record",
                str(self.record),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    def worker(self, dsn: str | None = None, redis_url: str | None = None) -> subprocess.Popen[str]:
        proc = self.remora(
            dsn or self.dsn,
            redis_url or self.redis_url,
            "worker",
            "--app",
            "tests.jobs.fault_app",
            "--concurrency",
            "2",
            "--until-idle",
            "--poll",
            "0.02",
            "--reconcile-every",
            "0.2",
            "--log-format",
            "none",  # stderr is read only at the end: keep it to the worker's error line
        )
        self.workers.append(proc)
        return proc

    def wait_until(self, what: str, cond: Callable[[], bool]) -> None:
        give_up = time.monotonic() + BOUND
        while not cond():
            assert time.monotonic() < give_up, f"timed out waiting for {what}"
            for w in self.workers:
                if w.poll() not in (None, 0, -9):
                    out, err = w.communicate()
                    raise AssertionError(f"a worker failed ({w.returncode}): {out}{err}")
            time.sleep(0.02)

    def phases(self) -> dict[str, Phase]:
        return {j.id: j.phase for j in self.durable.jobs()}

    def count(self, *phases: Phase) -> int:
        return sum(1 for p in self.phases().values() if p in phases)

    def finish(self) -> None:
        for w in self.workers:
            if w.returncode == -9:
                continue
            try:
                out, err = w.communicate(timeout=BOUND)
            except subprocess.TimeoutExpired:
                w.kill()
                out, err = w.communicate()
                raise AssertionError(f"a worker did not end: {out}{err}") from None
            assert w.returncode in (0, -9), f"exit {w.returncode}: {out}{err}"

    def verify(self) -> tuple[ValidationReport, list[StepRecord]]:
        """Every job succeeded, terminal exactly once, with its winning attempt's result;
        nothing lost; the recorded run validates against the spec."""
        from remora.jobs.redis_coordination import RedisCoordination

        durable = self.durable
        jobs = {j.id: j for j in durable.jobs()}
        assert sorted(jobs) == sorted(self.jobs), "a job was lost or invented"
        log = durable.log()
        target = PostgresTarget(self.dsn)
        try:
            staging = target_staging(durable.snapshot(), target.snapshot())
            for job_id, job in jobs.items():
                assert job.phase is Phase.SUCCEEDED, (job_id, job)
                terminal = [e for e in log if e.key == job_id and e.action in TERMINAL_ACTIONS]
                assert len(terminal) == 1, (job_id, terminal)
                winner = AttemptId(job_id, job.committed)
                assert (
                    target.data(winner, job.max_progress)
                    == winning_result(job_id, job.committed).encode()
                )
        finally:
            target.close()
        records: list[StepRecord] = []
        for path in sorted(self.record.glob("*.jsonl")):
            lines = path.read_text().splitlines()
            for i, line in enumerate(lines):
                try:
                    records.append(StepRecord(**json.loads(line)))
                except json.JSONDecodeError:
                    # A SIGKILLed process's last line may be torn: its step, if it took
                    # effect, is in the stores' logs (merge_records).
                    assert i == len(lines) - 1, f"{path}: a torn record before the end"
        config = durable.config() or JobsConfig()
        stream = RedisCoordination(self.redis_url, config, namespace=self.ns)
        merged = merge_records(records, log, stream.log(), staging)
        stream.close()
        snap = durable.snapshot()
        constants = constants_of_run(
            merged, sorted(jobs), [w.id for w in snap.workers], config, local_limit=2
        )
        try:
            report = validate_run(merged, constants, config)
        except RefinementViolation:
            # Keep what was validated (the stores go with the test): the merged run, its
            # constants and config, to validate again offline (``revalidate``).
            self.dump(merged, constants, config)
            raise
        assert report.actions.get("AcceptSuccess") == len(self.jobs)
        return report, merged

    def dump(self, merged: list[StepRecord], constants: Any, config: JobsConfig) -> Path:
        path = self.record.parent / "merged.json"
        doc = {
            "records": [r.to_json() for r in merged],
            "constants": constants._asdict() if hasattr(constants, "_asdict") else None,
            "jobs": sorted(self.jobs),
            "workers": list(constants.Workers[1:]),
            "config": config.to_json(),
        }
        path.write_text(json.dumps(doc, default=sorted))
        return path

    def close(self) -> None:
        for w in self.workers:
            if w.poll() is None:
                w.kill()
                w.communicate()
        self.durable.close()


# -- losing COMMIT replies -------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise OSError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _message(sock: socket.socket) -> tuple[bytes, bytes]:
    head = _recv_exact(sock, 5)
    (length,) = struct.unpack("!I", head[1:])
    return head[:1], head + _recv_exact(sock, length - 4)


def _text(raw: bytes) -> bytes:
    return raw.split(b"\0", 1)[0].strip().rstrip(b";").strip().upper()


class _PgLink(_Pipe):
    """One connection, read message by message (PostgreSQL protocol v3: a startup packet,
    then ``type + int32 length + body``).  A transaction whose messages mention the marker
    is *marked*; its COMMIT — a simple query, a ``Parse`` of ``COMMIT``, or a ``Bind`` of a
    statement psycopg prepared from ``COMMIT`` (it prepares a query run five times) — is cut
    when the proxy has a cut armed: ``after`` forwards it and drops the server's reply
    (it commits; the client never hears), ``before`` drops it (it does not commit)."""

    proxy: CommitCutter

    def __init__(self, proxy: CommitCutter, client: socket.socket) -> None:
        super().__init__(proxy, client)
        self.commit_names: set[bytes] = set()
        self.swallow = False

    def start(self) -> None:
        threading.Thread(target=self._up, daemon=True).start()
        threading.Thread(target=self._down, daemon=True).start()

    def _up(self) -> None:
        marked: list[bytes] = []
        pending = ""
        try:
            (length,) = struct.unpack("!I", _recv_exact(self.client, 4))
            self.server.sendall(struct.pack("!I", length) + _recv_exact(self.client, length - 4))
            while True:
                kind, raw = _message(self.client)
                body = raw[5:]
                commit = False
                if kind == b"Q":
                    commit = _text(body) in (b"COMMIT", b"END")
                    if _text(body) == b"ROLLBACK":
                        marked.clear()
                elif kind == b"P":
                    name, _, rest = body.partition(b"\0")
                    if _text(rest) == b"COMMIT":
                        commit = True
                        self.commit_names.add(name)
                    elif _text(rest) == b"ROLLBACK":
                        marked.clear()
                elif kind == b"B":
                    _, _, rest = body.partition(b"\0")
                    stmt = rest.split(b"\0", 1)[0]
                    commit = bool(stmt) and stmt in self.commit_names
                if self.proxy.marker in raw:
                    marked.append(raw)
                if commit and not pending and marked:
                    pending = self.proxy.take(b"".join(marked))
                    marked.clear()
                    if pending == "before":
                        self.close()
                        return
                elif commit:
                    marked.clear()
                if pending == "after" and kind in (b"Q", b"S"):
                    self.swallow = True  # no reply to this COMMIT may reach the client
                    pending = ""
                self.server.sendall(raw)
        except OSError:
            self.close()

    def _down(self) -> None:
        try:
            while True:
                kind, raw = _message(self.server)
                if self.swallow:
                    if kind == b"Z":  # the COMMIT's reply is complete: lose it, cut
                        self.close()
                        return
                    continue
                self.client.sendall(raw)
        except OSError:
            self.close()


class CommitCutter(TcpProxy):
    """A PostgreSQL proxy that loses the COMMIT (reply) of transactions mentioning
    ``marker``: :meth:`arm` queues cuts (``"after"``: the reply is lost, the transaction
    committed; ``"before"``: the COMMIT is lost, it did not); :attr:`cut_jobs` records each
    cut and the job ids (``id_pattern``) its transaction mentioned."""

    def __init__(self, upstream: tuple[str, int], marker: bytes, id_pattern: bytes) -> None:
        import re

        self.marker = marker
        self._ids = re.compile(id_pattern)
        self._armed: list[str] = []
        self.cut_jobs: list[tuple[str, set[str]]] = []
        super().__init__(upstream)

    def arm(self, *cuts: str) -> None:
        with self._lock:
            self._armed.extend(cuts)

    def take(self, transaction: bytes) -> str:
        with self._lock:
            if not self._armed:
                return ""
            cut = self._armed.pop(0)
            jobs = {m.decode() for m in self._ids.findall(transaction)}
            self.cut_jobs.append((cut, jobs))
            return cut

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                link = _PgLink(self, client)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.accepted += 1
                self._pipes.add(link)
            link.start()
