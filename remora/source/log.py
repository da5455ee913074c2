"""An in-memory source log with controlled validation I/O."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Protocol

from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import InvalidInput, SourceError
from remora.faults import NO_FAULTS, IOCall, IOHook, Operation, controlled_call


class SourceValidator(Protocol):
    """What the lifecycle needs from a source: a (faultable) check that a partition exists."""

    def validate(self, partition: int, ctx: Context) -> None: ...


class SourceLog(SourceValidator, Protocol):
    """What consumers need from a source: its partitions, the validation, and the next
    visible record at or after a position.  :class:`MemorySourceLog` holds the records
    (simulation, tests); :class:`~remora.source.files.FileSourceLog` streams them from the
    partition files (``remora run``)."""

    @property
    def partitions(self) -> tuple[int, ...]: ...

    def next_visible(self, partition: int, position: int) -> SourceRecord | None:
        """The first visible record at or after offset ``position``, or None."""
        ...


class MemorySourceLog:
    """Partitions of raw records held in memory, ordered by offset."""

    def __init__(
        self,
        records: Iterable[SourceRecord],
        partitions: Iterable[int] | None = None,
        hook: IOHook = NO_FAULTS,
    ) -> None:
        by_partition: dict[int, list[SourceRecord]] = {}
        for record in records:
            by_partition.setdefault(record.partition, []).append(record)
        for partition in partitions or ():
            by_partition.setdefault(partition, [])
        self._records: dict[int, list[SourceRecord]] = {}
        self._offsets: dict[int, list[int]] = {}
        for partition, recs in by_partition.items():
            recs.sort(key=lambda r: r.offset)
            offsets = [r.offset for r in recs]
            if len(set(offsets)) != len(offsets):
                raise InvalidInput(f"partition {partition} has duplicate offsets")
            self._records[partition] = recs
            self._offsets[partition] = offsets
        self.hook = hook

    @property
    def partitions(self) -> tuple[int, ...]:
        return tuple(sorted(self._records))

    def records(self, partition: int) -> Sequence[SourceRecord]:
        return self._records.get(partition, [])

    def all_records(self) -> list[SourceRecord]:
        return [r for p in self.partitions for r in self._records[p]]

    def _check(self, partition: int) -> None:
        if partition not in self._records:
            raise SourceError(f"source has no partition {partition}")

    def validate(self, partition: int, ctx: Context) -> None:
        """Modeled I/O: confirm the partition exists (commit or abort only)."""

        def effect(commit: bool) -> None:
            self._check(partition)

        controlled_call(self.hook, IOCall(Operation.VALIDATE, partition), ctx, effect)

    def next_visible(self, partition: int, position: int) -> SourceRecord | None:
        """The first visible record at or after ``position``, or None."""
        recs = self._records.get(partition, [])
        i = bisect.bisect_left(self._offsets.get(partition, []), position)
        while i < len(recs):
            if recs[i].visible:
                return recs[i]
            i += 1
        return None

    def end(self, partition: int) -> int:
        """One past the last offset of the partition (0 when empty)."""
        offsets = self._offsets.get(partition, [])
        return offsets[-1] + 1 if offsets else 0


__all__ = [
    "SourceValidator",
    "SourceLog",
    "MemorySourceLog",
]
