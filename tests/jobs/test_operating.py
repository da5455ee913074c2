"""Operating the job runtime (issue 22): no job lost to a worker's configuration, strict
input, stoppable workers, timeouts and cancellation that frees a slot."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from remora.cli import main
from remora.clock import MonotonicClock
from remora.context import Context
from remora.jobs.coordination import Coordination, MemoryCoordination
from remora.jobs.durable import open_sqlite
from remora.jobs.handlers import Registry
from remora.jobs.io import Actor, MemoryRecorder
from remora.jobs.model import JobsConfig, Phase
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget, MemoryVault
from remora.jobs.worker import Worker
from remora.sim.jobs.refinement import constants_of_run, merge_records, validate_run
from tests.jobs.operate import SAFETY, end, wait_for

REPO = Path(__file__).resolve().parents[2]
APP = "tests.jobs.ops_app"


def run_cli(
    *args: str, cwd: Path = REPO, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remora", "jobs", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        input=stdin,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def status_rows(db: str) -> dict[str, dict[str, Any]]:
    out = run_cli("status", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    return {r["id"]: r for r in json.loads(out.stdout)["jobs"]}


# -- item 4: no job lost to a worker's configuration ------------------------------------------


def _greet_registry() -> Registry:
    reg = Registry()

    @reg.handler("greet")
    def greet(ctx: Any) -> str:
        return "hi"

    return reg


def _run_until_done(w: Worker, stores: Stores, job: str) -> None:
    stop = threading.Event()

    def idle() -> None:
        if stores.durable.job(job).phase.terminal:
            stop.set()

    t = threading.Thread(
        target=lambda: w.run(stop=stop, poll=0.005, reconcile_every=0.05, on_idle=idle)
    )
    t.start()
    t.join(120)
    stop.set()
    t.join(30)
    assert not t.is_alive()


def _only_registered_handlers(coord: Coordination, stores: Stores, rec: MemoryRecorder) -> None:
    client = Actor("client", Context(stores.clock), recorder=rec)
    # Jobs of a handler the worker lacks, ordered before (and outnumbering the sample of)
    # the one it has.
    others = [f"a{i:02d}" for i in range(12)]
    for job in others:
        stores.submit(client, job, "echo", None, enqueue=True)
    stores.submit(client, "zz", "greet", None, enqueue=True)
    w = Worker(stores, "w1", recorder=rec, registry=_greet_registry())
    w.start()
    _run_until_done(w, stores, "zz")
    assert stores.durable.job("zz").phase is Phase.SUCCEEDED
    snap = stores.durable.snapshot()
    assert not [a for a in snap.attempts if a.job in others]
    for job in others:
        row = stores.durable.job(job)
        assert row.phase is Phase.QUEUED and not row.error, row
    assert set(others) <= set(coord.snapshot().queued)


def _stores(coord_for: Any) -> tuple[Stores, MemoryRecorder]:
    clock = MonotonicClock()
    cfg = JobsConfig(tick_ms=50, lease_ticks=200, reservation_ticks=200, max_progress=4)
    coord = coord_for(clock, cfg)
    return (
        Stores(open_sqlite(":memory:"), coord, MemoryTarget(), MemoryVault(), clock, cfg),
        MemoryRecorder(),
    )


def test_worker_reserves_only_registered_handlers_memory() -> None:
    stores, rec = _stores(MemoryCoordination)
    _only_registered_handlers(stores.coordination, stores, rec)
    records = merge_records(rec.steps, stores.durable.log())
    jobs = [j.id for j in stores.durable.jobs()]
    constants = constants_of_run(records, jobs, ["w1"], stores.config, local_limit=1)
    validate_run(records, constants, stores.config)


def test_worker_reserves_only_registered_handlers_redis() -> None:
    from remora.jobs.redis_coordination import RedisCoordination
    from tests.common.services import require_redis

    url = require_redis()
    ns = f"remora:test-ops:{secrets.token_hex(4)}"
    stores, rec = _stores(lambda clock, cfg: RedisCoordination(url, cfg, namespace=ns))
    try:
        _only_registered_handlers(stores.coordination, stores, rec)
    finally:
        stores.coordination.wipe(Actor("cleanup", Context(stores.clock)))  # type: ignore[union-attr]
        stores.close()


def test_until_idle_worker_leaves_foreign_jobs_queued(tmp_path: Path) -> None:
    """``--app`` lacking a job's handler: the job stays queued (it was failed for good)
    and ``--until-idle`` still ends."""
    db = str(tmp_path / "j.sqlite3")
    assert run_cli("submit", "echo", "--db", db, "--id", "e").returncode == 0
    assert run_cli("submit", "greet", "--db", db, "--id", "g", "--payload", '{"name": "A"}')
    out = run_cli("worker", "--db", db, "--app", "examples.jobs.app", "--until-idle")
    assert out.returncode == 0, out.stderr
    rows = status_rows(db)
    assert rows["g"]["phase"] == "Succeeded"
    assert rows["e"]["phase"] == "Queued" and rows["e"]["attempts"] == 0
    assert rows["e"]["error"] is None


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("import json\n", "registers no handler"),
        ("def broken(:\n", "SyntaxError"),
        ("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
        ("import no_such_module_here\n", "No module named 'no_such_module_here'"),
        ("import sys\nsys.exit(3)\n", "SystemExit"),
    ],
)
def test_bad_app_is_one_line_exit_2(tmp_path: Path, source: str, cause: str) -> None:
    name = f"badapp_{secrets.token_hex(3)}"
    (tmp_path / f"{name}.py").write_text(source)
    db = str(tmp_path / "j.sqlite3")
    out = run_cli("worker", "--db", db, "--app", name, "--until-idle", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert name in out.stderr and cause in out.stderr, out.stderr
    assert "internal error" not in out.stderr


def test_app_json_registers_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "j.sqlite3")
    assert run_cli("submit", "echo", "--db", db, "--id", "e").returncode == 0
    out = run_cli("worker", "--db", db, "--app", "json", "--until-idle")
    assert out.returncode == 2 and "'json' registers no handler" in out.stderr
    assert status_rows(db)["e"]["phase"] == "Queued"


# -- item 8: input ------------------------------------------------------------------------------


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ('{"a": NaN}', "NaN is not valid JSON"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ("[1e400]", "out of range"),
    ],
)
def test_payload_strict(
    payload: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "j.sqlite3")
    code, _, err = _main(["jobs", "submit", "greet", "--db", db, "--payload", payload], capsys)
    assert code == 2 and reason in err and err.count("\n") == 1, err
    f = tmp_path / "p.json"
    f.write_text(payload)
    code, _, err = _main(["jobs", "submit", "greet", "--db", db, "--payload-file", str(f)], capsys)
    assert code == 2 and reason in err and err.count("\n") == 1, err


def test_payload_file_and_stdin(tmp_path: Path) -> None:
    db = str(tmp_path / "j.sqlite3")
    big = {"name": "x" * 300_000}  # over the shell's usual single-argument limit
    f = tmp_path / "p.json"
    f.write_text(json.dumps(big))
    out = run_cli("submit", "greet", "--db", db, "--id", "f", "--payload-file", str(f))
    assert out.returncode == 0, out.stderr
    out = run_cli(
        "submit", "greet", "--db", db, "--id", "s", "--payload-file", "-", stdin='{"name": "B"}'
    )
    assert out.returncode == 0, out.stderr
    out = run_cli("worker", "--db", db, "--app", "examples.jobs.app", "--until-idle")
    assert out.returncode == 0, out.stderr
    rows = status_rows(db)
    assert rows["s"]["result"] == "hello, B"
    assert rows["f"]["result"] == "hello, " + "x" * 300_000


def test_payload_size_limit_and_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from remora.cli.jobs import MAX_PAYLOAD_BYTES

    db = str(tmp_path / "j.sqlite3")
    f = tmp_path / "big.json"
    f.write_text(json.dumps("x" * MAX_PAYLOAD_BYTES))
    code, _, err = _main(["jobs", "submit", "g", "--db", db, "--payload-file", str(f)], capsys)
    assert code == 2 and f"larger than {MAX_PAYLOAD_BYTES} bytes" in err and err.count("\n") == 1
    missing = str(tmp_path / "nope.json")
    code, _, err = _main(["jobs", "submit", "g", "--db", db, "--payload-file", missing], capsys)
    assert code == 2 and "cannot read" in err and err.count("\n") == 1
    assert not Path(db).exists()  # nothing was written


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ('{"max_attempts": 1.5}', "max_attempts must be an integer from 1 to"),
        ('{"max_attempts": true}', "max_attempts must be an integer from 1 to"),
        ('{"tick_ms": 100000000000000000000000000000}', "tick_ms must be an integer"),
        ('{"lease_ticks": 0}', "lease_ticks must be an integer from 1"),
        ('{"down_after_ticks": -1}', "down_after_ticks must be an integer from 0"),
        ('{"bogus": 1}', "unknown field 'bogus'"),
        ("[1]", "must be a JSON object"),
        ('{"max_attempts": 2, "max_attempts": 3}', "duplicate key"),
    ],
)
def test_config_field_by_field(
    config: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "j.sqlite3")
    code, _, err = _main(["jobs", "submit", "greet", "--db", db, "--config", config], capsys)
    assert code == 2 and reason in err and err.count("\n") == 1, err
    assert not Path(db).exists()


@pytest.mark.parametrize("command", ["status", "cancel"])
def test_missing_db_refused_not_created(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "typo.sqlite3"
    extra = ["j1"] if command == "cancel" else []
    code, _, err = _main(["jobs", command, "--db", str(db), *extra], capsys)
    assert code == 2 and "no such jobs database" in err and err.count("\n") == 1, err
    assert not db.exists()


def test_cancel_terminal_or_cancelled_is_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "j.sqlite3")
    for job in ("c", "g"):
        assert _main(["jobs", "submit", "greet", "--db", db, "--id", job], capsys)[0] == 0
    code, out, _ = _main(["jobs", "cancel", "--db", db, "c"], capsys)
    assert code == 0
    code, out, _ = _main(["jobs", "cancel", "--db", db, "c"], capsys)
    assert code == 0 and "already" in out, out
    assert (
        run_cli("worker", "--db", db, "--app", "examples.jobs.app", "--until-idle").returncode == 0
    )
    for job in ("c", "g"):
        code, out, _ = _main(["jobs", "cancel", "--db", db, job], capsys)
        assert code == 0 and "already" in out and "nothing to cancel" in out, out


def test_status_works_with_redis_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "j.sqlite3")
    assert _main(["jobs", "submit", "greet", "--db", db, "--id", "g"], capsys)[0] == 0
    code, out, err = _main(
        ["jobs", "status", "--db", db, "--redis", "redis://127.0.0.1:9/0", "--json"], capsys
    )
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)["jobs"]] == ["g"]


def test_worker_postgres_unreachable_is_one_line(tmp_path: Path) -> None:
    out = run_cli(
        "worker",
        "--dsn",
        "postgresql://postgres@127.0.0.1:9/none?connect_timeout=3",
        "--app",
        "examples.jobs.app",
        "--until-idle",
    )
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert "internal error" not in out.stderr and "PostgreSQL" in out.stderr


# -- item 2: stoppable workers ------------------------------------------------------------------


def _hung_worker(tmp_path: Path, grace: str) -> tuple[subprocess.Popen[str], str, Path]:
    db = str(tmp_path / "j.sqlite3")
    marker = tmp_path / "started"
    cfg = json.dumps({"tick_ms": 100, "lease_ticks": 50, "reservation_ticks": 50})
    payload = json.dumps({"marker": str(marker)})
    out = run_cli("submit", "hang", "--db", db, "--id", "h", "--payload", payload, "--config", cfg)
    assert out.returncode == 0, out.stderr
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "remora",
            "jobs",
            "worker",
            "--db",
            db,
            "--app",
            APP,
            "--id",
            "w-hung",
            "--grace",
            grace,
            "--log-format",
            "none",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        wait_for(lambda: Path(f"{marker}.1").exists() or proc.poll() is not None, "the handler")
    except BaseException:
        proc.kill()
        raise
    assert proc.poll() is None, proc.communicate()
    return proc, db, marker


def test_sigterm_stops_a_worker_whose_handler_hangs(tmp_path: Path) -> None:
    """SIGTERM: no new jobs, the hung attempt gets ``--grace``, then is abandoned; the
    incarnation goes down durably and the worker exits 0."""
    proc, db, _ = _hung_worker(tmp_path, grace="0.2")
    proc.send_signal(signal.SIGTERM)
    code, err = end(proc)
    assert code == 0, err
    assert "SIGTERM: stopping" in err and "internal error" not in err
    durable = open_sqlite(db)
    assert durable.liveness(time.time())[1] == []  # no incarnation up
    crashes = [e for e in durable.log() if e.action == "CrashWorker"]
    assert [(e.params, e.actor) for e in crashes] == [({"w": "w-hung"}, "w-hung")]
    assert status_rows(db)["h"]["phase"] in ("Running", "Queued")  # to be retried


def test_second_signal_exits_at_once(tmp_path: Path) -> None:
    proc, _, _ = _hung_worker(tmp_path, grace="600")
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the worker has seen the first signal
    assert "SIGINT: stopping" in first, first
    proc.send_signal(signal.SIGTERM)
    code, err = end(proc)
    assert code == 1
    assert err.count("\n") == 1 and "SIGTERM again: exiting at once" in err, err


# -- items 1 and 3: timeouts, cancellation that frees a slot --------------------------------


def _run_in_thread(w: Worker, stop: threading.Event) -> threading.Thread:
    t = threading.Thread(
        target=lambda: w.run(stop=stop, poll=0.005, reconcile_every=0.05, grace=0.0),
        daemon=True,
    )
    t.start()
    return t


def _validate(stores: Stores, rec: MemoryRecorder, workers: list[str], limit: int) -> None:
    from remora.jobs.reconciler import Reconciler

    Reconciler(stores, "final", recorder=rec).reconcile_once()
    records = merge_records(rec.steps, stores.durable.log())
    jobs = [j.id for j in stores.durable.jobs()]
    validate_run(
        records,
        constants_of_run(records, jobs, workers, stores.config, local_limit=limit),
        stores.config,
    )


def test_cancelling_hung_jobs_frees_their_slots() -> None:
    """Two hung (non-cooperative) jobs fill a ``concurrency=2`` worker; cancelling them
    frees both slots: two more jobs run while the hung threads are still stuck."""
    from tests.jobs import ops_app

    ops_app.RELEASE.clear()
    stores, rec = _stores(MemoryCoordination)
    client = Actor("client", Context(stores.clock), recorder=rec)
    for job in ("h1", "h2"):
        stores.submit(client, job, "hang", None, enqueue=True)
    w = Worker(stores, "w1", concurrency=2, recorder=rec, registry=_ops_registry())
    w.start()
    stop = threading.Event()
    t = _run_in_thread(w, stop)
    try:
        wait_for(
            lambda: all(stores.durable.job(j).phase is Phase.RUNNING for j in ("h1", "h2")),
            "both hung jobs running",
        )
        for job in ("h1", "h2"):
            stores.request_cancel(client, job)
        for job in ("q1", "q2"):
            stores.submit(client, job, "quick", None, enqueue=True)
        wait_for(
            lambda: all(stores.durable.job(j).phase is Phase.SUCCEEDED for j in ("q1", "q2")),
            "the quick jobs to run in the freed slots",
        )
        wait_for(
            lambda: all(stores.durable.job(j).phase is Phase.CANCELLED for j in ("h1", "h2")),
            "the cancels to finish",
        )
        assert not ops_app.RELEASE.is_set()  # the hung threads are still stuck
    finally:
        ops_app.RELEASE.set()
        stop.set()
        t.join(SAFETY)
    _validate(stores, rec, ["w1"], 2)


def test_handler_timeout_is_a_retryable_failure() -> None:
    """``@handler(..., timeout=0.3)``: the hung first attempt ends as a retryable failure
    (the job's error says so) and the retry succeeds; what the hung attempt stages once
    released is never committed."""
    from tests.jobs import ops_app

    ops_app.RELEASE.clear()
    stores, rec = _stores(MemoryCoordination)
    client = Actor("client", Context(stores.clock), recorder=rec)
    stores.submit(client, "t", "first_hangs", None, enqueue=True)
    w = Worker(stores, "w1", recorder=rec, registry=_ops_registry())
    w.start()
    stop = threading.Event()
    t = _run_in_thread(w, stop)
    try:
        wait_for(lambda: stores.durable.job("t").phase.terminal, "the job to finish")
        ops_app.RELEASE.set()  # the abandoned first attempt now tries to stage
        time.sleep(0.2)
    finally:
        ops_app.RELEASE.set()
        stop.set()
        t.join(SAFETY)
    row = stores.durable.job("t")
    assert row.phase is Phase.SUCCEEDED, row
    assert stores.result("t") == b"attempt 2"
    first = next(a for a in stores.durable.snapshot().attempts if a.token == 1)
    assert not first.committed
    assert any(e.action.startswith("AcceptRetryableFailure") for e in stores.durable.log()), (
        "the timeout went through ProcessOutcome"
    )
    _validate(stores, rec, ["w1"], 1)


def _ops_registry() -> Registry:
    import tests.jobs.ops_app  # noqa: F401  (registers into the default registry)
    from remora.jobs.handlers import REGISTRY

    return REGISTRY


# -- item 6 (part): status shows the current attempt ----------------------------------------


def test_status_shows_the_current_attempt_not_an_earlier_error(tmp_path: Path) -> None:
    """``flaky`` fails its first attempt and succeeds on the second: the Succeeded job shows
    no error (the first attempt's stays in its history), its attempt and worker."""
    db = str(tmp_path / "j.sqlite3")
    assert run_cli("submit", "flaky", "--db", db, "--id", "f").returncode == 0
    assert run_cli("submit", "doomed", "--db", db, "--id", "d").returncode == 0
    out = run_cli(
        "worker", "--db", db, "--app", "examples.jobs.app", "--until-idle", "--id", "w-st"
    )
    assert out.returncode == 0, out.stderr
    rows = status_rows(db)
    assert rows["f"]["phase"] == "Succeeded" and rows["f"]["error"] is None, rows["f"]
    assert (rows["f"]["attempt"], rows["f"]["worker"]) == (2, "w-st")
    assert rows["d"]["phase"] == "Failed" and "never succeed" in rows["d"]["error"]
    table = run_cli("status", "--db", db)
    assert table.returncode == 0 and "w-st" in table.stdout


def test_worker_logs_each_attempt_transition_as_json(tmp_path: Path) -> None:
    db = str(tmp_path / "j.sqlite3")
    assert run_cli("submit", "count", "--db", db, "--id", "c").returncode == 0
    assert run_cli("submit", "flaky", "--db", db, "--id", "f").returncode == 0
    out = run_cli(
        "worker",
        "--db",
        db,
        "--app",
        "examples.jobs.app",
        "--until-idle",
        "--id",
        "w-log",
        "--log-format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stderr.splitlines()]
    events = {(x["event"], x["action"]) for x in lines}
    for want in (
        ("reserve", "Reserve"),
        ("start", "ActivateAttempt"),
        ("checkpoint", "PersistCheckpoint"),
        ("outcome", "SendOutcome"),
        ("accept", "AcceptSuccess"),
        ("accept", "AcceptRetryableFailureWithBudget"),
        ("declare-down", "CrashWorker"),
    ):
        assert want in events, (want, events)
    assert all(isinstance(x["ts"], float) and x["actor"].startswith("w-log") for x in lines)
    text = run_cli("worker", "--db", db, "--app", "examples.jobs.app", "--until-idle")
    assert text.returncode == 0 and " declare-down CrashWorker " in text.stderr, text.stderr
