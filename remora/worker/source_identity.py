"""Refusing to resume a store over a different source (:mod:`remora.store.identity`).

:func:`check_source` runs before a group processes anything: for every partition of the
source it compares the store's recorded marks (the first visible record, the last one below
the frontier) with the source's records at those offsets, and raises
:class:`SourceMismatch` (an :class:`~remora.errors.InvalidInput`: exit 2) naming the
partition and offset that differ — unless ``accept`` is set, in which case the marks are
simply re-recorded from this source.  :func:`record_source` runs when the group ends (however
it ends) and moves the last mark up to the new frontier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from remora.domain import SourceRecord
from remora.errors import InvalidInput
from remora.source import SourceLog
from remora.store import StateStore
from remora.store.identity import RecordMark, SourceIdentity, mark

Say = Callable[[str], None]

ACCEPT_FLAG = "--accept-source-change"


class SourceMismatch(InvalidInput):
    """The source is not the one the store's frontiers were made from."""


def _at(log: SourceLog, partition: int, offset: int) -> SourceRecord | None:
    """The visible record exactly at ``offset``, or None."""
    record = log.next_visible(partition, offset)
    return record if record is not None and record.offset == offset else None


def _differs(log: SourceLog, partition: int, recorded: RecordMark, what: str) -> str | None:
    record = _at(log, partition, recorded.offset)
    if record is None:
        return f"the {what} record it processed, at offset {recorded.offset}, is not in it"
    if mark(record).digest != recorded.digest:
        return f"the {what} record it processed, at offset {recorded.offset}, differs"
    return None


def _identity(log: SourceLog, partition: int, frontier: int) -> SourceIdentity | None:
    first = log.next_visible(partition, 0)
    if first is None:
        return None
    last = _at(log, partition, frontier - 1) if frontier > 0 else None
    return SourceIdentity(partition, mark(first), None if last is None else mark(last))


def check_source(
    store: StateStore,
    log: SourceLog,
    *,
    accept: bool,
    say: Say,
    partitions: Sequence[int] | None = None,
) -> None:
    """Refuse (or with ``accept``, re-record) a source that is not the store's (module
    docstring); record the first mark of partitions seen for the first time.  Only
    ``partitions`` (default: all of ``log``'s) — a process sharing the store with others
    (``remora run --member``) checks and records its own."""
    recorded = store.backend.source_identities()
    frontiers = {s.partition: s.frontier for s in store.backend.partition_summaries()}
    for partition in log.partitions if partitions is None else partitions:
        frontier = frontiers.get(partition, 0)
        known = recorded.get(partition)
        if known is None:
            if frontier > 0:
                say(
                    f"partition {partition}: this store (frontier {frontier}) has no record "
                    "of its source (made before Remora recorded sources); recording this one"
                )
        else:
            problem = _differs(log, partition, known.first, "first")
            head = log.next_visible(partition, 0)
            if problem is None and head is not None and head.offset < known.first.offset:
                # a record appeared below the first one processed (e.g. a source the store
                # accepted without it, then the original again): it would never be processed
                problem = (
                    f"a record at offset {head.offset} precedes the first record it "
                    f"processed, at offset {known.first.offset}"
                )
            if problem is None and known.last is not None:
                problem = _differs(log, partition, known.last, "last")
            if problem is not None:
                if not accept:
                    raise SourceMismatch(
                        f"partition {partition}: this is not the source the store processed "
                        f"({problem}; the store's frontier is {frontier}); use another "
                        f"store, or pass {ACCEPT_FLAG} to continue from that frontier with "
                        "this source"
                    )
                say(f"partition {partition}: source changed ({problem}); continuing as asked")
            elif known.last is not None or frontier == 0:
                continue
        current = _identity(log, partition, frontier)
        if current is not None:
            store.backend.record_source_identity(current)


def record_source(
    store: StateStore, log: SourceLog, partitions: Sequence[int] | None = None
) -> None:
    """Move every partition's (or only ``partitions``') last mark up to its durable
    frontier."""
    recorded = store.backend.source_identities()
    mine = set(log.partitions if partitions is None else partitions) & set(log.partitions)
    for summary in store.backend.partition_summaries():
        known = recorded.get(summary.partition)
        if summary.frontier == 0 or summary.partition not in mine:
            continue
        last = None if known is None else known.last
        if last is not None and last.offset == summary.frontier - 1:
            continue
        current = _identity(log, summary.partition, summary.frontier)
        if current is not None and current != known:
            store.backend.record_source_identity(current)


__all__ = [
    "Say",
    "ACCEPT_FLAG",
    "SourceMismatch",
    "check_source",
    "record_source",
]
