"""The materialized view: subject → latest version, live or withdrawn, body."""

from __future__ import annotations

import threading

import attrs

from remora.domain import OutboxEntry
from remora.errors import RemoraError


class DeliveryGap(RemoraError):
    """An outbox entry arrived out of ``seq`` order (an earlier one is missing)."""


@attrs.frozen
class ViewRow:
    partition: int
    subject: str
    version: int
    status: str  # "live" | "withdrawn"
    body: str


def materialize(entry: OutboxEntry) -> ViewRow:
    """The view row an outbox entry leaves behind (the latest entry of a subject wins)."""
    status = "withdrawn" if entry.op == "withdraw" else "live"
    return ViewRow(entry.partition, entry.subject, entry.version, status, entry.body)


class MemoryView:
    """An in-memory view with per-partition delivered cursors."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[int, str], ViewRow] = {}
        self._delivered: dict[int, int] = {}

    def delivered(self, partition: int) -> int:
        return self._delivered.get(partition, 0)

    def apply(self, entry: OutboxEntry) -> bool:
        """Apply one entry; False if it was already delivered."""
        with self._lock:
            cursor = self._delivered.get(entry.partition, 0)
            if entry.seq <= cursor:
                return False
            if entry.seq != cursor + 1:
                raise DeliveryGap(
                    f"partition {entry.partition}: seq {entry.seq} after delivered {cursor}"
                )
            self._rows[(entry.partition, entry.subject)] = materialize(entry)
            self._delivered[entry.partition] = entry.seq
            return True

    def rows(self) -> tuple[ViewRow, ...]:
        with self._lock:
            return tuple(self._rows[k] for k in sorted(self._rows))


__all__ = [
    "DeliveryGap",
    "ViewRow",
    "materialize",
    "MemoryView",
]
