"""The amendment fold: what processing one visible record means for a partition.

The fold is incremental and pure.  Given a record, the stored state of the subject it
names and the partition's next outbox sequence number, :func:`decide` returns either an
:class:`Applied` decision (one outbox entry, the subject's new state, and — for ``submit``
and ``correct`` — a committed intent) or a :class:`Quarantined` decision.  The store writes
the decision and the new frontier in one atomic transaction.

Rules, per subject, in offset order:

* ``submit`` revision 1 of an absent subject commits intent (subject, 1, body);
* ``correct`` revision n+1 of a live subject at revision n commits intent (subject, n+1, body);
* ``withdraw`` revision n+1 of a live subject at revision n withdraws it;
* anything else is quarantined: ``malformed`` (not an amendment), ``rejected`` (the op is
  not allowed in the subject's state — checked first), ``conflict`` (allowed op, but the
  revision is not current+1);
* a quarantined record whose subject is parseable *blocks* that subject; later records for a
  blocked subject are quarantined as ``blocked`` and not applied.
"""

from __future__ import annotations

import attrs

from remora.domain.amendment import Amendment, Malformed
from remora.domain.records import (
    Intent,
    OutboxEntry,
    QuarantineEntry,
    QuarantineReason,
    SourceRecord,
    SubjectState,
    SubjectStatus,
)
from remora.errors import InvalidInput


@attrs.frozen
class Applied:
    entry: OutboxEntry
    subject: SubjectState
    intent: Intent | None


@attrs.frozen
class Quarantined:
    entry: QuarantineEntry
    subject: SubjectState | None  # the subject's new (blocked) state, if it has a subject


Decision = Applied | Quarantined

_ALLOWED = {
    "absent": frozenset({"submit"}),
    "live": frozenset({"correct", "withdraw"}),
    "withdrawn": frozenset[str](),
}


def _quarantine(
    record: SourceRecord,
    subject: str | None,
    current: SubjectState | None,
    reason: QuarantineReason,
    detail: str,
) -> Quarantined:
    blocked: SubjectState | None = None
    if subject is not None:
        base = current or SubjectState(subject=subject, revision=0, status="absent", blocked=False)
        blocked = attrs.evolve(base, blocked=True)
    entry = QuarantineEntry(record.partition, record.offset, subject, reason, detail)
    return Quarantined(entry=entry, subject=blocked)


def decide(
    record: SourceRecord,
    parsed: Amendment | Malformed,
    current: SubjectState | None,
    next_seq: int,
) -> Decision:
    """Decide what applying ``record`` means.

    ``parsed`` is ``parse_amendment(record.value)``; ``current`` is the stored state of
    ``parsed.subject`` (None if the partition has never seen it); ``next_seq`` is the seq
    the partition's next outbox entry gets.
    """
    if not record.visible:
        raise InvalidInput(f"record at offset {record.offset} is invisible and cannot be processed")
    if current is not None and current.subject != parsed.subject:
        raise InvalidInput("subject state does not belong to the record's subject")
    if current is not None and current.blocked:
        return _quarantine(record, parsed.subject, current, "blocked", "subject is blocked")
    if isinstance(parsed, Malformed):
        return _quarantine(record, parsed.subject, current, "malformed", parsed.detail)
    state = current or SubjectState(parsed.subject, revision=0, status="absent", blocked=False)
    if parsed.op not in _ALLOWED[state.status]:
        return _quarantine(
            record, parsed.subject, current, "rejected", f"{parsed.op} on {state.status} subject"
        )
    if parsed.revision != state.revision + 1:
        detail = f"revision {parsed.revision} after {state.revision}"
        return _quarantine(record, parsed.subject, current, "conflict", detail)
    status: SubjectStatus = "withdrawn" if parsed.op == "withdraw" else "live"
    new_state = SubjectState(parsed.subject, parsed.revision, status, False, parsed.body)
    entry = OutboxEntry(
        partition=record.partition,
        seq=next_seq,
        subject=parsed.subject,
        version=parsed.revision,
        op=parsed.op,
        body=parsed.body,
        offset=record.offset,
    )
    intent = None
    if parsed.op != "withdraw":
        intent = Intent(record.partition, parsed.subject, parsed.revision, parsed.body)
    return Applied(entry=entry, subject=new_state, intent=intent)


__all__ = [
    "Applied",
    "Quarantined",
    "Decision",
    "decide",
]
