"""The example project's ledger (``examples/ledger``) as a fixture of Remora's own tests: a
custom record processing, its reference model, a short source and trace over it, and a
planted processing bug (a debit booked as a credit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import attrs

from remora.domain import Applied, Processing, SourceRecord
from remora.oracle import RawRecord
from remora.sim.trace import SimConfig, Step, Toolchain, Trace

sys.path.append(str(Path(__file__).resolve().parents[2] / "examples" / "ledger"))
from ledger.model import ledger_model
from ledger.processing import LEDGER, decide, key


def entry(account: str, amount: int) -> bytes:
    return json.dumps({"account": account, "amount": amount}).encode()


SOURCE = (
    SourceRecord(0, 0, True, "a", entry("a", 5)),
    SourceRecord(0, 1, True, "a", entry("a", -9)),  # overdraft: rejected
    SourceRecord(0, 3, True, "a", entry("a", -2)),
    SourceRecord(0, 4, False, "a", entry("a", 100)),  # invisible
    SourceRecord(0, 5, True, None, b"{nope"),  # malformed
)
RAW = [RawRecord(r.partition, r.offset, r.visible, r.key, r.value) for r in SOURCE]


def trace() -> Trace:
    steps = (Step("start", 0), Step("assign", 0, 0), Step("seek", 0, 0))
    steps += tuple(Step("process", 0, 0) for _ in range(4))
    return Trace(
        Toolchain("3.11", "0.1.0"), None, SimConfig(1, "custom", len(steps)), SOURCE, steps, True
    )


def wrong_decide(record: SourceRecord, current: object, next_seq: int) -> object:
    """Planted processing bug: a debit is booked as a credit."""
    decision = decide(record, current, next_seq)  # type: ignore[arg-type]
    if isinstance(decision, Applied) and decision.entry.op == "debit":
        doc = json.loads(decision.entry.body)
        body = json.dumps({"amount": -doc["amount"], "balance": doc["balance"]}, sort_keys=True)
        return attrs.evolve(decision, entry=attrs.evolve(decision.entry, body=body))
    return decision


WRONG = Processing(key, wrong_decide)  # type: ignore[arg-type]


__all__ = ["LEDGER", "RAW", "SOURCE", "WRONG", "decide", "entry", "key", "ledger_model", "trace"]
