"""Value objects of the amendment domain: raw source records and what a fold produces."""

from __future__ import annotations

from typing import Literal

import attrs

from remora.errors import InvalidInput

Op = Literal["submit", "correct", "withdraw"]
QuarantineReason = Literal["malformed", "conflict", "rejected", "blocked"]
SubjectStatus = Literal["absent", "live", "withdrawn"]

OPS: tuple[Op, ...] = ("submit", "correct", "withdraw")
QUARANTINE_REASONS: tuple[QuarantineReason, ...] = ("malformed", "conflict", "rejected", "blocked")


def _non_negative(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise InvalidInput(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen
class SourceRecord:
    """One raw record of an ordered source partition.

    ``visible`` is false for records a consumer never sees (aborted transactions, control
    records); fetch skips them, so they never reach processing.  Offsets may have gaps.
    """

    partition: int = attrs.field(validator=_non_negative)
    offset: int = attrs.field(validator=_non_negative)
    visible: bool
    key: str | None
    value: bytes


@attrs.frozen
class OutboxEntry:
    """One applied amendment, to be delivered downstream in ``seq`` order."""

    partition: int
    seq: int
    subject: str
    version: int
    op: str  # an Op for the amendment fold; a custom processing names its own
    body: str  # canonical JSON text of the amendment body
    offset: int


@attrs.frozen
class QuarantineEntry:
    """A record that was not applied, and why.  ``subject`` is None when unparseable."""

    partition: int
    offset: int
    subject: str | None
    reason: QuarantineReason
    detail: str


@attrs.frozen
class Intent:
    """A committed intent: revision ``version`` of ``subject`` with ``body``.  Immutable."""

    partition: int
    subject: str
    version: int
    body: str


@attrs.frozen
class SubjectState:
    """What a partition knows about one subject.

    ``revision`` is the last applied revision (0 while absent).  A blocked subject accepts
    nothing more: every later record for it is quarantined as ``blocked``.
    """

    subject: str
    revision: int
    status: SubjectStatus
    blocked: bool
    body: str | None = None


__all__ = [
    "Op",
    "QuarantineReason",
    "SubjectStatus",
    "OPS",
    "QUARANTINE_REASONS",
    "SourceRecord",
    "OutboxEntry",
    "QuarantineEntry",
    "Intent",
    "SubjectState",
]
