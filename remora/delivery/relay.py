"""The relay: outbox → view, in ``seq`` order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from remora.domain import OutboxEntry


class OutboxReader(Protocol):
    def outbox_after(self, partition: int, seq: int, limit: int) -> Sequence[OutboxEntry]:
        """Entries of ``partition`` with seq > ``seq``, in seq order, at most ``limit``."""
        ...


class ViewStore(Protocol):
    def delivered(self, partition: int) -> int: ...

    def apply(self, entry: OutboxEntry) -> bool: ...


class Relay:
    def __init__(self, outbox: OutboxReader, view: ViewStore, batch: int = 256) -> None:
        self.outbox = outbox
        self.view = view
        self.batch = batch

    def deliver(self, partitions: Iterable[int]) -> int:
        """Deliver everything pending for ``partitions``; returns how many entries applied."""
        applied = 0
        for partition in partitions:
            while True:
                entries = self.outbox.outbox_after(
                    partition, self.view.delivered(partition), self.batch
                )
                if not entries:
                    break
                for entry in entries:
                    applied += self.view.apply(entry)
        return applied


__all__ = [
    "OutboxReader",
    "ViewStore",
    "Relay",
]
