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

Budget: a twentieth of the profile's examples per machine (``ci``: 10, ``nightly``: 200 — 20x;
:data:`~tests.jobs.job_services.SHARE`);
the cut machine a quarter (:data:`CUT_SHARE`).
Without a reachable server the tests skip with the reason; under
``REMORA_REQUIRE_SERVICES=1`` they fail instead."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.faults import Outcome as IOOutcome
from remora.jobs.io import JobOperation
from remora.jobs.model import Outcome
from remora.sim.jobs.run import JobRun
from remora.sim.jobs.trace import JobConfig, JobFault, JobStep
from remora.testing.job_machines import JobMachineBase
from tests.jobs.job_machines import (
    CutJobs,
    LoopJobs,
    LoopJobsAtTheLimit,
    RaceJobs,
    ReservedJobs,
    SpecSizedJobs,
)
from tests.jobs.job_services import service_backends, services_budget, twin_machine


@pytest.mark.parametrize(
    "base",
    [SpecSizedJobs, ReservedJobs, RaceJobs, LoopJobs, LoopJobsAtTheLimit],
    ids=["spec-sized", "reserved", "race", "loop", "loop-at-the-limit"],
)
def test_job_machine_on_postgres_and_redis(
    base: type[JobMachineBase], remora_scratch_database: str
) -> None:
    with service_backends(remora_scratch_database) as backends:
        run_state_machine_as_test(twin_machine(base, backends), settings=services_budget())
        assert backends.built > 0


CUT_SHARE = 4
"""The cut machine over the services runs a quarter of the profile's examples (``ci``: 50,
about 45 s here; ``nightly``: 1,000), ten times the others' share: its steps are the ones
that write both stores, cut between the writes, and its declared incarnation acts on as a
zombie — what the Redis scripts and the PostgreSQL statements must refuse alike.  Measured
at stop 40 with a Redis renewal that ignores its holder's down mark (that stop's realistic
bug, ``tests/jobs/test_job_machines_planted.py``): the cut machine kills it at about the
45th example and not within 30; the other machines over the services at their budgets, and
the race machine at 60 examples, do not."""


def test_the_cut_machine_on_postgres_and_redis(remora_scratch_database: str) -> None:
    current = settings.default
    assert current is not None
    budget = settings(current, max_examples=max(2, current.max_examples // CUT_SHARE))
    with service_backends(remora_scratch_database) as backends:
        run_state_machine_as_test(twin_machine(CutJobs, backends), settings=budget)
        assert backends.built > 0


def _up_to_reserve(faults: tuple[JobFault, ...] = ()) -> tuple[JobStep, ...]:
    """``w1`` started, ``j1`` submitted and enqueued, then reserved by ``w1`` (the reserve
    under ``faults``)."""
    return (
        JobStep("start", worker="w1"),
        JobStep("submit", job="j1"),
        JobStep("enqueue", job="j1"),
        JobStep("reserve", worker="w1", job="j1", faults=faults),
    )


def test_a_reserve_whose_reply_was_lost_authorizes_on_redis(remora_scratch_database: str) -> None:
    """The finding of the judgement of refusals, on Redis: a ``Reserve`` whose reply was
    lost but which took effect (the stream says so) answered ``"1"`` as its reservation
    id, so the worker's ``AuthorizeAttempt`` was refused although the spec enables it.
    The id is now read back (``remora/jobs/coordination.py``: ``read_back``)."""
    lost = (JobFault(JobOperation.COORD_WRITE, 1, IOOutcome.UNKNOWN_COMMITTED),)
    config = JobConfig(jobs=("j1",), workers=("w1", "w2"), lease_ticks=1, reservation_ticks=1)
    with service_backends(remora_scratch_database) as backends:
        run = JobRun(config, {"j1": (Outcome.SUCCESS,)}, backends=backends)
        for step in _up_to_reserve(lost):
            run.execute(step)
        rid = run.sim.stores.coordination.snapshot().reservations["j1"].rid
        assert run.sim.workers["w1"].reservations["j1"] == rid
        assert run.execute(JobStep("authorize", worker="w1", job="j1")) == "ok"
        run.drain()
        run.judge()


def test_the_judgements_see_a_row_rewritten_behind_them_on_postgres(
    remora_scratch_database: str,
) -> None:
    """The judgements reread PostgreSQL only when its change token moved
    (``durable_changes``: the server's current snapshot): a row rewritten by another
    connection after a clean check must move it, and the rewrite is then a finding.  A
    token that missed the rewrite (a planted bug: one that never changes) leaves the
    tampered log unjudged, and this test fails."""
    import psycopg

    from remora.sim.jobs.judgement import durable_log_problems
    from remora.sim.jobs.refinement import durable_changes

    config = JobConfig(jobs=("j1",), workers=("w1",), lease_ticks=1, reservation_ticks=1)
    with service_backends(remora_scratch_database) as backends:
        run = JobRun(config, {"j1": (Outcome.SUCCESS,)}, backends=backends)
        for step in (*_up_to_reserve(), JobStep("authorize", worker="w1", job="j1")):
            assert run.execute(step) == "ok"
        durable = run.sim.stores.durable
        assert durable_log_problems(run) == []
        token = durable_changes(durable)
        assert isinstance(token, str)
        with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
            conn.execute(
                "UPDATE remora_jobs_log SET action = 'Tampered' "
                "WHERE subject = 'j1' AND version = 2"
            )
        assert durable_changes(durable) != token
        assert any("the durable log holds 'Tampered'" in p for p in durable_log_problems(run))
        # the target's schema is covered by the same token: a stage row written behind
        # the checker's back is in its next view
        before = run.chk.view().target
        with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO remora_jobs_stage (job, token, progress, data) "
                "VALUES ('j1', 1, 1, 'x')"
            )
        after = run.chk.view().target
        assert after != before and after == run.sim.stores.target.snapshot()
