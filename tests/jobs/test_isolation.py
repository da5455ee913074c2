"""Process isolation (issue 22, items 1 to 3): handlers in a prefork pool of child processes
(:class:`remora.jobs.processes.ProcessExecutor`, ``remora jobs worker``'s default) that the
worker can kill — a timeout, a cancel, a stop — and whose deaths end only their attempts.

Each test names the process that ran a handler (the handlers write their pid) and checks it
is gone when it should be: under thread isolation (the old code) the pid is the worker's own,
so every such check fails there.  Every in-process run is validated against the spec."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from remora.context import Context
from remora.jobs.durable import open_sqlite
from remora.jobs.handlers import REGISTRY
from remora.jobs.io import Actor, MemoryRecorder
from remora.jobs.model import JobsConfig, Phase
from remora.jobs.processes import ProcessExecutor
from remora.jobs.reconciler import Reconciler
from remora.jobs.worker import Worker
from remora.sim.jobs.refinement import constants_of_run, merge_records, validate_run
from tests.jobs.operate import SAFETY, end, memory_stores, wait_for

REPO = Path(__file__).resolve().parents[2]
APP = "tests.jobs.ops_app"


def alive(pid: int) -> bool:
    """The process runs (a zombie — dead, not yet reaped by whoever is its parent now — does
    not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pid_in(path: Path) -> int:
    wait_for(path.exists, f"{path.name} to be written")
    wait_for(lambda: path.read_text().strip() != "", f"{path.name} to hold a pid")
    return int(path.read_text())


class Run:
    """A worker with process isolation in this test process, on SQLite + memory
    coordination, recorded."""

    def __init__(self, concurrency: int = 1, **config: int) -> None:
        cfg = JobsConfig(**{"tick_ms": 50, "lease_ticks": 200, "reservation_ticks": 200, **config})
        self.stores = memory_stores(cfg)
        clock = self.stores.clock
        self.rec = MemoryRecorder()
        self.client = Actor("client", Context(clock), recorder=self.rec)
        import tests.jobs.ops_app  # noqa: F401  (registers into the default registry)

        self.worker = Worker(
            self.stores, "w1", concurrency=concurrency, recorder=self.rec, registry=REGISTRY
        )
        self.executor = ProcessExecutor(APP, concurrency)
        self.executor.prestart()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def submit(self, job: str, handler: str, payload: Any = None, timeout: float = 0.0) -> None:
        self.stores.submit(self.client, job, handler, payload, enqueue=True, timeout=timeout)

    def start(self) -> None:
        self.worker.start()
        self.thread = threading.Thread(
            target=lambda: self.worker.run(
                stop=self.stop,
                poll=0.005,
                reconcile_every=0.05,
                grace=0.0,
                executor=self.executor,
            ),
            daemon=True,
        )
        self.thread.start()

    def phase(self, job: str) -> Phase:
        return self.stores.durable.job(job).phase

    def wait_terminal(self, *jobs: str) -> None:
        wait_for(lambda: all(self.phase(j).terminal for j in jobs), f"{jobs} to finish")

    def error(self, job: str) -> str:
        """The error of the job's last accepted failure (kept on its row, also once a
        retry succeeded)."""
        return self.stores.durable.job(job).error

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(SAFETY)
            assert not self.thread.is_alive()
        self.executor.close()
        Reconciler(self.stores, "final", recorder=self.rec).reconcile_once()
        records = merge_records(self.rec.steps, self.stores.durable.log())
        jobs = [j.id for j in self.stores.durable.jobs()]
        config = self.stores.config
        constants = constants_of_run(
            records, jobs, ["w1"], config, local_limit=self.worker.concurrency
        )
        validate_run(records, constants, config)


def test_a_cancelled_hung_job_s_child_is_killed_and_its_slot_reused(tmp_path: Path) -> None:
    """Two hung handlers (they ignore ``ctx.cancelled``, and nothing ever releases them) fill
    a ``concurrency=2`` worker; cancelling them kills their children and two new jobs run in
    the fresh children that replace them."""
    run = Run(concurrency=2)
    try:
        for job in ("h1", "h2"):
            run.submit(job, "hang", {"marker": str(tmp_path / job)})
        run.start()
        hung = [pid_in(tmp_path / f"{job}.1") for job in ("h1", "h2")]
        assert os.getpid() not in hung and all(alive(p) for p in hung)
        for job in ("h1", "h2"):
            run.stores.request_cancel(run.client, job)
        for job in ("q1", "q2"):
            run.submit(job, "quick")
        run.wait_terminal("h1", "h2", "q1", "q2")
        assert [run.phase(j) for j in ("h1", "h2")] == [Phase.CANCELLED] * 2
        assert [run.stores.result(j) for j in ("q1", "q2")] == [b"quick"] * 2
        wait_for(lambda: not any(alive(p) for p in hung), "the hung children to be gone")
        assert run.executor.replaced == 2
        assert not set(hung) & set(run.executor.pids())  # the pool runs fresh children
    finally:
        run.finish()


def test_a_timeout_kills_the_child_and_the_retry_succeeds(tmp_path: Path) -> None:
    """``first_hangs`` (handler timeout 0.3 s) hangs in its first attempt: the attempt ends
    as a retryable failure, its child is killed — what it would stage is never staged —
    and the retry succeeds in a fresh child."""
    run = Run()
    try:
        run.submit("t", "first_hangs", {"marker": str(tmp_path / "t")})
        run.start()
        first = pid_in(tmp_path / "t.1")
        assert first != os.getpid()
        run.wait_terminal("t")
        assert run.phase("t") is Phase.SUCCEEDED
        assert run.error("t") == "timed out after 0.3s"
        wait_for(lambda: not alive(first), "the timed-out child to be gone")
        snap = run.stores.durable.snapshot()
        committed = [a.committed for a in sorted(snap.attempts, key=lambda a: a.token)]
        # the first attempt timed out and staged nothing that counts; a later one won (on a
        # loaded machine a fresh child can take longer than 0.3 s to start, so a retry may
        # time out too: attempt 3 then wins)
        assert committed[0] is False and committed[-1] is True and sum(committed) == 1
        assert run.stores.result("t") == f"attempt {len(committed)}".encode()
    finally:
        run.finish()


@pytest.mark.parametrize(
    ("handler_timeout", "job_timeout", "applies"),
    [(None, 0.2, 0.2), ("first_hangs", 30.0, 0.3), ("first_hangs", 0.2, 0.2)],
)
def test_the_smaller_of_the_handler_s_and_the_job_s_timeout_applies(
    tmp_path: Path, handler_timeout: str | None, job_timeout: float, applies: float
) -> None:
    """A job's own timeout (``submit --timeout``) ends an attempt as the handler's does;
    with both, the smaller applies."""
    run = Run(max_attempts=1)
    handler = handler_timeout or "hang"
    try:
        run.submit("t", handler, {"marker": str(tmp_path / "t")}, timeout=job_timeout)
        run.start()
        run.wait_terminal("t")
        row = run.stores.durable.job("t")
        assert row.timeout == job_timeout
        assert row.phase is Phase.FAILED and row.error == f"timed out after {applies:g}s", row
    finally:
        run.finish()


def test_a_timed_out_handler_is_asked_to_stop_first(tmp_path: Path) -> None:
    """Cooperative first: past its timeout a handler sees ``ctx.cancelled`` — through the
    pipe — and may stop on its own before it would be killed; the attempt still ends as a
    retryable failure (timed out), never as a success or a cancel."""
    run = Run(max_attempts=1)
    try:
        run.submit("p", "polite", {"marker": str(tmp_path / "p")}, timeout=0.3)
        run.start()
        run.wait_terminal("p")
        stopped = pid_in(tmp_path / "p.stopped.1")
        assert stopped == pid_in(tmp_path / "p.1") != os.getpid()
        row = run.stores.durable.job("p")
        assert row.phase is Phase.FAILED and row.error == "timed out after 0.3s", row
        assert run.executor.replaced == 0  # it stopped by itself: its child is reused
    finally:
        run.finish()


@pytest.mark.parametrize(
    ("how", "died"),
    [("exit", "exited with code 3"), ("segv", "SIGSEGV"), ("kill", "SIGKILL")],
)
def test_a_child_that_dies_ends_only_its_attempt(how: str, died: str) -> None:
    """A handler's process that dies on its own (``os._exit``, a segfault, a SIGKILL from
    outside) ends its attempt as a retryable failure; the worker runs on, replaces the child,
    and the retry resumes from the checkpoint the dead one persisted — the whole
    ``JobContext`` API (advance, checkpoint, resumed, resumed_data, put_secret) through the
    pipe."""
    run = Run(max_progress=2)
    try:
        run.submit("d", "dies", {"how": how})
        run.start()
        run.wait_terminal("d")
        assert run.phase("d") is Phase.SUCCEEDED, run.stores.durable.job("d")
        assert run.stores.result("d") == f"{how}: resumed from b'half' at 1, secret 1".encode()
        error = run.error("d")
        assert error.startswith("the handler's process died") and died in error, error
        assert run.executor.replaced == 1
        assert run.worker.up  # the worker itself never noticed more than a failed attempt
    finally:
        run.finish()


@pytest.mark.parametrize(
    ("end", "error"),
    [
        ("value", "TypeError: Object of type object is not JSON serializable"),
        ("exception", "_Unpicklable: carries a lock"),
    ],
)
def test_what_a_pipe_cannot_carry_is_a_retryable_error_not_a_hang(end: str, error: str) -> None:
    """A return value that is not JSON, an exception that cannot be pickled: each ends its
    attempt as a retryable failure naming it (both are turned into plain data in the child,
    as a thread's handler's would be); the retry succeeds in the same child."""
    run = Run()
    try:
        run.submit("a", "awkward", {"end": end})
        run.start()
        run.wait_terminal("a")
        assert run.stores.result("a") == b"plain at last"
        assert run.error("a") == error
        assert run.executor.replaced == 0
    finally:
        run.finish()


# -- the command line: stopping, and no orphan processes -------------------------------------


def _hung_cli_worker(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, list[int]]:
    """A ``remora jobs worker --concurrency 2`` whose two handlers hang (and ignore
    ``ctx.cancelled``); returns it with the pids of the handlers' processes."""
    db = str(tmp_path / "j.sqlite3")
    cfg = json.dumps({"tick_ms": 100, "lease_ticks": 50, "reservation_ticks": 50})
    for job in ("h1", "h2"):
        out = subprocess.run(
            [sys.executable, "-m", "remora", "jobs", "submit", "hang", "--db", db, "--id", job,
             "--payload", json.dumps({"marker": str(tmp_path / job)}), "--config", cfg],
            cwd=REPO, capture_output=True, text=True, timeout=SAFETY,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "remora", "jobs", "worker", "--db", db, "--app", APP,
         "--concurrency", "2", "--log-format", "none", *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        pids = [pid_in(tmp_path / f"{job}.1") for job in ("h1", "h2")]
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    assert proc.pid not in pids and all(alive(p) for p in pids)
    return proc, db, pids


def test_sigterm_kills_the_hung_children_after_grace_and_exits_0(tmp_path: Path) -> None:
    proc, db, pids = _hung_cli_worker(tmp_path, "--grace", "0.3")
    proc.send_signal(signal.SIGTERM)
    code, err = end(proc)
    assert code == 0, err
    assert "SIGTERM: stopping" in err and err.count("\n") == 1, err
    assert not [p for p in pids if alive(p)], "a handler's process outlived its worker"
    durable = open_sqlite(db)
    assert durable.liveness(time.time())[1] == []  # the incarnation went down durably
    assert [e.action for e in durable.log() if e.action == "CrashWorker"] == ["CrashWorker"]


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_exits_1_at_once_and_kills_the_children(
    tmp_path: Path, second: signal.Signals
) -> None:
    proc, _, pids = _hung_cli_worker(tmp_path, "--grace", "600")
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    assert "SIGINT: stopping" in proc.stderr.readline()
    proc.send_signal(second)
    code, err = end(proc)
    assert code == 1
    assert err.count("\n") == 1 and f"{second.name} again: exiting at once" in err, err
    assert not [p for p in pids if alive(p)], "a handler's process outlived its worker"


def test_children_of_a_sigkilled_worker_end_themselves(tmp_path: Path) -> None:
    """The worker is SIGKILLed (no handler of its own runs): its children see their
    lifeline close and exit — even the ones whose handler hangs."""
    proc, _, pids = _hung_cli_worker(tmp_path)
    proc.kill()
    proc.communicate(timeout=SAFETY)
    wait_for(lambda: not [p for p in pids if alive(p)], "the orphaned children to exit")


def test_thread_isolation_still_runs_jobs(tmp_path: Path) -> None:
    """``--isolation thread``: handlers in the worker's own threads (it cannot end a hung
    one; tests/jobs/test_operating.py covers how it leaves one behind)."""
    db = str(tmp_path / "j.sqlite3")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "remora", "jobs"]
    marker = str(tmp_path / "q")
    out = subprocess.run(
        [*cmd, "submit", "quick", "--db", db, "--id", "q"],
        cwd=REPO, capture_output=True, text=True, env=env, timeout=SAFETY,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    out = subprocess.run(
        [*cmd, "submit", "hang", "--db", db, "--id", "t", "--timeout", "0.3",
         "--payload", json.dumps({"marker": marker}), "--config", '{"max_attempts": 1}'],
        cwd=REPO, capture_output=True, text=True, env=env, timeout=SAFETY,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    worker = subprocess.Popen(
        [*cmd, "worker", "--db", db, "--app", APP, "--isolation", "thread", "--until-idle",
         "--log-format", "none", "--id", "w-thread"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert pid_in(Path(f"{marker}.1")) == worker.pid  # the handler runs in the worker
    code, err = end(worker)
    assert code == 0, err
    rows = {
        r["id"]: r
        for r in json.loads(
            subprocess.run(
                [*cmd, "status", "--db", db, "--json"],
                cwd=REPO,
                capture_output=True,
                text=True,
                env=env,
                timeout=SAFETY,
            ).stdout
        )["jobs"]
    }
    assert rows["q"]["result"] == "quick"
    assert rows["t"]["phase"] == "Failed" and rows["t"]["error"] == "timed out after 0.3s"
    assert rows["t"]["timeout"] == 0.3
