"""Faults between the stores over PostgreSQL + Redis (``test_between_stores.py`` on the
services): the keyed down marks in Redis's Lua scripts, each cut of ``CrashWorker``'s
cross-store step ending consistent, and every multi-statement durable step all or
nothing on PostgreSQL.  Skipped without the servers; failing under
``REMORA_REQUIRE_SERVICES=1``."""

from __future__ import annotations

import secrets

import pytest

from remora.jobs.model import JobsConfig
from remora.jobs.redis_coordination import RedisCoordination
from remora.sim.jobs.trace import JobFault
from tests.common.services import require_redis
from tests.jobs.job_services import service_backends
from tests.jobs.test_between_stores import (
    DURABLE_FAILS,
    KILLED_AFTER_COMMIT,
    KILLED_AFTER_MARK,
    marks_contract,
    run_cut,
    statement_kills,
)


def test_redis_marks_are_keyed_by_declarer() -> None:
    url = require_redis()
    made: list[RedisCoordination] = []

    def make() -> RedisCoordination:
        coord = RedisCoordination(
            url, JobsConfig(), namespace=f"remora-test:{secrets.token_hex(6)}"
        )
        made.append(coord)
        return coord

    try:
        marks_contract(make)
    finally:
        for coord in made:
            for key in coord.client.scan_iter(f"{coord.ns}:*"):
                coord.client.delete(key)
            coord.close()


@pytest.mark.parametrize("cut", [DURABLE_FAILS, KILLED_AFTER_MARK, KILLED_AFTER_COMMIT])
def test_a_declaration_cut_on_the_services_leaves_them_agreeing(
    cut: JobFault, remora_scratch_database: str
) -> None:
    with service_backends(remora_scratch_database) as backends:
        run = run_cut(cut, None, backends)
        assert run.kills == (["reconciler"] if cut.kill else [])


def test_a_kill_between_statements_on_postgres_leaves_nothing(
    remora_scratch_database: str,
) -> None:
    with service_backends(remora_scratch_database) as backends:
        kills = statement_kills(backends)
    assert kills.multi >= 15, kills.points
