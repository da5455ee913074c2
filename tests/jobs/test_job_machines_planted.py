"""Planted bugs the job machines over PostgreSQL + Redis kill (each planted by
monkeypatching inside its test, never through a production flag): the differential (every
step on memory + SQLite and on Redis + PostgreSQL must agree), and the teardown's audit of
the Redis namespace against the durable store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs import redis_coordination as rc
from remora.testing.job_machines import JobScheduleFailure
from tests.jobs.job_machines import CutJobs, LoopJobsAtTheLimit, RaceJobs, SpecSizedJobs
from tests.jobs.job_services import (
    HUNT,
    ServiceBackends,
    hunt_budget,
    killed,
    plant_script,
    services_budget,
    twin_machine,
)

SURVIVAL = settings(HUNT, max_examples=12)
"""The wake-up bug's budget: the count kills it within it (at the 7th example when
measured), and it survives it without the count."""


@pytest.fixture(autouse=True)
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))


def test_a_lua_script_comparing_one_field_fewer_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``Reserve`` without the worker's own slot count (the memory store's ``can_reserve``
    compares it): a worker reserves more jobs than it has slots on Redis only."""
    plant_script(
        monkeypatch,
        "Reserve",
        "if live_count() >= global_limit or mine + executing >= local_limit",
        "if live_count() >= global_limit",
    )
    # the spec forbids the extra reservation: the twin's own refinement check kills it
    assert killed(RaceJobs, services).startswith("ERROR refinement")


def test_a_batched_reserve_that_forgets_the_global_limit_is_killed_at_the_limit(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """The ``ReserveBatch`` script counting each reservation it takes against the
    worker's slots but not against the global limit (stop 45's realistic bug): a batch of
    two takes the last free slot twice.  Only the loop's turns call the batched
    ``Reserve``, and the memory store's batch is other code: the loop machine at the
    global limit over the services kills it within the hunt's 60 examples (not within
    the suite's 10; the plain loop machine over the services needed about 150)."""
    plant_script(monkeypatch, "ReserveBatch", "    live = live + 1\n", "")
    failure = killed(LoopJobsAtTheLimit, services)
    assert failure.startswith(("ERROR refinement", "ERROR differential")), failure


def test_a_renewal_that_ignores_its_holders_down_mark_is_killed_by_the_cut_machine(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``RenewLease`` on Redis without its holder's down mark (a declared incarnation that
    does not know yet keeps its lease alive) — this stop's realistic bug, which survived
    the suite under ``ci`` before the cut machine ran over the services: the cut machine's
    zombie renews after its declaration, and the twin's refinement check refuses it."""
    plant_script(monkeypatch, "RenewLease", " or is_down(worker)", "")
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(
            twin_machine(CutJobs, services), settings=settings(HUNT, max_examples=50)
        )
    failure = info.value.failure
    assert failure.startswith("ERROR refinement: RenewLease("), failure
    assert failure.endswith("(on the twin's stores)"), failure


def test_a_staging_cleanup_that_forgets_the_token_is_killed_at_the_suites_budget(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``PostgresTarget.cleanup`` whose ``UPDATE`` names the job but not the attempt's token:
    cleaning a stopped attempt's staging also marks every other attempt of the job cleaned
    — stop 41's realistic bug.  Only the PostgreSQL target runs that SQL; the race machine
    over the services kills it within the suite's own budget (``services_budget``: 10
    examples under ``ci``), where at 5 it did not."""
    from remora.jobs.postgres import PostgresTarget

    exact = "UPDATE remora_jobs_stage SET data = NULL, cleaned = 1 WHERE job = %s AND token = %s"
    real_write = PostgresTarget._write
    planted: list[str] = []

    class TokenlessCursor:
        """The cursor, with the cleanup's ``UPDATE`` sent without its token (planted)."""

        def __init__(self, cur: Any) -> None:
            self.cur = cur

        def execute(self, sql: str, params: Any = None) -> Any:
            if sql == exact:
                planted.append(params[0])
                return self.cur.execute(sql.removesuffix(" AND token = %s"), params[:1])
            return self.cur.execute(sql, params)

    def _write(self: PostgresTarget, actor: Any, op: Any, key: str, body: Any, *rest: Any) -> Any:
        return real_write(self, actor, op, key, lambda cur: body(TokenlessCursor(cur)), *rest)

    monkeypatch.setattr(PostgresTarget, "_write", _write)
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(
            twin_machine(RaceJobs, services),
            settings=settings(services_budget(), phases=(Phase.explicit, Phase.generate)),
        )
    failure = info.value.failure
    assert failure.startswith(("ERROR refinement", "ERROR differential")), failure
    assert planted, "the planted cleanup never ran"


def test_a_lua_script_that_forgets_a_field_of_the_mirror_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``MarkCancel`` that writes nothing: the cancel mark (the durable mirror, no spec
    variable — alpha does not see it) is missing on Redis only; the differential compares
    the whole coordination snapshot."""
    plant_script(
        monkeypatch,
        "MarkCancel",
        "if not dry then redis.call('SADD', k('cancel'), ARGV[7]) end",
        "",
    )
    assert killed(SpecSizedJobs, services).startswith("ERROR differential")


def test_a_namespace_wipe_that_leaves_a_key_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """A wipe that deletes every key but the live-lease index: the wiped leases still
    count against the global limit on Redis, and the index outlives its leases."""
    monkeypatch.setattr(rc, "KEY_NAMES", tuple(k for k in rc.KEY_NAMES if k != "live"))
    # (the race machine wipes under a running attempt by construction) the wiped lease
    # still counts on Redis only: a reservation the spec enables is refused there (the
    # judgement of refusals, or the differential), or the audit finds the index
    failure = killed(RaceJobs, services)
    assert failure.startswith(
        (
            "ERROR refused: reserve",
            "ERROR differential",
            "ERROR not-quiescent: the live-lease index holds",
        )
    ), failure


def test_a_target_fence_that_writes_nothing_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``PostgresTarget.fence`` inserts no row: a declared incarnation's stage writes go
    in on PostgreSQL only — the fence judgement of the twin sees the declaration without
    its fence."""
    from remora.jobs.postgres import PostgresTarget

    monkeypatch.setattr(PostgresTarget, "fence", lambda self, actor, worker: None)
    failure = killed(SpecSizedJobs, services)
    assert failure.startswith("ERROR fences: ") and "on the twin's stores" in failure, failure


@pytest.mark.nightly
def test_a_live_lease_index_that_counts_expired_leases_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``ExpireLease`` that leaves the attempt in the live-lease index.  Nightly (the
    coordination twin kills it in CI in seconds: ``expiry-keeps-the-live-index``), with
    the nightly hunt's twenty times :data:`~tests.jobs.job_services.HUNT` whatever the
    profile (derandomized unless nightly: killed at 600 examples in 15 s when measured at
    stop 42; not within ``HUNT``'s 60)."""
    plant_script(
        monkeypatch,
        "ExpireLease",
        "redis.call('SREM', k('live'), a)",
        "",
    )
    # Redis's Active read answers the expired lease as live (the read judgement), the stale
    # entry counts against the global limit (the drain's next reservation is refused on
    # Redis only), or the audit finds the index holding an expired lease
    budget = settings(hunt_budget(), max_examples=20 * (HUNT.max_examples or 1))
    failure = killed(SpecSizedJobs, services, budget)
    assert failure.startswith(
        (
            "ERROR coordination-reads: the coordination store's active read",
            "ERROR differential",
            "ERROR not-quiescent: the live-lease index holds",
        )
    ), failure


def test_a_key_the_wipe_does_not_know_is_killed_by_the_audit(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``Enqueue`` pushing its wake-up onto a key outside ``KEY_NAMES`` (so a wipe leaves
    it): no snapshot shows it and no step's result changes — only the teardown's audit of
    the namespace sees it."""
    plant_script(monkeypatch, "Enqueue", "k('wake')", "k('wakeup')")
    failure = killed(SpecSizedJobs, services)
    assert failure.startswith("ERROR not-quiescent: the key {remora-machine:")
    assert failure.endswith(":wakeup is not the store's (on the twin's stores)")


def keep_the_wakeups(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wipe that deletes every key of the namespace but the wake-ups (a hand-kept list
    of keys that misses one): the wake-ups of jobs enqueued before the wipe outlive it."""
    real = rc.RedisCoordination.wipe

    def wipe(self: rc.RedisCoordination, actor: object) -> None:
        saved = self.client.lrange(f"{self.ns}:wake", 0, -1)
        real(self, actor)  # type: ignore[arg-type]
        if saved:
            self.client.rpush(f"{self.ns}:wake", *saved)

    monkeypatch.setattr(rc.RedisCoordination, "wipe", wipe)


def test_a_wipe_that_keeps_the_wakeups_is_killed_by_the_audit(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """No snapshot shows the wake-ups and no step's result depends on them (a stale one
    only wakes an idle worker for nothing): only the audit's count against the
    coordination log sees them."""
    keep_the_wakeups(monkeypatch)
    with pytest.raises(JobScheduleFailure) as info:  # within the budget it survives without
        run_state_machine_as_test(twin_machine(RaceJobs, services), settings=SURVIVAL)
    failure = info.value.failure
    assert failure.startswith("ERROR not-quiescent: the namespace holds "), failure
    assert failure.endswith("Enqueue steps since the wipe (on the twin's stores)"), failure


@pytest.mark.control
def test_the_wakeups_that_survive_a_wipe_survive_without_the_audit(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """The same planted bug, the audit's wake-up count left out: nothing else sees it
    (within the budget that kills it with the count)."""
    keep_the_wakeups(monkeypatch)
    monkeypatch.setattr(ServiceBackends, "audit_wakeups", lambda self: [])
    run_state_machine_as_test(twin_machine(RaceJobs, services), settings=SURVIVAL)
