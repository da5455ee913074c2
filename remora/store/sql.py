"""SQL shared by the SQL backends (SQLite, PostgreSQL): the writes one fold decision makes,
and the observer reads.

Both backends run the same statements inside their fenced transaction; only the
placeholder style and one column differ (PostgreSQL also records an intent's offset)."""

from __future__ import annotations

from typing import Any

from remora.domain import Applied, Decision, SourceRecord

Statement = tuple[str, tuple[Any, ...]]

# The observer reads' column lists (each maps onto its row type in remora.domain/store.base).
SELECT_PARTITIONS = "SELECT partition, epoch, frontier, next_seq FROM remora_partition"
SELECT_OUTBOX = 'SELECT partition, seq, subject, version, op, body, "offset" FROM remora_outbox'
SELECT_QUARANTINE = 'SELECT partition, "offset", subject, reason, detail FROM remora_quarantine'
SELECT_INTENTS = "SELECT partition, subject, version, body FROM remora_intent"

SELECT_SUMMARIES = (
    "SELECT p.partition, p.epoch, p.frontier, p.next_seq, "
    "(SELECT count(*) FROM remora_outbox o WHERE o.partition = p.partition), "
    "(SELECT count(*) FROM remora_quarantine q WHERE q.partition = p.partition) "
    "FROM remora_partition p WHERE p.epoch > 0 ORDER BY p.partition"
)
"""Every claimed partition's counters, counted on the primary-key indexes (not loaded)."""


def decision_writes(
    partition: int,
    record: SourceRecord,
    decision: Decision,
    next_seq: int,
    *,
    placeholder: str,
    intent_offset: bool = False,
) -> list[Statement]:
    """The INSERT/UPDATE statements that apply ``decision`` and move the frontier to
    ``record.offset + 1``, in the order they must run."""

    def values(n: int) -> str:
        return ", ".join([placeholder] * n)

    out: list[Statement] = []
    if isinstance(decision, Applied):
        e = decision.entry
        out.append(
            (
                "INSERT INTO remora_outbox (partition, seq, subject, version, op, body, "
                f'"offset") VALUES ({values(7)})',
                (e.partition, e.seq, e.subject, e.version, e.op, e.body, e.offset),
            )
        )
        if decision.intent is not None:
            i = decision.intent
            if intent_offset:
                out.append(
                    (
                        "INSERT INTO remora_intent (partition, subject, version, body, "
                        f'"offset") VALUES ({values(5)})',
                        (i.partition, i.subject, i.version, i.body, record.offset),
                    )
                )
            else:
                out.append(
                    (
                        "INSERT INTO remora_intent (partition, subject, version, body) "
                        f"VALUES ({values(4)})",
                        (i.partition, i.subject, i.version, i.body),
                    )
                )
        next_seq += 1
    else:
        q = decision.entry
        out.append(
            (
                'INSERT INTO remora_quarantine (partition, "offset", subject, reason, detail) '
                f"VALUES ({values(5)})",
                (q.partition, q.offset, q.subject, q.reason, q.detail),
            )
        )
    if decision.subject is not None:
        s = decision.subject
        out.append(
            (
                "INSERT INTO remora_subject (partition, subject, revision, status, blocked, "
                f"body) VALUES ({values(6)}) ON CONFLICT (partition, subject) DO UPDATE SET "
                "revision = excluded.revision, status = excluded.status, "
                "blocked = excluded.blocked, body = excluded.body",
                (partition, s.subject, s.revision, s.status, s.blocked, s.body),
            )
        )
    out.append(
        (
            f"UPDATE remora_partition SET frontier = {placeholder}, next_seq = {placeholder} "
            f"WHERE partition = {placeholder}",
            (record.offset + 1, next_seq, partition),
        )
    )
    return out


__all__ = [
    "Statement",
    "SELECT_PARTITIONS",
    "SELECT_OUTBOX",
    "SELECT_QUARANTINE",
    "SELECT_INTENTS",
    "SELECT_SUMMARIES",
    "decision_writes",
]
