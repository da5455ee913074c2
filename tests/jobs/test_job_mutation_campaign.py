"""Every named mutation of the job runtime's guards is killed by the job machines under the
ci profile (without shrinking here, to bound CI time; ``python -m tests.stateful.
job_campaign`` runs it with shrinking and prints the table), and the exported trace names
the mutation, so a plain ``remora sim-jobs --replay`` fails the same way.

All sixteen are required: the race machine (``RaceJobs``, hunting first) composes each
dangerous combination in one rule step, so a kill does not hang on the derandomized
search's luck — which is why the same budget must also kill every one from a second,
arbitrary seed (``SEEDS``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import main
from remora.sim.jobs.mutations import MUTATIONS, JobMutation
from tests.jobs.job_campaign import hunt
from tests.jobs.job_machines import HUNTERS

ISSUE_EXAMPLES = {
    "accept-success-without-token-compare",
    "activate-without-authority-check",
    "reap-before-lease-expiry",
    "renew-after-losing-authority",
    "keep-reservation-after-wipe",
    "clean-winners-staging",
}


def test_catalogue_covers_the_issue_examples() -> None:
    names = {m.name for m in MUTATIONS}
    assert names >= ISSUE_EXAMPLES
    assert len(names) >= 15


SEEDS = (None, 20261130)
"""The ci profile's derandomized search, and the same budget from one other seed."""


@pytest.mark.parametrize("at_seed", SEEDS, ids=lambda s: "ci" if s is None else f"seed{s}")
@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_job_mutation_is_killed(
    mutation: JobMutation,
    at_seed: int | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcomes = []
    for machine in HUNTERS:
        outcome = hunt(mutation, machine, shrink=False, artifacts=tmp_path, at_seed=at_seed)
        outcomes.append(outcome)
        if outcome.killed:
            assert outcome.failure.startswith("ERROR ")
            assert outcome.trace is not None
            capsys.readouterr()
            assert main(["sim-jobs", "--replay", outcome.trace]) == 1
            assert json.loads(capsys.readouterr().out)["failure"] == outcome.failure
            return
    pytest.fail(f"{mutation.name} survived: {outcomes}")
