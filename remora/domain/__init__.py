"""The amendment domain: what processing one source record means.

Pure code with no I/O.  Stores call :func:`parse_amendment` and :func:`decide` inside their
atomic write; nothing else in Remora interprets record values.
"""

from __future__ import annotations

from remora.domain.amendment import Amendment, Malformed, canonical_json, parse_amendment
from remora.domain.fold import Applied, Decision, Quarantined, decide
from remora.domain.processing import AMENDMENTS, Processing, check_decision
from remora.domain.records import (
    OPS,
    QUARANTINE_REASONS,
    Intent,
    Op,
    OutboxEntry,
    QuarantineEntry,
    QuarantineReason,
    SourceRecord,
    SubjectState,
    SubjectStatus,
)

__all__ = [
    "AMENDMENTS",
    "OPS",
    "QUARANTINE_REASONS",
    "Amendment",
    "Applied",
    "Decision",
    "Intent",
    "Malformed",
    "Op",
    "OutboxEntry",
    "Processing",
    "QuarantineEntry",
    "QuarantineReason",
    "Quarantined",
    "SourceRecord",
    "SubjectState",
    "SubjectStatus",
    "canonical_json",
    "check_decision",
    "decide",
    "parse_amendment",
]
