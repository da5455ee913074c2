"""Delivery: the relay that moves outbox entries, in ``seq`` order, to a materialized view.

The relay reads each partition's outbox after the view's delivered cursor and hands the
entries to the view, which applies each one exactly once (an entry at or below the cursor is
a duplicate and ignored; a gap is an error).  Delivery is therefore idempotent: re-running it,
or running it concurrently with itself, never applies an entry twice.
"""

from __future__ import annotations

from remora.delivery.relay import OutboxReader, Relay, ViewStore
from remora.delivery.view import DeliveryGap, MemoryView, ViewRow, materialize

__all__ = [
    "DeliveryGap",
    "MemoryView",
    "OutboxReader",
    "Relay",
    "ViewRow",
    "ViewStore",
    "materialize",
]
