"""Every named guard mutation is killed by the stateful suite under the ci profile (without
shrinking here, to bound CI time; ``tox -e campaign`` runs the full campaign with shrinking
and prints the table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import main
from remora.sim.mutations import MUTATIONS, Mutation
from tests.stateful.campaign import hunt
from tests.stateful.machines import MACHINES


def test_catalogue_covers_the_issue_examples() -> None:
    names = {m.name for m in MUTATIONS}
    assert {
        "skip-fence-check",
        "frontier-before-resolution",
        "retry-unknown-without-reobserve",
        "stopped-lifetime-seeks",
        "skip-cancel-check-after-wakeup",
        "revoke-keeps-assignment",
        "adopt-epoch-after-failed-claim",
    } <= names


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_mutation_is_killed(
    mutation: Mutation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes = []
    for machine in MACHINES:
        outcome = hunt(mutation, machine, shrink=False, artifacts=tmp_path)
        outcomes.append(outcome)
        if outcome.killed:
            assert outcome.failure.startswith("ERROR ")
            # The exported trace names the mutation: a plain replay runs the same bug.
            assert outcome.trace is not None
            assert main(["sim-worker", "--replay", outcome.trace]) == 1
            assert json.loads(capsys.readouterr().out)["failure"] == outcome.failure
            return
    pytest.fail(f"{mutation.name} survived: {outcomes}")
