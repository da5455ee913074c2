"""The worker machines' last escapes (issue 21, item 8), each shown killed by the worker
machines alone within the ``ci`` budget (no shrinking, as in the mutation campaign).

Each planted bug (:mod:`tests.common.planted`) belongs to a class of realistic bugs the
machines once missed; the property or generation that reaches the class is named beside it:

* a lifetime that gives up a partition it still owns — the ``spurious-fence`` postcondition
  (:mod:`remora.sim.rules`), judged from the store's own row;
* a budget that does not include the wait for the lifetime's mutex — the ``contended``
  rule and the ``budget`` postconditions, on the simulation's clock;
* subject state shared between partitions — source histories that use one subject name on
  several partitions (:func:`remora.testing.strategies.source_histories`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from remora.sim.mutations import Mutation
from tests.common import planted
from tests.stateful.campaign import hunt
from tests.stateful.machines import MACHINES

ESCAPES = (
    Mutation(
        "fences-when-nothing-happened",
        "a healthy owner keeps its partition after an unknown result that did not commit",
        planted.FencesWhenNothingHappened,
    ),
)


@pytest.mark.parametrize("escape", ESCAPES, ids=lambda m: m.name)
def test_escape_is_killed_by_the_worker_machines(escape: Mutation, tmp_path: Path) -> None:
    outcomes = []
    for machine in MACHINES:
        outcome = hunt(escape, machine, shrink=False, artifacts=tmp_path)
        outcomes.append(outcome)
        if outcome.killed:
            assert outcome.failure.startswith("ERROR "), outcome
            return
    pytest.fail(f"{escape.name} survived the worker machines: {outcomes}")
