"""The job machines over PostgreSQL + Redis, each step run on both configurations.

Every machine here is a suite job machine (``tests/jobs/job_machines.py``) with a twin
run (:attr:`~remora.testing.job_machines.JobMachineBase.twin_backends`): the same steps, in
the same order, with the same fault selectors, on memory coordination + SQLite
``:memory:`` (the run the rules read) and on Redis (Lua scripts, a private namespace per
example) + PostgreSQL (durable, target and vault schemas; a scratch database per test,
emptied per example), both on a logical clock.  After every step — the fair drain's too —
the two runs must agree (:meth:`~remora.testing.job_machines.JobMachineBase.differential`):
the same result kind, the same spec state under alpha, the same coordination snapshot
(mirror included), durable rows, staging and vault; each run is refinement-checked on its
own; after the drain both must be quiescent and the Redis namespace must hold nothing the
durable store does not imply (:meth:`~tests.jobs.job_services.ServiceBackends.audit`).

Budget: a fortieth of the profile's examples per machine (``ci``: 5, ``nightly``: 100 — 20x).
Without a reachable server the tests skip with the reason; under
``REMORA_REQUIRE_SERVICES=1`` they fail instead."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from remora.testing.job_machines import JobMachineBase
from tests.jobs.job_machines import RaceJobs, SpecSizedJobs
from tests.jobs.job_services import service_backends, services_budget, twin_machine


@pytest.mark.parametrize("base", [SpecSizedJobs, RaceJobs], ids=["spec-sized", "race"])
def test_job_machine_on_postgres_and_redis(
    base: type[JobMachineBase], remora_scratch_database: str
) -> None:
    with service_backends(remora_scratch_database) as backends:
        run_state_machine_as_test(twin_machine(base, backends), settings=services_budget())
        assert backends.built > 0
