"""Fetch cursors: where a consumer lifetime will read next.

A cursor is *not* a durable receipt: it advances when a record is delivered to processing,
even if processing then fails, and a replacement lifetime must seek its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from remora.domain import SourceRecord
from remora.errors import SourceError, Unseeked
from remora.source.log import SourceLog


class FetchCursors:
    def __init__(self, log: SourceLog) -> None:
        self.log = log
        self._positions: dict[int, int] = {}

    def seek(self, partition: int, offset: int) -> None:
        self._positions[partition] = offset

    def position(self, partition: int) -> int | None:
        return self._positions.get(partition)

    def clear(self) -> None:
        self._positions.clear()

    def fetch_round_robin(self, partitions: Sequence[int], max_records: int) -> list[SourceRecord]:
        """Up to ``max_records`` records, one partition at a time in turn, until every
        positioned partition is idle (partitions without a cursor are skipped)."""
        out: list[SourceRecord] = []
        progressing = True
        while len(out) < max_records and progressing:
            progressing = False
            for partition in partitions:
                if self._positions.get(partition) is None:
                    continue
                try:
                    record = self.fetch(partition)
                except SourceError:
                    # Deliver what was fetched first (its cursor did not move past the
                    # failing read, so the next fetch raises again, with nothing pending).
                    if out:
                        return out
                    raise
                if record is not None:
                    out.append(record)
                    progressing = True
                    if len(out) >= max_records:
                        break
        return out

    def fetch(self, partition: int) -> SourceRecord | None:
        """Deliver the next visible record and advance past it; None when idle.

        Raises :class:`Unseeked` if no seek positioned this partition's cursor."""
        position = self._positions.get(partition)
        if position is None:
            raise Unseeked(f"partition {partition} was not seeked")
        record = self.log.next_visible(partition, position)
        if record is not None:
            self._positions[partition] = record.offset + 1
        return record


__all__ = [
    "FetchCursors",
]
