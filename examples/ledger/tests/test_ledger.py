"""The ledger's own tests, as a project using Remora writes them: Remora's state machines
drive *this project's* lifecycle and processing (the pytest plugin comes with
``pip install remora[testing]``), checked by this project's reference model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test
from ledger.model import ledger_model
from ledger.processing import LEDGER
from ledger.worker import HastyLedgerLifecycle, LedgerLifecycle

from remora.domain import SourceRecord
from remora.sim.report import run_trace
from remora.sim.trace import SimConfig, Step, Trace, current_toolchain
from remora.store import StateStore
from remora.testing.machines import ScheduleFailure, WorkerScheduleMachine

AMOUNTS = (5, -3, 2, -9, 0)  # 0 is not an amount: malformed


def partition_records(partition: int, drafts: list[tuple[int, int, bool]]) -> list[SourceRecord]:
    out, offset = [], 0
    for account, amount, visible in drafts:
        value = json.dumps({"account": f"a{account}", "amount": AMOUNTS[amount]}).encode()
        out.append(SourceRecord(partition, offset, visible, f"a{account}", value))
        offset += 1 if visible else 2
    return out


class LedgerMachine(WorkerScheduleMachine):
    partitions = 2
    classes = ("custom",)
    lifecycle_factory = LedgerLifecycle
    processing = LEDGER
    reference_model = ledger_model

    @classmethod
    def sources(cls, trace_class: str) -> st.SearchStrategy[list[SourceRecord]]:
        draft = st.tuples(st.integers(0, 2), st.integers(0, len(AMOUNTS) - 1), st.booleans())
        drafts = st.lists(draft, min_size=2, max_size=8)
        return st.tuples(*[drafts] * cls.partitions).map(
            lambda parts: [r for p, d in enumerate(parts) for r in partition_records(p, d)]
        )


class HastyLedgerMachine(LedgerMachine):
    lifecycle_factory = HastyLedgerLifecycle


QUICK = settings(
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    stateful_step_count=20,
    suppress_health_check=[HealthCheck.too_slow],
)

TestLedger = LedgerMachine.TestCase
TestLedger.settings = QUICK


def test_the_machines_find_the_planted_bug() -> None:
    # No shrink phase here, to keep this test quick: `remora reduce` shrinks the exported
    # trace afterwards (the loop in docs/custom.md).
    hunt = settings(
        QUICK,
        max_examples=300,
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
    )
    with pytest.raises(ScheduleFailure) as found:
        run_state_machine_as_test(HastyLedgerMachine, settings=hunt)
    # Keep what the outer test replays: the failure string and the exported trace.
    Path("found.json").write_text(
        json.dumps({"failure": found.value.failure, "trace": found.value.trace_path})
    )
    assert found.value.failure.startswith("ERROR ")


def test_every_store_runs_the_ledger(remora_store_factory) -> None:
    """A fixed schedule on each kind of store (memory, SQLite, PostgreSQL) from the plugin."""
    source = partition_records(0, [(0, 0, True), (0, 3, True), (1, 2, True), (0, 1, True)])
    steps = (Step("start", 0), Step("assign", 0, 0), Step("seek", 0, 0))
    steps += tuple(Step("process", 0, 0) for _ in source)
    trace = Trace(
        current_toolchain("ledger"),
        None,
        SimConfig(1, "custom", len(steps)),
        tuple(source),
        steps,
        True,
    )
    report = run_trace(
        trace,
        store_factory=lambda config: StateStore(remora_store_factory(processing=LEDGER)),
        lifecycle_factory=LedgerLifecycle,
        processing=LEDGER,
        model=ledger_model,
    )
    assert report.status == "PASS_WITH_EXCLUSIONS", report.document["diagnostics"]
    assert report.document["boundary"][0]["quarantine"] == {"rejected": 1}  # the overdraft
