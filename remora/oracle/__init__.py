"""The independent full-history oracle.

Given only the raw source and a partition's durable frontier, the oracle says what the
durable outputs must be: outbox entries, quarantine rows, committed intents and the
materialized view.  It re-derives the amendment rules from their specification with its own
parser and its own fold, and deliberately imports nothing from ``remora.worker``,
``remora.domain`` or ``remora.store`` (a test enforces this), so a bug in the production
fold cannot hide by being shared with its checker.

:class:`Monitor` adds the checks that need history: frontiers and epochs never go back,
committed intents are immutable.
"""

from __future__ import annotations

from remora.oracle.model import (
    AMENDMENT_RULES,
    Expectation,
    IntentRow,
    Model,
    ModelError,
    ModelOutput,
    Oracle,
    OutboxRow,
    PartitionModel,
    QuarantineRow,
    RawRecord,
    ReferenceModel,
    ViewRow,
    Violation,
)
from remora.oracle.monitor import Monitor, Observed, ObservedTail

__all__ = [
    "AMENDMENT_RULES",
    "Expectation",
    "IntentRow",
    "Model",
    "ModelError",
    "ModelOutput",
    "Monitor",
    "Observed",
    "ObservedTail",
    "Oracle",
    "OutboxRow",
    "PartitionModel",
    "QuarantineRow",
    "RawRecord",
    "ReferenceModel",
    "ViewRow",
    "Violation",
]
