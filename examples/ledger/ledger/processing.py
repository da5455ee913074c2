"""The ledger's record processing: what one record does to an account.

A record's value is JSON ``{"account": "a1", "amount": 5}`` (a non-zero integer).  Per
account the partition keeps the balance; a credit or a debit that keeps the balance at or
above zero is applied (one outbox entry ``credit``/``debit`` with the new balance); a debit
past zero is quarantined as ``rejected`` (overdraft); anything else as ``malformed``.
"""

from __future__ import annotations

import json

from remora.domain import (
    Applied,
    Decision,
    OutboxEntry,
    Processing,
    Quarantined,
    QuarantineEntry,
    SourceRecord,
    SubjectState,
    canonical_json,
)


def read(record: SourceRecord) -> tuple[str | None, int | None]:
    """(account, amount) — amount None when the value is not a well-formed entry."""
    try:
        doc = json.loads(record.value)
    except ValueError:
        return None, None
    if not isinstance(doc, dict) or not isinstance(doc.get("account"), str):
        return None, None
    amount = doc.get("amount")
    if set(doc) != {"account", "amount"} or type(amount) is not int or amount == 0:
        return doc["account"], None
    return doc["account"], amount


def key(record: SourceRecord) -> str | None:
    return read(record)[0]


def decide(record: SourceRecord, current: SubjectState | None, next_seq: int) -> Decision:
    account, amount = read(record)
    if account is None or amount is None:
        entry = QuarantineEntry(record.partition, record.offset, account, "malformed", "bad entry")
        return Quarantined(entry, None)
    balance = 0 if current is None else json.loads(current.body or "{}")["balance"]
    revision = 0 if current is None else current.revision
    if balance + amount < 0:
        detail = f"overdraft: {balance} {amount:+}"
        return Quarantined(
            QuarantineEntry(record.partition, record.offset, account, "rejected", detail), None
        )
    body = canonical_json({"amount": amount, "balance": balance + amount})
    op = "credit" if amount > 0 else "debit"
    entry = OutboxEntry(record.partition, next_seq, account, revision + 1, op, body, record.offset)
    state = SubjectState(
        account, revision + 1, "live", False, canonical_json({"balance": balance + amount})
    )
    return Applied(entry, state, None)


LEDGER = Processing(key, decide)
"""What `remora` runs for this project: the stores call it inside their fenced write."""
