"""Queues and priorities on Redis (each queue's ranking a sorted set kept by the Lua
scripts) agree with the memory store: the same enqueues give the same order, and the job
machines over PostgreSQL + Redis compare every queue's order after every step (the
``ranks`` of :meth:`JobRun.observable`) and audit the rankings against ``queued`` after the
drain.  Planted in the scripts (monkeypatched inside each test): ``Reserve`` that leaves the
job in its queue's ranking, ``Enqueue`` that ranks by submission order only."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.jobs import redis_coordination as rc
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.io import Actor
from remora.jobs.model import JobsConfig
from tests.common.services import require_redis
from tests.jobs.job_machines import LargerJobs, SpecSizedJobs
from tests.jobs.job_services import ServiceBackends, killed, plant_script

pytestmark = pytest.mark.services

ENQUEUES = (
    ("a", "default", 0, 1),
    ("b", "default", 5, 2),
    ("c", "bulk", 9, 3),
    ("d", "default", 5, 4),
    ("e", "default", -2, 5),
)


def orders(coord: Any, actor: Actor) -> dict[str, list[str]]:
    for job, queue, priority, order in ENQUEUES:
        assert coord.enqueue(actor, job, queue=queue, priority=priority, order=order)
    out = {
        "default": coord.candidates(actor, 8, queues=("default",)),
        "bulk": coord.candidates(actor, 8, queues=("bulk",)),
        "all": coord.candidates(actor, 8),
        "two of both": coord.candidates(actor, 2, queues=("default", "bulk")),
        "accepted": coord.candidates(actor, 2, lambda j: j != "b", ("default",)),
    }
    assert coord.reserve(actor, "b", "w1", 0, 4)
    assert coord.clean_terminal(actor, "d")
    out["after"] = coord.candidates(actor, 8)
    return out


def test_redis_ranks_a_queue_as_the_memory_store_does() -> None:
    clock = LogicalClock()
    actor = Actor("t", Context(clock))
    memory = orders(MemoryCoordination(clock, JobsConfig()), actor)
    assert memory["default"] == ["b", "d", "a", "e"] and memory["after"] == ["c", "a", "e"]
    redis_store = rc.RedisCoordination(
        require_redis(),
        JobsConfig(),
        namespace=f"remora-test:{secrets.token_hex(6)}",
        clock=clock,
    )
    try:
        redis_store.publish_down(actor, [])
        assert orders(redis_store, actor) == memory
        ns = redis_store.ns
        assert sorted(k.decode() for k in redis_store.client.keys(f"{ns}:*")) == sorted(
            k for k in rc.namespace_keys(redis_store.client, ns) if redis_store.client.exists(k)
        )
        redis_store.wipe(actor)  # the rankings go with the namespace
        assert not redis_store.client.exists(f"{ns}:{rc.QUEUE_KEY_PREFIX}default")
    finally:
        redis_store.client.delete(*rc.namespace_keys(redis_store.client, redis_store.ns))
        redis_store.close()


@pytest.mark.nightly
def test_planted_a_reserve_that_leaves_its_job_ranked_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    """Nightly (the coordination twin kills this script bug in CI in seconds:
    ``tests/jobs/test_coordination_twin.py``, ``reserve-leaves-the-job-ranked``)."""
    plant_script(monkeypatch, rc.Action.RESERVE, "unrank(job)\n", "")
    assert killed(SpecSizedJobs, services).startswith("ERROR differential")


def test_planted_an_enqueue_that_ignores_the_priority_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    plant_script(
        monkeypatch,
        rc.Action.ENQUEUE,
        "redis.call('ZADD', k('q:' .. queue), ARGV[9], job)",
        "redis.call('ZADD', k('q:' .. queue), tonumber(ARGV[9]) % 4294967296, job)",
    )
    assert killed(LargerJobs, services).startswith("ERROR differential")


def test_a_workers_job_behind_many_others_is_found() -> None:
    """A worker accepting only ``mine``, ranked behind 200 jobs of other handlers: the
    window grows (64 jobs, then 512) until it is found — on Redis as in memory."""
    clock = LogicalClock()
    actor = Actor("t", Context(clock))
    redis_store = rc.RedisCoordination(
        require_redis(),
        JobsConfig(),
        namespace=f"remora-test:{secrets.token_hex(6)}",
        clock=clock,
    )
    memory = MemoryCoordination(clock, JobsConfig())
    try:
        redis_store.publish_down(actor, [])
        for coord in (memory, redis_store):
            for i in range(200):
                assert coord.enqueue(actor, f"other-{i:03d}", priority=1, order=i)
            assert coord.enqueue(actor, "mine", order=500)
            found = coord.candidates(actor, 8, lambda j: j == "mine", ("default",))
            assert found == ["mine"], type(coord).__name__
    finally:
        redis_store.client.delete(*rc.namespace_keys(redis_store.client, redis_store.ns))
        redis_store.close()
