"""The parallel machines over the real code pass, and under a full-budget profile they reach
what makes them worth running: concurrent operations of every result (unknown ones
included), interleavings that are not one branch after another, and no hangs."""

from __future__ import annotations

import pytest
from hypothesis import settings

from remora.testing.parallel import ParallelMachine
from remora.testing.profiles import CI_EXAMPLES, full_budget
from tests.parallel.machines import BUDGET, MACHINES

STORE_RESULTS = {"result ok", "result fenced", "result unavailable", "result unknown"}
LIFECYCLE_RESULTS = {"result ok", "result fenced", "result unknown"}


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.__name__)
def test_parallel_machine(machine: type[ParallelMachine]) -> None:
    machine.stats.clear()
    budget = settings.default
    assert budget is not None
    # the machine's share of the profile: BUDGET under ci, 20 times that nightly
    examples = max(1, BUDGET[machine.__name__] * budget.max_examples // CI_EXAMPLES)
    machine.run(settings(budget, max_examples=examples))
    stats = machine.stats
    assert stats["runs"] >= examples
    assert stats["operations"] > stats["runs"]  # the branches made real store calls
    if full_budget():
        want = STORE_RESULTS if machine.kind == "store" else LIFECYCLE_RESULTS
        assert want <= set(stats), sorted(stats)
        # far more choices than runs x threads: the threads were interleaved, not run
        # one after another
        assert stats["decisions"] > 10 * stats["runs"]
