"""A custom record processing (the example project's ledger) and the oracle's two modes for
it: checked against a user's reference model, or — without one — for the generic properties
only.  Each check with its planted bug."""

from __future__ import annotations

import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import Processing, SourceRecord
from remora.errors import InvalidInput
from remora.oracle import Monitor, Observed, Oracle
from remora.sim.report import run_trace
from remora.store import MemoryBackend, Token
from tests.common.ledger import LEDGER, RAW, SOURCE, WRONG, decide, key, ledger_model, trace


def test_the_ledger_replays_against_its_model_and_without_one() -> None:
    report = run_trace(trace(), processing=LEDGER, model=ledger_model)
    assert report.status == "PASS_WITH_EXCLUSIONS" and report.document["predicted"] == report.status
    generic = run_trace(trace(), processing=LEDGER, model=None)
    assert generic.status == "PASS_WITH_EXCLUSIONS" and generic.document["predicted"] is None


def test_planted_processing_bug_is_caught_by_the_model_not_by_the_generic_checks() -> None:
    assert (
        run_trace(trace(), processing=WRONG, model=ledger_model).failure == "ERROR outbox-mismatch"
    )
    assert run_trace(trace(), processing=WRONG, model=None).status != "ERROR"  # generic only


def test_the_builtin_rules_would_misjudge_a_custom_processing() -> None:
    """Why the model follows the processing: the amendment rules see only malformed values."""
    assert run_trace(trace(), processing=LEDGER).failure == "ERROR outbox-mismatch"


def observed(frontier: int, outbox: list[tuple[int, int]], quarantine: list[int]) -> Observed:
    return Observed(
        0,
        1,
        frontier,
        [(seq, "a", seq, "credit", "{}", offset) for seq, offset in outbox],
        [(offset, "a", "rejected") for offset in quarantine],
        [],
    )


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        (observed(4, [(1, 0), (2, 3)], [1]), None),  # every visible offset once
        (observed(4, [(1, 0), (2, 3)], []), "progress-disagreement"),  # offset 1 lost
        (observed(4, [(1, 0), (2, 3)], [1, 3]), "progress-disagreement"),  # offset 3 twice
        (observed(4, [(1, 0), (3, 3)], [1]), "outbox-seq"),
        (observed(3, [(1, 0)], [1]), "frontier-invalid"),  # 3 is no visible offset + 1
    ],
)
def test_generic_properties_without_a_model(state: Observed, kind: str | None) -> None:
    found = Monitor(Oracle(RAW, model=None)).check(state)
    assert [v.kind for v in found] == ([] if kind is None else [kind])


def test_generic_mode_checks_history_too() -> None:
    monitor = Monitor(Oracle(RAW, model=None))
    assert monitor.check(observed(4, [(1, 0), (2, 3)], [1])) == []
    assert [v.kind for v in monitor.check(observed(1, [(1, 0)], []))] == ["frontier-regressed"]


def test_a_model_predicts_outputs_and_status() -> None:
    oracle = Oracle(RAW, model=ledger_model)
    expected = oracle.expected(0, 6)
    assert [(e.op, e.body) for e in expected.outbox] == [
        ("credit", {"amount": 5, "balance": 5}),
        ("debit", {"amount": -2, "balance": 3}),
    ]
    assert [(q.offset, q.reason) for q in expected.quarantine] == [
        (1, "rejected"),
        (5, "malformed"),
    ]
    assert oracle.predicted_status() == "PASS_WITH_EXCLUSIONS"
    assert Oracle(RAW, model=None).predicted_status() is None


def test_a_decision_for_another_record_is_refused_by_the_store() -> None:
    def off_by_one(record: SourceRecord, current: object, next_seq: int) -> object:
        return decide(record, current, next_seq + 1)  # type: ignore[arg-type]

    backend = MemoryBackend(Processing(key, off_by_one))  # type: ignore[arg-type]
    ctx = Context(LogicalClock())
    token = backend.claim(0, ctx, commit=True)
    with pytest.raises(InvalidInput, match="outbox seq 2, the next is 1"):
        backend.process(0, Token(token.epoch, 0), SOURCE[0], ctx, commit=True)
    assert backend.partition_row(0).frontier == 0  # nothing written
