"""The ledger's worker: Remora's lifecycle with a count of what each lifetime applied —
and, for the example's test, a hasty variant with a planted bug."""

from __future__ import annotations

from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import Unavailable, UnknownResult
from remora.store import Token
from remora.worker import Lifecycle


class LedgerLifecycle(Lifecycle):
    """Counts the records this lifetime applied (for its metrics)."""

    applied = 0

    def process(self, partition: int, record: SourceRecord) -> Token:
        token = super().process(partition, record)
        self.applied += 1
        return token


class HastyLedgerLifecycle(LedgerLifecycle):
    """Planted bug: after a failed or unknown write, assumes it committed instead of
    re-reading the store (so it may believe a frontier the store never reached)."""

    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        try:
            return self.store.process(partition, saved, record, ctx)
        except (Unavailable, UnknownResult):
            return Token(saved.epoch, record.offset + 1)
