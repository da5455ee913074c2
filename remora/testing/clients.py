"""An in-process source client for tests and examples."""

from __future__ import annotations

from collections.abc import Sequence

from remora.domain import SourceRecord
from remora.source.cursor import FetchCursors
from remora.source.log import SourceLog
from remora.worker.runner import AssignCallback


class LogClient:
    """An in-process source client over a source log (usually a
    :class:`~remora.source.MemorySourceLog`).

    It plays a single-member consumer group: the first ``poll`` invokes ``on_assigned``
    with ``partitions`` (all of the log's by default); ``close`` invokes ``on_revoked``."""

    def __init__(self, log: SourceLog, partitions: Sequence[int] | None = None) -> None:
        self.log = log
        self.partitions = list(log.partitions if partitions is None else partitions)
        self.cursors = FetchCursors(log)
        self._on_assigned: AssignCallback | None = None
        self._on_revoked: AssignCallback | None = None
        self._assigned = False

    def subscribe(self, on_assigned: AssignCallback, on_revoked: AssignCallback) -> None:
        self._on_assigned, self._on_revoked = on_assigned, on_revoked

    def seek(self, partition: int, offset: int) -> None:
        self.cursors.seek(partition, offset)

    def poll(self, max_records: int) -> list[SourceRecord]:
        if not self._assigned and self._on_assigned is not None:
            self._assigned = True
            self._on_assigned(self.partitions)
        return self.cursors.fetch_round_robin(self.partitions, max_records)

    def close(self) -> None:
        if self._assigned and self._on_revoked is not None:
            self._assigned = False
            self._on_revoked(self.partitions)
        self.cursors.clear()


__all__ = [
    "LogClient",
]
