"""The reservation machine's own search kills planted bugs in a reservation's release
(issue 21): a worker, or a reconciler, that releases a reservation whose job is neither
cancelling nor terminal — the phase check dropped, as a developer might when "releasing is
always safe" — given through :class:`~remora.sim.jobs.simulation.Parts` to a subclass of
the suite's :class:`~tests.jobs.job_machines.ReservedJobs`, is killed by
``run_state_machine_as_test`` within :data:`RESERVED_HUNT`.  The search is not tuned to
them: its rule follows every fresh reservation with each next step in turn, its job
cancelled first or not.

Each survives the spec-sized machine's general rules at the same budget (the control):
there a reservation seldom lives to a next step."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs.reconciler import Reconciler
from remora.jobs.worker import Worker
from remora.sim.jobs.simulation import Parts
from remora.testing.job_machines import JobMachineBase, JobScheduleFailure
from tests.jobs.job_machines import ReservedJobs, SpecSizedJobs
from tests.jobs.job_services import HUNT

RESERVED_HUNT = settings(HUNT, max_examples=30)
"""30 derandomized examples, stopping at the first failure."""


class WorkerReleasesAnyReservation(Worker):
    """The worker's own ``ReleaseReservation`` without its phase check: it lets go of the
    reservation of a job still queued (the spec enables it only once the job is cancelling
    or terminal)."""

    def release_reservation(self, job: str) -> bool:
        self._need_up()
        rid = self.reservations.get(job)
        if rid is None:
            return False
        done = self.stores.coordination.release_reservation(self.actor, job, rid)
        if done:
            self.reservations.pop(job, None)
        return done


class ReconcilerReleasesAnyReservation(Reconciler):
    """The reconciler's ``ReleaseReservation`` without its phase check."""

    def release_reservation(self, job: str) -> bool:
        return self.stores.coordination.release_reservation(self.actor, job, None)


PLANTED = {
    "worker": Parts(worker=WorkerReleasesAnyReservation),
    "reconciler": Parts(reconciler=ReconcilerReleasesAnyReservation),
}


@pytest.fixture(autouse=True)
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))


def planted(base: type[JobMachineBase], parts: Parts) -> type[JobMachineBase]:
    """``base`` built from ``parts`` (a class of its own: its own reach)."""
    return type(f"{base.__name__}Planted", (base,), {"parts": parts})


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_release_without_its_phase_check_is_killed_by_the_reservation_machine(
    bug: str,
) -> None:
    machine = planted(ReservedJobs, PLANTED[bug])
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(machine, settings=RESERVED_HUNT)
    # a release the spec does not enable, taken: the refinement check's finding
    failure = info.value.failure
    assert failure.startswith("ERROR refinement: ReleaseReservation("), failure
    assert "is not enabled in alpha(before)" in failure, failure


@pytest.mark.control
@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_release_without_its_phase_check_survives_the_general_rules(bug: str) -> None:
    run_state_machine_as_test(planted(SpecSizedJobs, PLANTED[bug]), settings=RESERVED_HUNT)
