"""The coordination store's narrow reads agree with its whole state after every step (the
``coordination-reads`` judgement, :func:`~remora.sim.jobs.judgement.coordination_read_problems`):
``view`` of each job with ``narrow`` of the snapshot, ``active`` with ``active_part``.  The
guards decide on those reads, and Redis answers each with its own script, so a script that
reads one field wrong misleads them while the snapshots the other judgements compare stay
right.  Planted: the memory store's ``view`` that answers a job's cancel mark from its
notice (killed by the machines in memory; survives without the judgement), and the same
copy-paste slip in Redis's ``View`` script (killed by the machine over PostgreSQL + Redis)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs.coordination import MemoryCoordination
from remora.jobs.io import Actor
from remora.jobs.model import AttemptId, CoordSnapshot
from remora.sim.jobs.judgement import JUDGEMENTS
from remora.testing.job_machines import JobScheduleFailure
from tests.jobs.job_machines import LargerJobs
from tests.jobs.job_services import HUNT, ServiceBackends, killed, plant_script


@pytest.fixture(autouse=True)
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))


def _cancel_from_notice(
    self: MemoryCoordination, actor: Actor | None, job: str, attempts: Iterable[AttemptId] = ()
) -> CoordSnapshot:
    got = _REAL_VIEW(self, actor, job, attempts)
    return attrs.evolve(got, cancels=frozenset({job} & got.notices))  # the bug


_REAL_VIEW = MemoryCoordination.view


def _hunt(machine: type[LargerJobs]) -> str:
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(machine, settings=settings(HUNT, max_examples=200))
    return info.value.failure


def test_a_view_that_reads_the_cancel_mark_from_the_notice_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(MemoryCoordination, "view", _cancel_from_notice)
    machine = type("PlantedViewReads", (LargerJobs,), {})
    assert _hunt(machine).startswith("ERROR coordination-reads: the coordination store's view")


@pytest.mark.control
def test_the_same_view_survives_without_the_reads_judgement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No other judgement sees it: the guards that read the cancel mark through ``view``
    decide the same here, and the snapshots compared elsewhere are right."""
    monkeypatch.setattr(MemoryCoordination, "view", _cancel_from_notice)
    machine = type(
        "PlantedViewUnjudged",
        (LargerJobs,),
        {"judging": JUDGEMENTS - {"coordination-reads"}},
    )
    run_state_machine_as_test(machine, settings=settings(HUNT, max_examples=200))


@pytest.mark.services
def test_a_redis_view_script_that_reads_the_cancel_mark_from_the_notice_is_killed(
    monkeypatch: pytest.MonkeyPatch, services: ServiceBackends
) -> None:
    plant_script(
        monkeypatch,
        "View",
        "redis.call('SISMEMBER', k('cancel'), job)",
        "redis.call('SISMEMBER', k('notice'), job)",
    )
    assert killed(LargerJobs, services).startswith("ERROR coordination-reads")
