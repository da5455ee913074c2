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
from remora.domain.fold import Applied, Decision, decide
from remora.domain.records import SourceRecord, SubjectState
from remora.errors import InvalidInput

KeyFunction = Callable[[SourceRecord], "str | None"]
DecideFunction = Callable[[SourceRecord, "SubjectState | None", int], Decision]


@attrs.frozen
class Processing:
    """A record-processing hook (module docstring)."""

    key: KeyFunction
    decide: DecideFunction

    def apply(self, record: SourceRecord, current: SubjectState | None, next_seq: int) -> Decision:
        """:attr:`decide`, checked: the decision must belong to ``record`` and ``next_seq``."""
        decision = self.decide(record, current, next_seq)
        check_decision(record, decision, next_seq)
        return decision


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
