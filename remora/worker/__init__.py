"""The production worker: :class:`Lifecycle`, its retry policy, and the source runner."""

from __future__ import annotations

from remora.worker.lifecycle import PRODUCTION_BUDGET, Lifecycle
from remora.worker.retry import DEFAULT_RETRY, RetryPolicy

__all__ = ["DEFAULT_RETRY", "PRODUCTION_BUDGET", "Lifecycle", "RetryPolicy"]
