"""What a store remembers about the source it processed, per partition.

A state store holds frontiers; a frontier means "every record below this offset was
processed" — of *one* source.  Reused with another source (the quick start leaves
``remora-state.sqlite3`` behind; the next ``remora run my-data`` picks it up), the store would
silently skip the new source's records below the old frontiers and report ``complete``.

So each partition's row in ``remora_source`` names two records by offset and digest: the
partition's **first** visible record (recorded before anything is processed) and the
**last** visible record below the frontier (recorded when a run ends, however it ends).
``remora run`` checks both against the source before it processes anything (two seeks per
partition, whatever the source's length) and refuses a mismatch — a different source, or one
truncated below the frontier — unless told to continue (``--accept-source-change``).  It does
not see an edit *between* the two records; digests of every record would, at the price of
rereading the processed prefix on every start.
"""

from __future__ import annotations

import base64
import hashlib
import json

import attrs

from remora.domain import SourceRecord


@attrs.frozen
class RecordMark:
    """One record, named by offset and digest."""

    offset: int
    digest: str


@attrs.frozen
class SourceIdentity:
    """A partition's first visible record and the last one below its frontier (None until
    a run has processed something)."""

    partition: int
    first: RecordMark
    last: RecordMark | None = None


def record_digest(record: SourceRecord) -> str:
    """``sha256:`` of the record's canonical form (offset, visibility, key, value bytes): the
    same for a record however its source line was spelled."""
    canonical = json.dumps(
        [record.offset, record.visible, record.key, base64.b64encode(record.value).decode()],
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def mark(record: SourceRecord) -> RecordMark:
    return RecordMark(record.offset, record_digest(record))


CREATE_SQL = """CREATE TABLE IF NOT EXISTS remora_source (
    partition integer PRIMARY KEY, first_offset bigint NOT NULL, first_digest text NOT NULL,
    last_offset bigint, last_digest text)"""

SELECT_SQL = (
    "SELECT partition, first_offset, first_digest, last_offset, last_digest FROM remora_source"
)


def upsert_sql(placeholder: str) -> str:
    values = ", ".join([placeholder] * 5)
    return (
        "INSERT INTO remora_source (partition, first_offset, first_digest, last_offset, "
        f"last_digest) VALUES ({values}) ON CONFLICT (partition) DO UPDATE SET "
        "first_offset = excluded.first_offset, first_digest = excluded.first_digest, "
        "last_offset = excluded.last_offset, last_digest = excluded.last_digest"
    )


def to_row(identity: SourceIdentity) -> tuple[object, ...]:
    last = identity.last
    return (
        identity.partition,
        identity.first.offset,
        identity.first.digest,
        None if last is None else last.offset,
        None if last is None else last.digest,
    )


def from_row(row: tuple[object, ...]) -> SourceIdentity:
    partition, first_offset, first_digest, last_offset, last_digest = row
    last = None
    if last_offset is not None:
        last = RecordMark(int(str(last_offset)), str(last_digest))
    return SourceIdentity(
        int(str(partition)), RecordMark(int(str(first_offset)), str(first_digest)), last
    )


__all__ = [
    "RecordMark",
    "SourceIdentity",
    "record_digest",
    "mark",
    "CREATE_SQL",
    "SELECT_SQL",
    "upsert_sql",
    "to_row",
    "from_row",
]
