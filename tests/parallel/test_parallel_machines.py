"""The parallel machines over the real code pass, and under a full-budget profile they reach
what makes them worth running: concurrent operations of every result (unknown ones
included), interleavings that are not one branch after another, and no hangs."""

from __future__ import annotations

import pytest

from remora.testing.parallel import ParallelMachine
from remora.testing.profiles import full_budget
from tests.parallel.hunt import run_share
from tests.parallel.machines import BUDGET, MACHINES

STORE_RESULTS = {"result ok", "result fenced", "result unavailable", "result unknown"}
LIFECYCLE_RESULTS = {"result ok", "result fenced", "result unknown"}


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.__name__)
def test_parallel_machine(machine: type[ParallelMachine]) -> None:
    stats = run_share(machine, BUDGET[machine.__name__])
    assert stats["operations"] > stats["runs"]  # the branches made real store calls
    if full_budget():
        want = STORE_RESULTS if machine.kind == "store" else LIFECYCLE_RESULTS
        assert want <= set(stats), sorted(stats)
        # far more choices than runs x threads: the threads were interleaved, not run
        # one after another
        assert stats["decisions"] > 10 * stats["runs"]
