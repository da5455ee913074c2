"""The ledger's reference model for Remora's oracle, written apart from the processing
(its own parsing, its own arithmetic): per partition, given the visible records in offset
order, what each one must do."""

from __future__ import annotations

import json
from collections.abc import Callable

from remora.oracle import ModelOutput, RawRecord


def ledger_model(partition: int) -> Callable[[RawRecord], ModelOutput]:
    balances: dict[str, int] = {}
    entries: dict[str, int] = {}

    def step(record: RawRecord) -> ModelOutput:
        try:
            doc = json.loads(record.value.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return ModelOutput(None, "malformed")
        account = doc.get("account") if type(doc) is dict else None
        if type(account) is not str:
            return ModelOutput(None, "malformed")
        amount = doc.get("amount")
        if sorted(doc) != ["account", "amount"] or type(amount) is not int or not amount:
            return ModelOutput(account, "malformed")
        balance = balances.get(account, 0) + amount
        if balance < 0:
            return ModelOutput(account, "rejected")
        balances[account] = balance
        entries[account] = entries.get(account, 0) + 1
        op = "credit" if amount > 0 else "debit"
        return ModelOutput(
            account, None, entries[account], op, {"amount": amount, "balance": balance}
        )

    return step
