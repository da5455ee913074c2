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

import json
from pathlib import Path

import attrs
import pytest

from remora.sim.mutations import Mutation
from remora.sim.report import replay
from remora.sim.scheduler import StoreFactory
from remora.sim.trace import Step, TraceError, loads
from remora.testing.machines import WorkerScheduleMachine
from tests.common import planted
from tests.stateful.campaign import hunt
from tests.stateful.machines import MACHINES, ManyPartitionsOnSqlite


@attrs.frozen
class Escape:
    mutation: Mutation
    machines: tuple[type[WorkerScheduleMachine], ...] = MACHINES  # hunted in this order
    store: StoreFactory | None = None  # a planted store, in place of the machine's own


ESCAPES = (
    Escape(
        Mutation(
            "fences-when-nothing-happened",
            "a healthy owner keeps its partition after an unknown result that did not commit",
            planted.FencesWhenNothingHappened,
        )
    ),
    Escape(
        Mutation(
            "budget-after-mutex",
            "the operation budget includes the wait for the lifetime's mutex",
            planted.BudgetAfterMutex,
        )
    ),
    Escape(
        Mutation(
            "claims-before-validating",
            "an assignment validates the source before it claims",
            planted.ClaimsBeforeValidating,
        )
    ),
    Escape(
        Mutation("subjects-by-name-sqlite", "subject state is read per partition"),
        (ManyPartitionsOnSqlite,),  # the bug is in SQLite's SQL: the SQLite machine's to find
        planted.subjects_by_name_sqlite,
    ),
)


@pytest.mark.parametrize("escape", ESCAPES, ids=lambda e: e.mutation.name)
def test_escape_is_killed_by_the_worker_machines(escape: Escape, tmp_path: Path) -> None:
    outcomes = []
    for machine in escape.machines:
        if escape.store is not None:
            machine = type(machine.__name__, (machine,), {"store_factory": escape.store})
        outcome = hunt(escape.mutation, machine, shrink=False, artifacts=tmp_path)
        outcomes.append(outcome)
        if outcome.killed:
            assert outcome.failure.startswith("ERROR "), outcome
            return
    pytest.fail(f"{escape.mutation.name} survived the worker machines: {outcomes}")


def test_a_contended_step_round_trips_through_the_trace_and_replays() -> None:
    """``mutex_held_ms`` is part of the exported trace (so a contended failure replays as
    found), only on assign/seek/process; the replay waits on the simulation's clock."""
    step = Step("process", 0, 0, (), 20_001)
    text = planted.trace(*planted.OWN, step).dumps()
    assert '"mutex_held_ms": 20001' in text
    again = loads(text)
    assert again.steps[-1] == step
    sim = replay(again)
    assert sim.attempts[len(planted.OWN)].result == "deadline"  # then the drain
    assert not sim.violations
    doc = json.loads(text)
    doc["steps"][0]["mutex_held_ms"] = 5  # a start makes no callback to contend
    with pytest.raises(TraceError, match="mutex_held_ms"):
        loads(json.dumps(doc))
