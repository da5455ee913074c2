"""Planted bugs the job machines over PostgreSQL + Redis kill (each planted by
monkeypatching inside its test, never through a production flag): the differential (every
step on memory + SQLite and on Redis + PostgreSQL must agree), and the teardown's audit of
the Redis namespace against the durable store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from remora.jobs import redis_coordination as rc
from tests.jobs.job_machines import RaceJobs, SpecSizedJobs
from tests.jobs.job_services import ServiceBackends, killed, plant_script, service_backends


@pytest.fixture(autouse=True)
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))


@pytest.fixture
def services(remora_scratch_database: str) -> Iterator[ServiceBackends]:
    """The stores over PostgreSQL (the plugin's scratch database) and Redis."""
    with service_backends(remora_scratch_database) as backends:
        yield backends


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
    assert killed(RaceJobs, services).startswith("ERROR not-quiescent: the live-lease index holds")


def test_a_live_lease_index_that_counts_expired_leases_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """``ExpireLease`` that leaves the attempt in the live-lease index."""
    plant_script(
        monkeypatch,
        "ExpireLease",
        "redis.call('SREM', k('live'), a)",
        "",
    )
    # the stale entry counts against the global limit: the drain's next reservation is
    # refused on Redis only
    assert killed(SpecSizedJobs, services).startswith("ERROR differential")


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
