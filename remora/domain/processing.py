"""The record-processing hook: what one visible record does to its partition.

A :class:`Processing` is two plain functions a user may supply in place of the amendment
fold:

* ``key(record)`` — the name of the per-partition state the record reads and writes (a
  *subject*), or None when it touches none;
* ``decide(record, current, next_seq)`` — given that state (None while the partition has
  never stored it) and the seq the partition's next outbox entry gets, the
  :class:`~remora.domain.Decision`: :class:`~remora.domain.Applied` (one outbox entry, the
  subject's new state, optionally a committed intent) or :class:`~remora.domain.Quarantined`
  (one quarantine entry, optionally the subject's new — e.g. blocked — state).

Every store runs it inside its atomic, fenced write: the decision, the subject's new state
and the frontier move to ``offset + 1`` commit together or not at all, so the exactly-once
guarantees hold for any processing.  A decision that does not belong to its record (another
offset, partition or seq) is refused with :class:`~remora.errors.InvalidInput` before
anything is written.  :data:`AMENDMENTS` is Remora's own (``docs/fold.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import attrs

from remora.domain.amendment import Amendment, Malformed, parse_amendment
from remora.domain.fold import Applied, Decision, Quarantined, decide
from remora.domain.records import QuarantineEntry, SourceRecord, SubjectState
from remora.domain.storable import MAX_VERSION, UNSTORABLE, storable_text
from remora.errors import InvalidInput

KeyFunction = Callable[[SourceRecord], "str | None"]
DecideFunction = Callable[[SourceRecord, "SubjectState | None", int], Decision]


@attrs.frozen
class Processing:
    """A record-processing hook (module docstring)."""

    key: KeyFunction
    decide: DecideFunction

    def apply(self, record: SourceRecord, current: SubjectState | None, next_seq: int) -> Decision:
        """:attr:`decide`, checked: the decision must belong to ``record`` and ``next_seq``;
        one holding what no store can hold becomes a ``malformed`` quarantine
        (:func:`storable_decision`), the same on every store."""
        decision = self.decide(record, current, next_seq)
        check_decision(record, decision, next_seq)
        return storable_decision(record, decision)


def check_decision(record: SourceRecord, decision: Decision, next_seq: int) -> None:
    """Refuse a decision that does not account for exactly this record."""
    entry = decision.entry
    if (entry.partition, entry.offset) != (record.partition, record.offset):
        raise InvalidInput(
            f"processing decided for partition {entry.partition} offset {entry.offset}, "
            f"not for the record at partition {record.partition} offset {record.offset}"
        )
    if isinstance(decision, Applied):
        seq = decision.entry.seq
        if seq != next_seq:
            raise InvalidInput(f"processing gave outbox seq {seq}, the next is {next_seq}")
        if decision.subject.subject != decision.entry.subject:
            raise InvalidInput("processing applied one subject and stored another")


def _texts(decision: Decision) -> list[tuple[str, str | None]]:
    e = decision.entry
    out: list[tuple[str, str | None]] = [("subject", e.subject)]
    if isinstance(decision, Applied):
        out += [("op", decision.entry.op), ("body", decision.entry.body)]
        if decision.intent is not None:
            out += [("intent subject", decision.intent.subject)]
            out += [("intent body", decision.intent.body)]
    else:
        out += [("detail", decision.entry.detail)]
    if decision.subject is not None:
        out += [("state subject", decision.subject.subject), ("state body", decision.subject.body)]
    return out


def _numbers(decision: Decision) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    if isinstance(decision, Applied):
        out.append(("version", decision.entry.version))
        if decision.intent is not None:
            out.append(("intent version", decision.intent.version))
    if decision.subject is not None:
        out.append(("revision", decision.subject.revision))
    return out


def storable_decision(record: SourceRecord, decision: Decision) -> Decision:
    """``decision``, or — when it holds something no store can hold — a ``malformed``
    quarantine of ``record`` saying what (module docstring)."""
    for name, text in _texts(decision):
        if text is not None and not storable_text(text):
            return _malformed(record, f"the decision's {name} holds {UNSTORABLE}")
    for name, number in _numbers(decision):
        if not 0 <= number <= MAX_VERSION:
            return _malformed(record, f"the decision's {name} is outside 0..{MAX_VERSION}")
    return decision


def _malformed(record: SourceRecord, detail: str) -> Quarantined:
    entry = QuarantineEntry(record.partition, record.offset, None, "malformed", detail)
    return Quarantined(entry=entry, subject=None)


@functools.lru_cache(maxsize=8)
def _parsed(value: bytes) -> Amendment | Malformed:
    """A store asks for a record's key and then its decision: parse its value once (the
    results are frozen values, safe to share)."""
    return parse_amendment(value)


def amendment_key(record: SourceRecord) -> str | None:
    return _parsed(record.value).subject


def amendment_decide(record: SourceRecord, current: SubjectState | None, next_seq: int) -> Decision:
    return decide(record, _parsed(record.value), current, next_seq)


AMENDMENTS = Processing(amendment_key, amendment_decide)
"""Remora's amendment fold as a :class:`Processing` (the default of every store)."""


__all__ = [
    "KeyFunction",
    "DecideFunction",
    "Processing",
    "check_decision",
    "storable_decision",
    "amendment_key",
    "amendment_decide",
    "AMENDMENTS",
]
