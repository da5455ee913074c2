"""The store / fault-seam / lifecycle contract machine: it runs, and under a full-budget
profile every variant of its file and contract rules is applied (not only drawn)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.testing.profiles import full_budget
from tests.stateful.contract_checks import LIFECYCLE_CASES, RUNNER_CASES
from tests.stateful.sqlite_checks import INTERRUPTS, LOCK_ENDINGS, OPENS, REOPENS
from tests.stateful.store_machines import SqliteFileMachine

EXAMPLES = 60
"""Fewer runs than the other machines (each holds a database file): enough to apply every
variant of the file rules (the reach below)."""

SQLITE_VARIANTS = {
    *(("lock-wait", e) for e in LOCK_ENDINGS),
    *(("interrupt", i) for i in INTERRUPTS),
    *(("reopen", r) for r in REOPENS),
    *(("open", o) for o in OPENS),
    ("identity", "recorded"),
    ("identity", "refused"),
}

CONTRACT_VARIANTS = {
    ("retry", "valid"),
    ("retry", "refused"),
    ("seam", "reads"),
    ("seam", "writes"),
    *(("lifecycle", c) for c in LIFECYCLE_CASES),
    *(("runner", c) for c in RUNNER_CASES),
}


def test_sqlite_file_machine() -> None:
    SqliteFileMachine.sqlite_reach.clear()
    SqliteFileMachine.contract_reach.clear()
    budget = settings.default
    assert budget is not None
    run_state_machine_as_test(
        SqliteFileMachine,
        settings=settings(budget, max_examples=min(EXAMPLES, budget.max_examples)),
    )
    if full_budget():
        assert SQLITE_VARIANTS - SqliteFileMachine.sqlite_reach == set()
        assert CONTRACT_VARIANTS - SqliteFileMachine.contract_reach == set()
