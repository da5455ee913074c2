"""Real-fault evidence on PostgreSQL + Redis (issue 14 item 4): ``remora jobs worker``
processes run a batch of jobs while a real fault hits them — the coordination store wiped
(FLUSHALL), links cut by a TCP proxy, a worker SIGKILLed, COMMIT replies of
``AcceptSuccess`` lost.  Each test ends with every job terminal exactly once, the committed
result the winning attempt's, nothing lost, the recorded run validated against the spec
(:func:`~remora.sim.jobs.refinement.validate_run`), and the fault counted as having happened.
The counts are printed (``pytest -s``) and summarised in docs/jobs.md."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

from remora.clock import MonotonicClock
from remora.context import Context
from remora.jobs.coordination import order_key
from remora.jobs.io import Actor, FileRecorder
from remora.jobs.model import JobsConfig, Phase
from tests.jobs.faultrun import (
    Batch,
    CommitCutter,
    SiteCutter,
    TcpProxy,
    pg_upstream,
    private_redis,
    via,
)

pytestmark = pytest.mark.services

CONFIG = {
    "tick_ms": 50,
    "lease_ticks": 20,
    "reservation_ticks": 20,
    "max_progress": 10,
    "max_attempts": 5,
}


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with private_redis(tmp_path) as url:
        yield url


def test_coordination_store_wiped_mid_run(
    remora_scratch_database: str, redis_url: str, tmp_path: Path
) -> None:
    """(a) FLUSHALL on the workers' Redis, twice, while jobs run: the reconcilers rebuild the
    queue from the durable store; the lost leases' attempts are reaped and retried."""
    from remora.jobs.redis_coordination import RedisCoordination

    started = time.monotonic()
    # 16 jobs: after the sixth is done ten are left, four of them running — with 12, the
    # two still queued were sometimes taken before the wait saw six done (CI, stop 34)
    batch = Batch(remora_scratch_database, redis_url, tmp_path, CONFIG, n=16, nap=0.4)
    wiper = Actor(
        "wiper", Context(MonotonicClock()), recorder=FileRecorder(batch.record / "wiper.jsonl")
    )
    coord = RedisCoordination(redis_url, JobsConfig(**CONFIG), namespace=batch.ns, flush_all=True)
    try:
        batch.worker()
        batch.worker()
        for at_least in (2, 6):
            batch.wait_until(
                f"{at_least} jobs done", lambda n=at_least: batch.count(Phase.SUCCEEDED) >= n
            )
            # queued jobs whose queue entries (and reservations) the wipe loses
            assert batch.count(Phase.QUEUED) > 0, "nothing left to disturb"
            coord.wipe(wiper)
        batch.finish()
        report, merged = batch.verify()
        wipes_done = sorted(
            (r.order for r in merged if r.action == "LoseCoordinationState"), key=order_key
        )
        # The fault happened, and the reconcilers saw it: after each wipe they enqueued the
        # jobs the durable store still had queued again.
        assert report.actions["LoseCoordinationState"] == 2
        rebuilt = [
            sum(
                1
                for r in merged
                if r.action == "Enqueue"
                and "reconciler" in r.actor
                and order_key(r.order) > order_key(wipe)
                and (i + 1 == len(wipes_done) or order_key(r.order) < order_key(wipes_done[i + 1]))
            )
            for i, wipe in enumerate(wipes_done)
        ]
        assert all(n > 0 for n in rebuilt), rebuilt
        print(
            f"\nwipe: {len(wipes_done)} FLUSHALLs, re-enqueued after each {rebuilt}, "
            f"reaped {report.actions.get('ReapLostAttempt', 0)}, "
            f"{report.steps} spec steps validated in {report.seconds:.2f}s, "
            f"wall {time.monotonic() - started:.1f}s"
        )
    finally:
        coord.close()
        batch.close()


def test_worker_sigkilled_and_a_new_incarnation_starts(
    remora_scratch_database: str, redis_url: str, tmp_path: Path
) -> None:
    """(c) A worker process holding running attempts is SIGKILLed; a new incarnation (a new
    process, a new id) starts.  The killed incarnation's leases expire (or, for an attempt
    killed before its activation, its reservation), its attempts are reaped and retried; it
    never comes back.  Its heartbeat expires (``down_after_ticks``: one lease here) and the
    new incarnation's reconciler declares it down — one ``CrashWorker`` in the durable log
    — and then cleans the staging its attempts left."""
    import signal

    from remora.jobs.model import AttemptId
    from remora.jobs.postgres import PostgresTarget

    started = time.monotonic()
    config = {**CONFIG, "down_after_ticks": CONFIG["lease_ticks"]}
    batch = Batch(remora_scratch_database, redis_url, tmp_path, config, n=10, nap=0.5)
    try:
        victim = batch.worker()
        killed: list[str] = []

        stage = PostgresTarget(batch.dsn)

        def victim_running() -> bool:
            snap = batch.durable.snapshot()
            ids = [w.id for w in snap.workers if f"-{victim.pid}-" in w.id]
            running = {j.id for j in snap.jobs if j.phase is Phase.RUNNING}
            mine = [a for a in snap.attempts if a.worker in ids and a.job in running]
            if mine:
                killed[:] = ids
            # killed once every attempt it runs staged (nap stages half at once, then
            # sleeps): the declaration must then clean that staging.  The victim may take
            # another job before the kill lands (under load it did): a stage write it
            # made unrecorded is taken from the target by trace validation (docs/jobs.md,
            # tests/jobs/test_trace_completion.py)
            return bool(mine) and all(stage.info(None, a.id) is not None for a in mine)

        try:
            batch.wait_until("the victim to stage", victim_running)
        finally:
            stage.close()
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        assert victim.returncode == -signal.SIGKILL
        batch.worker()  # the new incarnation
        batch.finish()
        report, merged = batch.verify()
        snap = batch.durable.snapshot()
        (victim_id,) = killed
        lost = {str(a.id) for a in snap.attempts if a.worker == victim_id and not a.committed}
        reaped = {r.params["a"] for r in merged if r.action == "ReapLostAttempt"}
        assert lost, "the victim held no attempt when killed"
        assert lost <= reaped, (lost, reaped)
        workers = {w.id for w in snap.workers}
        assert len(workers) == 2 and victim_id in workers
        # The declaration: the spec's CrashWorker(victim), by the other incarnation.
        declared = [
            e
            for e in batch.durable.log()
            if e.action == "CrashWorker" and e.params["w"] == victim_id
        ]
        assert len(declared) == 1 and not declared[0].actor.startswith(victim_id), declared
        target = PostgresTarget(batch.dsn)
        try:
            staged = {a: target.info(None, AttemptId.parse(a)) for a in lost}
        finally:
            target.close()
        left = {a for a, info in staged.items() if info is not None and not info.cleaned}
        assert not left, f"the killed incarnation's staging was not cleaned: {left}"
        cleaned = sum(1 for info in staged.values() if info is not None)
        assert cleaned, "the victim staged nothing (nap stages half at once)"
        print(
            f"\nsigkill: pid {victim.pid} ({victim_id}) killed holding {len(lost)} attempt(s), "
            f"all reaped ({report.actions.get('ExpireLease', 0)} leases expired, "
            f"{report.actions.get('ExpireReservation', 0)} reservations expired, "
            f"{report.actions['ReapLostAttempt']} reaps), declared down by "
            f"{declared[0].actor} ({len(declared)} CrashWorker), {cleaned} staging(s) "
            "cleaned, "
            f"{report.steps} spec steps validated in {report.seconds:.2f}s, "
            f"wall {time.monotonic() - started:.1f}s"
        )
    finally:
        batch.close()


def test_a_partitioned_worker_is_declared_down_and_fenced(
    remora_scratch_database: str, redis_url: str, tmp_path: Path
) -> None:
    """A live worker A loses its PostgreSQL link (a TCP proxy cut) while it runs a job and
    keeps its Redis link: it cannot renew its heartbeat, so worker B declares it down
    (``CrashWorker``, after one lease here).  The declaration's Redis mark refuses A's lease
    renewals — its lease expires although A still runs — and B takes the job over; A
    learns it is down (from the mark its stop reads, or from its heartbeat once the link
    is back) and the process exits (1, one line), never to act again.  Every job succeeds
    once and the recorded run validates."""
    from remora.jobs.postgres import PostgresTarget

    started = time.monotonic()
    config = {**CONFIG, "down_after_ticks": CONFIG["lease_ticks"]}
    batch = Batch(remora_scratch_database, redis_url, tmp_path, config, n=4, nap=3.0)
    proxy = TcpProxy(pg_upstream(remora_scratch_database))
    try:
        a = batch.worker(dsn=via(remora_scratch_database, proxy.port))
        batch.workers.remove(a)  # it is expected to exit 1: judged below
        a_ids: list[str] = []
        held: list[str] = []

        stage = PostgresTarget(batch.dsn)

        def a_running() -> bool:
            snap = batch.durable.snapshot()
            ids = [w.id for w in snap.workers if f"-{a.pid}-" in w.id]
            running = {j.id for j in snap.jobs if j.phase is Phase.RUNNING}
            mine = [x.id for x in snap.attempts if x.worker in ids and x.job in running]
            a_ids[:], held[:] = ids, [str(x) for x in mine]
            # Cut only once each of A's attempts has staged (nap stages once, then sleeps),
            # so that the fence, not a refused stage write, is what this test shows (a
            # stage write whose reply the cut loses and A never resolves is taken from
            # the target by trace validation: docs/jobs.md, "What is abstracted").
            return len(mine) == 2 and all(stage.info(None, x) is not None for x in mine)

        try:
            batch.wait_until("A to run two jobs and stage them", a_running)
        finally:
            stage.close()
        batch.worker()  # B
        (a_id,) = a_ids
        proxy.cut()

        def declared() -> list[Any]:
            return [
                e
                for e in batch.durable.log()
                if e.action == "CrashWorker" and e.params["w"] == a_id
            ]

        batch.wait_until("B to declare A down", lambda: bool(declared()))
        # A keeps running (and trying to renew through Redis) past its lease; it learns it
        # is down from the mark (its stop reads it) or, once the link is back, from its
        # heartbeat.
        time.sleep(CONFIG["lease_ticks"] * CONFIG["tick_ms"] / 1000 * 2)
        proxy.restore()
        out, err = a.communicate(timeout=60)
        assert a.returncode == 1, (a.returncode, out, err)
        assert "declared down" in err and len(err.strip().splitlines()) == 1, err
        batch.finish()
        report, merged = batch.verify()
        (decl,) = declared()
        assert not decl.actor.startswith(a_id)
        # A's lease ended although A ran on: expired (its renewals refused by the mark) or
        # released by B's reconciler (an attempt of an incarnation that is down).
        ended = {
            r.params["a"]
            for r in merged
            if r.action == "ExpireLease"
            or (r.action == "ReleaseLease" and not r.actor.startswith(a_id))
        }
        reaped = {r.params["a"] for r in merged if r.action == "ReapLostAttempt"}
        assert held and set(held) <= ended & reaped, (held, ended, reaped)
        print(
            f"\npartition: A ({a_id}) cut from PostgreSQL holding {held}; declared down by "
            f"{decl.actor}; its lease(s) ended while it ran and were reaped; A exited 1 "
            f"({err.strip()}); {report.steps} spec steps validated in {report.seconds:.2f}s, "
            f"wall {time.monotonic() - started:.1f}s"
        )
    finally:
        proxy.close()
        if a.poll() is None:
            a.kill()
            a.communicate()
        batch.close()


def test_links_cut_and_restored(
    remora_scratch_database: str, redis_url: str, tmp_path: Path
) -> None:
    """(b) Each worker reaches Redis and PostgreSQL through proxies of its own; mid-run each
    of the four links is cut (every open connection severed, new ones refused) and restored
    0.6 s later.  The workers ride it out: they reconnect and finish the batch."""
    started = time.monotonic()
    batch = Batch(remora_scratch_database, redis_url, tmp_path, CONFIG, n=12, nap=0.4)
    proxies: list[tuple[str, TcpProxy]] = []
    try:
        for w in ("w1", "w2"):
            rp = TcpProxy(("127.0.0.1", int(redis_url.rsplit(":", 1)[1].split("/")[0])))
            pp = TcpProxy(pg_upstream(remora_scratch_database))
            proxies += [(f"{w}-redis", rp), (f"{w}-postgres", pp)]
            batch.worker(
                dsn=via(remora_scratch_database, pp.port),
                redis_url=f"redis://127.0.0.1:{rp.port}/0",
            )
        # Both workers up before any cut: a worker that cannot reach Redis at start exits
        # (exit 1, by design), and one worker alone can finish the first jobs before the
        # other one has even started (it does since jobs are enqueued at submit).
        batch.wait_until(
            "both workers up",
            lambda: sum(w.up for w in batch.durable.snapshot().workers) >= 2,
        )
        for k, (_, proxy) in enumerate(proxies):
            batch.wait_until(
                f"{k + 1} jobs done", lambda k=k: batch.count(Phase.SUCCEEDED) >= k + 1
            )
            proxy.cut()
            time.sleep(0.6)
            proxy.restore()
        batch.finish()
        report, _ = batch.verify()
        counts = {name: (p.cuts, p.severed, p.refused) for name, p in proxies}
        for name, (cuts, severed, _) in counts.items():
            assert cuts == 1 and severed >= 1, (name, counts)  # the cut hit live connections
        print(
            f"\nlinks: (cuts, connections severed, connections refused) {counts}, "
            f"{report.steps} spec steps validated in {report.seconds:.2f}s, "
            f"reaped {report.actions.get('ReapLostAttempt', 0)}, "
            f"wall {time.monotonic() - started:.1f}s"
        )
    finally:
        for _, proxy in proxies:
            proxy.close()
        batch.close()


def test_accept_success_commit_replies_lost(
    remora_scratch_database: str, redis_url: str, tmp_path: Path
) -> None:
    """(d) The workers reach PostgreSQL through a proxy that loses the COMMIT of
    ``AcceptSuccess`` transactions: three replies lost after the server committed, two
    COMMITs lost before it (a batched transaction carries several jobs).  Each is
    resolved by re-reading the durable log for the call — committed: recorded as taken;
    not committed: the outcome stays pending and is processed again — never by a blind
    retry: every job is accepted exactly once."""
    import json

    from remora.jobs.io import StepRecord

    started = time.monotonic()
    batch = Batch(remora_scratch_database, redis_url, tmp_path, CONFIG, n=10, nap=0.3)
    proxy = CommitCutter(pg_upstream(remora_scratch_database), b"AcceptSuccess", rb"\bb-\d+\b")
    proxy.arm("after", "before", "after", "before", "after")
    try:
        batch.worker(dsn=via(remora_scratch_database, proxy.port))
        batch.worker(dsn=via(remora_scratch_database, proxy.port))
        batch.finish()
        report, _ = batch.verify()
        assert len(proxy.cut_jobs) == 5, proxy.cut_jobs
        own: list[StepRecord] = []  # what the processes themselves recorded
        for path in batch.record.glob("*.jsonl"):
            own += [StepRecord(**json.loads(line)) for line in path.read_text().splitlines()]
        accepted = {r.key for r in own if r.action == "AcceptSuccess"}
        for cut, jobs in proxy.cut_jobs:
            # A batched completer carries several acceptances in one transaction.  Lost
            # after the commit: the caller learned each committed by re-reading (it could not
            # have recorded the step otherwise); lost before: each accepted later, once.
            assert jobs, cut
            for job in jobs:
                assert job in accepted, (cut, job)
        print(
            f"\nlost commits: {[(c, sorted(j)) for c, j in proxy.cut_jobs]} all resolved, "
            f"AcceptSuccess {report.actions['AcceptSuccess']} for {len(batch.jobs)} jobs, "
            f"{report.steps} spec steps validated in {report.seconds:.2f}s, "
            f"wall {time.monotonic() - started:.1f}s"
        )
    finally:
        proxy.close()
        batch.close()


def _script_sha(action: str) -> bytes:
    """The SHA a worker's ``EVALSHA`` of a coordination script carries."""
    import hashlib

    from remora.jobs.redis_coordination import PRELUDE, SCRIPTS

    return hashlib.sha1((PRELUDE + SCRIPTS[action]).encode()).hexdigest().encode()


#: The sites of the real-link variant (docs/jobs.md, "Operating workers"): which link, and
#: the bytes of the call to cut at — a durable transition's action (a parameter of its log
#: row), the handler's stage write (from its child process, through the worker), a
#: coordination script's SHA.
SITES = {
    "postgres AuthorizeAttempt (dispatch)": ("postgres", b"AuthorizeAttempt"),
    "postgres stage write (the handler's ctx.advance)": (
        "postgres",
        b"INSERT INTO remora_jobs_stage",
    ),
    "postgres SendOutcome (settlement)": ("postgres", b"SendOutcome"),
    "redis ActivateAttempt (dispatch)": ("redis", b"ActivateAttempt"),
    "redis ReportProgress (the handler's ctx.advance)": ("redis", b"ReportProgress"),
}

#: Longer leases than CONFIG's: a 1.5 s cut is ridden out, not reaped.
RIDE_CONFIG = {**CONFIG, "tick_ms": 100, "lease_ticks": 50, "reservation_ticks": 50}


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_link_cut_at_a_call_site_is_ridden_out(
    site: str, remora_scratch_database: str, redis_url: str, tmp_path: Path
) -> None:
    """Issue 22 item 4, on real services: one worker (process isolation, two slots) reaches
    PostgreSQL and Redis through proxies; at the first call of ``site`` the link is cut —
    every connection severed, new ones refused — and restored 1.5 s later.  The worker says
    once that it waits and once that the store is back, finishes every job exactly once,
    exits 0, and the recorded run validates against the spec."""
    service, marker = SITES[site]
    if service == "redis":
        marker = _script_sha(marker.decode())
    started = time.monotonic()
    batch = Batch(remora_scratch_database, redis_url, tmp_path, RIDE_CONFIG, n=4, nap=0.3)
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    pg: TcpProxy
    rd: TcpProxy
    if service == "postgres":
        pg = cutter = SiteCutter(pg_upstream(remora_scratch_database), marker)
        rd = TcpProxy(("127.0.0.1", redis_port))
    else:
        pg = TcpProxy(pg_upstream(remora_scratch_database))
        rd = cutter = SiteCutter(("127.0.0.1", redis_port), marker)
    try:
        worker = batch.remora(
            via(remora_scratch_database, pg.port),
            f"redis://127.0.0.1:{rd.port}/0",
            "worker", "--app", "tests.jobs.fault_app", "--concurrency", "2", "--until-idle",
            "--poll", "0.02", "--reconcile-every", "0.2", "--log-format", "text",
        )  # fmt: skip
        try:
            _, err = worker.communicate(timeout=120)
        except BaseException:
            worker.kill()
            worker.communicate()
            raise
        assert worker.returncode == 0, err[-3000:]
        report, merged = batch.verify()
        assert cutter.fired_at is not None, f"{site} was never called"
        assert cutter.severed >= 1 or cutter.refused >= 1, "the cut hit no connection"
        # the stores on the cut server: PostgreSQL holds the durable store and the target
        # staging (a success's stage write travels with its fused completion)
        stores = (
            ("the durable store", "the target staging")
            if service == "postgres"
            else ("the coordination store",)
        )
        notices = [line for line in err.splitlines() if line.startswith("remora jobs worker:")]
        waiting = [ln for ln in notices if any(f"waiting for {s}" in ln for s in stores)]
        back = [ln for ln in notices if any(f"{s} is back after" in ln for s in stores)]
        assert len(waiting) == len(back) >= 1, notices
        attempts = sum(1 for r in merged if r.action == "AuthorizeAttempt")
        print(
            f"\ncut at {site}: severed {cutter.severed}, refused {cutter.refused}; "
            f"{notices}; {attempts} attempts for {len(batch.jobs)} jobs, "
            f"{report.steps} spec steps validated in {report.seconds:.2f}s, "
            f"wall {time.monotonic() - started:.1f}s"
        )
    finally:
        pg.close()
        rd.close()
        batch.close()


@pytest.mark.parametrize("service", ["postgres", "redis"])
def test_past_the_outage_budget_the_worker_exits_1_with_one_line(
    service: str, remora_scratch_database: str, redis_url: str, tmp_path: Path
) -> None:
    """The link stays cut: after ``--outage-budget 2`` the worker gives up — exit 1, one line
    naming the store and the budget.  (The outage is counted from the first call that
    fails: a PostgreSQL cut while the handler runs is seen at the next heartbeat.)"""
    batch = Batch(remora_scratch_database, redis_url, tmp_path, RIDE_CONFIG, n=2, nap=30.0)
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    pg = TcpProxy(pg_upstream(remora_scratch_database))
    rd = TcpProxy(("127.0.0.1", redis_port))
    try:
        worker = batch.remora(
            via(remora_scratch_database, pg.port),
            f"redis://127.0.0.1:{rd.port}/0",
            "worker", "--app", "tests.jobs.fault_app", "--until-idle", "--log-format", "none",
            "--outage-budget", "2",
        )  # fmt: skip
        batch.wait_until("a job to run", lambda: batch.count(Phase.RUNNING) >= 1)
        (pg if service == "postgres" else rd).cut()
        cut = time.monotonic()
        _, err = worker.communicate(timeout=60)
        waited = time.monotonic() - cut
        assert worker.returncode == 1, err
        # (the target staging is in the same PostgreSQL database, reached by its own calls)
        stores = ("the durable store", "the target staging")
        if service == "redis":
            stores = ("the coordination store",)
        assert err.count("\n") == 1, err
        assert any(f"{store} stayed unavailable" in err for store in stores), err
        assert "past the outage budget (2 s, --outage-budget)" in err, err
        assert "internal error" not in err and "Traceback" not in err
        print(f"\ngave up {waited:.1f}s after the {service} cut: {err.strip()}")
    finally:
        pg.close()
        rd.close()
        batch.close()


# -- the fault injectors do what they claim (a proxy that forwarded everything would let the
# evidence tests above pass without any fault; these fail on it) ----------------------------


def test_tcp_proxy_cut_severs_and_refuses(redis_url: str) -> None:
    import redis

    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TcpProxy(("127.0.0.1", port))
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=2, retry=None)
    try:
        assert client.ping()
        assert proxy.cut() == 1
        with pytest.raises(redis.ConnectionError):
            client.ping()  # the live connection is gone, and a new one is refused
        proxy.restore()
        assert client.ping()
        assert (proxy.cuts, proxy.severed) == (1, 1) and proxy.refused >= 1
    finally:
        client.close()
        proxy.close()


@pytest.mark.parametrize(("cut", "committed"), [("after", True), ("before", False)])
def test_commit_cutter_loses_a_marked_commit(
    remora_scratch_database: str, cut: str, committed: bool
) -> None:
    import psycopg

    proxy = CommitCutter(pg_upstream(remora_scratch_database), b"AcceptSuccess", rb"\bb-\d+\b")
    try:
        with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (job text, action text)")
        with psycopg.connect(
            via(remora_scratch_database, proxy.port)
        ) as conn:  # an unmarked COMMIT passes
            conn.execute("INSERT INTO t VALUES (%s, %s)", ("b-1", "Submit"))
            conn.commit()
        proxy.arm(cut)
        conn = psycopg.connect(via(remora_scratch_database, proxy.port))
        conn.execute("INSERT INTO t VALUES (%s, %s)", ("b-2", "AcceptSuccess"))
        with pytest.raises(psycopg.OperationalError):
            conn.commit()  # the client never hears the COMMIT's outcome
        conn.close()
        assert proxy.cut_jobs == [(cut, {"b-2"})]
        with psycopg.connect(remora_scratch_database) as conn:
            rows = conn.execute("SELECT job FROM t ORDER BY job").fetchall()
        assert rows == ([("b-1",), ("b-2",)] if committed else [("b-1",)])
    finally:
        proxy.close()


def test_a_store_out_of_reach_in_the_final_pass_does_not_fail_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression (found by :func:`test_links_cut_and_restored` under load: a worker
    exited 1 with ``remora jobs: Unavailable: postgres stage info: … server closed the
    connection``): after its loop, ``remora jobs worker --until-idle`` makes a last
    reconcile pass to clean up what just finished, and a link cut that landed on it
    escaped as the process's failure although every job was done.  The pass is best
    effort now (the next pass of any reconciler does it).  The cut is injected at the
    pass itself, so the test is deterministic; it needs no service (SQLite)."""
    from remora.cli import main
    from remora.errors import Unavailable
    from remora.jobs.reconciler import Reconciler

    db = str(tmp_path / "jobs.db")
    real = Reconciler.reconcile_once
    cut: list[str] = []

    def reconcile_once(self: Reconciler, *args: Any, **kwargs: Any) -> int:
        if self.actor.name.endswith(".final"):
            cut.append(self.actor.name)
            raise Unavailable("postgres stage info: server closed the connection")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Reconciler, "reconcile_once", reconcile_once)
    payload = '{"seconds": 0}'
    assert main(["jobs", "submit", "nap", "--db", db, "--payload", payload]) == 0
    worker = ["jobs", "worker", "--db", db, "--app", "tests.jobs.fault_app", "--until-idle"]
    assert main([*worker, "--poll", "0.01", "--log-format", "none"]) == 0
    assert cut, "the final pass was not reached"
    assert main(["jobs", "status", "--db", db]) == 0
    assert "Succeeded" in capsys.readouterr().out
