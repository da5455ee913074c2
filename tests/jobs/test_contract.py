"""One contract suite, three kinds of backend: the scenarios of ``scenarios.py`` (every
spec action, each step refinement-checked) run on

* SQLite files + the directory target and vault + memory coordination (the embedded
  default),
* PostgreSQL (durable, target and vault schemas) + Redis (Lua scripts),

with the simulation's logical clock.  PostgreSQL/Redis tests skip without a server, and
fail under ``REMORA_REQUIRE_SERVICES=1``."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from remora.clock import LogicalClock
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import open_sqlite
from remora.jobs.model import JobsConfig
from remora.jobs.stores import Stores
from remora.jobs.target import DirectoryTarget, DirectoryVault
from tests.jobs import down_scenarios as D
from tests.jobs import scenarios as A

SCENARIOS: list[Callable[[], None]] = [
    A.test_success_path,
    A.test_renew_tick_expire_lease_reap_and_retry,
    A.test_expire_reservation_and_reap_of_an_authorized_attempt,
    A.test_wipe_then_rebuild,
    A.test_links_drop_restore_and_crash,
    A.test_cancel_running_job,
    A.test_release_reservation_of_a_cancelled_job,
    A.test_reject_outcome_after_cancel,
    lambda: A.test_failures(A.Outcome.PERMANENT, "AcceptPermanentFailure"),
    lambda: A.test_failures(A.Outcome.RETRYABLE, "AcceptRetryableFailureWithBudget"),
    A.test_retry_resumes_from_checkpoint_then_exhausts,
    A.test_invalidate_checkpoint_of_a_zombie_owner,
    A.test_credential_write_and_cleanup,
    A.test_submit_enqueues,
    A.test_reserve_batch_reserves_in_order_each_its_own_step,
    A.test_reserve_batch_stops_at_the_global_limit,
    A.test_reserve_batch_stops_at_the_workers_own_limit,
    A.test_reserve_batch_stops_at_the_calls_limit,
    A.test_incremental_pass_takes_a_lost_attempt_back_to_the_queue,
    A.test_incremental_pass_rebuilds_after_a_wipe,
    A.test_incremental_pass_cleans_a_job_that_finished_between_passes,
    A.test_narrow_reads_agree_with_the_snapshot,
    A.test_an_enqueue_wakes_an_idle_worker,
    D.test_a_killed_incarnation_is_declared_down_after_its_heartbeat_expired,
    D.test_a_live_incarnation_declared_down_is_fenced_everywhere,
    D.test_a_killed_owners_checkpoint_is_resumed_not_invalidated,
    D.test_a_wipe_does_not_let_a_declared_down_incarnation_reserve,
]
NAMES = [getattr(f, "__name__", "failures") for f in SCENARIOS]
NAMES[8], NAMES[9] = "failure-permanent", "failure-retryable"


def sqlite_backends(tmp: Path) -> Callable[[LogicalClock, JobsConfig], Stores]:
    def build(clock: LogicalClock, config: JobsConfig) -> Stores:
        n = secrets.token_hex(4)
        return Stores(
            durable=open_sqlite(tmp / f"jobs-{n}.sqlite3"),
            coordination=MemoryCoordination(clock, config),
            target=DirectoryTarget(tmp / f"stage-{n}"),
            vault=DirectoryVault(tmp / f"vault-{n}"),
            clock=clock,
            config=config,
        )

    return build


@pytest.fixture
def use_backends() -> Iterator[Callable[[Any], None]]:
    def use(factory: Any) -> None:
        A.BACKENDS = factory

    yield use
    A.BACKENDS = None


@pytest.mark.parametrize("scenario", range(len(SCENARIOS)), ids=NAMES)
def test_contract_sqlite(scenario: int, tmp_path: Path, use_backends: Any) -> None:
    use_backends(sqlite_backends(tmp_path))
    SCENARIOS[scenario]()


@pytest.fixture
def pg_redis(
    remora_scratch_database: str,
) -> Iterator[Callable[[LogicalClock, JobsConfig], Stores]]:
    """Builds stores on PostgreSQL (durable, target, vault) + Redis (a fresh namespace);
    everything it opened is closed and the namespace deleted afterwards."""
    from remora.jobs.durable import open_postgres
    from remora.jobs.postgres import PostgresTarget, PostgresVault
    from remora.jobs.redis_coordination import RedisCoordination, namespace_keys
    from tests.common.services import require_redis

    url = require_redis()
    opened: list[Stores] = []

    def build(clock: LogicalClock, config: JobsConfig) -> Stores:
        stores = Stores(
            durable=open_postgres(remora_scratch_database, injected_clock=True),
            coordination=RedisCoordination(
                url, config, namespace=f"remora-test:{secrets.token_hex(6)}", clock=clock
            ),
            target=PostgresTarget(remora_scratch_database),
            vault=PostgresVault(remora_scratch_database),
            clock=clock,
            config=config,
        )
        opened.append(stores)
        return stores

    yield build
    for stores in opened:
        coord = stores.coordination
        coord.client.delete(*namespace_keys(coord.client, coord.ns))  # type: ignore[attr-defined]
        stores.close()


@pytest.mark.services
@pytest.mark.parametrize("scenario", range(len(SCENARIOS)), ids=NAMES)
def test_contract_postgres_redis(scenario: int, pg_redis: Any, use_backends: Any) -> None:
    use_backends(pg_redis)
    SCENARIOS[scenario]()


def _down_step(script: str) -> Any:
    """A schedule ending in the declared-down w1's ``script`` step; its result."""
    if script == "RenewLease":
        run = A.Run()
        a = D.cut_off(run)
        run.ok(run.sim.tick)
        return run(lambda: run.w1.renew(a))
    if script == "ReportProgress":
        run = A.Run()
        a = run.running()
        run.ok(lambda: run.w1.advance(a, 1, b"half"))  # a hint to publish, later
        run.ok(lambda: run.sim.start("w2"))
        run.ok(lambda: run.sim.drop_link("w1", A.Service.DURABLE))
        D.expire(run, renew=a)
        assert run.ok(lambda: run.r.declare_down("w1"))
        return run(lambda: run.w1.report_progress(a))
    if script == "ActivateAttempt":
        run = A.Run(jobs_config=D.attrs.evolve(D.SMALL, reservation_ticks=10))
        run.ok(lambda: run.sim.start("w1"))
        run.ok(lambda: run.sim.start("w2"))
        run.ok(lambda: run.sim.submit("j1"))
        run.ok(lambda: run.r.enqueue("j1"))
        run.ok(lambda: run.w1.reserve("j1"))
        a = run.ok(lambda: run.w1.authorize("j1"))
        run.ok(lambda: run.sim.drop_link("w1", A.Service.DURABLE))
        D.expire(run)
        assert run.ok(lambda: run.r.declare_down("w1"))
        return run(lambda: run.w1.activate(a))
    run = A.Run(concurrency=2, jobs_config=D.attrs.evolve(D.SMALL, global_limit=3))
    D.cut_off(run)
    run.ok(lambda: run.sim.submit("j2"))
    run.ok(lambda: run.r.enqueue("j2"))
    return run(lambda: run.w1.reserve("j2"))


@pytest.mark.services
@pytest.mark.parametrize("script", ["RenewLease", "Reserve", "ActivateAttempt", "ReportProgress"])
def test_redis_down_mark_planted(
    script: str,
    remora_scratch_database: str,
    pg_redis: Any,
    use_backends: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Lua scripts refuse the declared-down incarnation's step; planted: the script
    without its down-mark check (``is_down(...) or`` removed) lets it through, and the
    refinement checker reports it."""
    import re

    from remora.jobs import redis_coordination as R

    use_backends(pg_redis)
    refused = _down_step(script)
    assert refused in (False, None) or isinstance(refused, A.NotEnabled), refused
    body = R.SCRIPTS[script]
    planted = re.sub(r"is_down\((worker|split\(l\)\[1\])\) or ", "", body)
    planted = planted.replace("if is_down(worker) or ", "if ")
    assert planted != body, f"{script}: no down-mark check to remove"
    monkeypatch.setitem(R.SCRIPTS, script, planted)
    import psycopg

    with psycopg.connect(remora_scratch_database, autocommit=True) as conn:  # a fresh durable store
        conn.execute(
            "TRUNCATE remora_jobs_job, remora_jobs_attempt, remora_jobs_worker, "
            "remora_jobs_credential, remora_jobs_log, remora_jobs_stage, "
            "remora_jobs_vault, remora_jobs_stage_fence, remora_jobs_stage_fences"
        )
    with pytest.raises(D.RefinementViolation, match=script.replace("Attempt", "")):
        _down_step(script)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[str]:
    """A redis-server of our own (unix socket, no persistence): FLUSHALL wipes only it."""
    import shutil
    import subprocess
    import time

    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        from tests.common.services import unavailable

        unavailable("redis-server", "the binary is not installed")
    sock = tmp_path / "redis.sock"
    proc = subprocess.Popen(
        [
            str(binary),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
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
    url = f"unix://{sock}"
    try:
        for _ in range(200):
            try:
                redis.Redis.from_url(url).ping()
                break
            except (redis.RedisError, OSError):
                time.sleep(0.02)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.services
def test_wipe_is_a_real_flushall(private_redis: str, tmp_path: Path, use_backends: Any) -> None:
    """``LoseCoordinationState`` as ``FLUSHALL`` on a server of our own; the run stays a
    refinement of the spec and the reconciler rebuilds the queue from the durable store."""
    import redis

    from remora.jobs.redis_coordination import RedisCoordination

    def build(clock: LogicalClock, config: JobsConfig) -> Stores:
        base = sqlite_backends(tmp_path)(clock, config)
        base.coordination = RedisCoordination(private_redis, config, clock=clock, flush_all=True)
        return base

    use_backends(build)
    client = redis.Redis.from_url(private_redis)
    client.set("unrelated", "gone after FLUSHALL")
    A.test_wipe_then_rebuild()
    assert client.get("unrelated") is None


@pytest.mark.services
def test_the_scripts_survive_a_script_flush(private_redis: str) -> None:
    """The coordination scripts are called by their SHA (``EVALSHA``); a ``SCRIPT FLUSH``
    or a restart of Redis drops them (``FLUSHALL`` does not), and the next call must load
    its script again rather than fail with ``NOSCRIPT`` — for a write and a read alike."""
    import redis

    from remora.context import Context
    from remora.jobs.io import Actor
    from remora.jobs.redis_coordination import RedisCoordination

    clock = LogicalClock()
    coord = RedisCoordination(private_redis, JobsConfig(), clock=clock)
    actor = Actor("t", Context(clock))
    client = redis.Redis.from_url(private_redis)
    try:
        coord.publish_down(actor, [])  # Enqueue waits for the down marks (docs/jobs.md)
        assert coord.enqueue(actor, "j1")
        assert coord.candidates(actor, 5) == ["j1"]
        client.script_flush()
        assert client.script_exists(*(s.sha for s in coord._scripts.values())) == [False] * len(
            coord._scripts
        )
        assert coord.enqueue(actor, "j2")
        assert sorted(coord.candidates(actor, 5)) == ["j1", "j2"]
    finally:
        client.close()
        coord.close()


@pytest.mark.services
@pytest.mark.parametrize("seed", range(3))
def test_random_walk_on_postgres_and_redis(seed: int, pg_redis: Any) -> None:
    """Seeded random schedules (faults, unknown results) on PostgreSQL + Redis, every step
    refinement-checked: the Lua scripts agree with the memory store's guards."""
    from tests.jobs.walk import drain, walk

    drain(walk(seed, steps=120, backends=pg_redis), rounds=20)


@pytest.mark.services
def test_reservation_ids_are_unique_across_wipes() -> None:
    """``ActivateAttempt`` compares the reservation id: a wipe must not make an old id
    valid again for a later reservation of the same worker."""
    from remora.context import Context
    from remora.jobs.io import Actor
    from remora.jobs.redis_coordination import RedisCoordination, namespace_keys
    from tests.common.services import require_redis

    clock = LogicalClock()
    coord = RedisCoordination(
        require_redis(),
        JobsConfig(),
        namespace=f"remora-test:{secrets.token_hex(6)}",
        clock=clock,
    )
    actor = Actor("w1", Context(clock))
    try:
        assert not coord.enqueue(actor, "j1")  # a fresh namespace: no down marks yet
        coord.publish_down(actor, [])
        assert coord.enqueue(actor, "j1")
        first = coord.reserve(actor, "j1", "w1", 0, 4)
        coord.wipe(actor)
        assert not coord.enqueue(actor, "j1")  # the wipe forgot the marks
        coord.publish_down(actor, [])
        assert coord.enqueue(actor, "j1")
        second = coord.reserve(actor, "j1", "w1", 0, 4)
        assert first and second and first != second
    finally:
        coord.client.delete(*namespace_keys(coord.client, coord.ns))
        coord.close()


@pytest.mark.services
def test_redis_reserve_batch_global_limit_planted(
    pg_redis: Any, use_backends: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batched reservation's Lua script checks the global limit for every job it
    reserves; planted: once it has reserved one, the later jobs skip the check — the
    refinement checker reports the ``Reserve`` beyond the limit."""
    from remora.jobs import redis_coordination as R

    use_backends(pg_redis)
    body = R.SCRIPTS["ReserveBatch"]
    planted = body.replace(
        "and live < global_limit and", "and (live < global_limit or #out > 0) and"
    )
    assert planted != body, "no global-limit check to remove"
    monkeypatch.setitem(R.SCRIPTS, "ReserveBatch", planted)
    with pytest.raises(D.RefinementViolation, match="Reserve"):
        A.test_reserve_batch_stops_at_the_global_limit()
