"""State stores: the durable home of epochs, frontiers, outbox, quarantine and intents.

:class:`StateStore` puts any :class:`Backend` behind the controlled-I/O seam.  Backends:
:class:`MemoryStore` (simulation), :class:`SqliteStore` (embedded default) and — with the
``postgres`` extra — ``remora.store.postgres.PostgresStore``.
"""

from __future__ import annotations

from remora.store.base import (
    Backend,
    OwnershipStore,
    PartitionRow,
    PartitionState,
    PartitionSummary,
    PartitionTail,
    StateStore,
    StoreSnapshot,
    Token,
    check_fence,
)
from remora.store.memory import MemoryBackend, MemoryStore
from remora.store.sqlite import SqliteBackend, SqliteStore

__all__ = [
    "Backend",
    "MemoryBackend",
    "MemoryStore",
    "OwnershipStore",
    "PartitionRow",
    "PartitionState",
    "PartitionSummary",
    "PartitionTail",
    "SqliteBackend",
    "SqliteStore",
    "StateStore",
    "StoreSnapshot",
    "Token",
    "check_fence",
]
