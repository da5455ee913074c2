"""A backend whose bug shows once and never again — what an engine that blocks inside a
statement can do to a parallel example (tests/parallel/test_flaky_engine.py)."""

from __future__ import annotations

from remora.context import Context
from remora.store import Token
from remora.store.memory import MemoryBackend

__all__ = ["ONCE", "WrongOnce"]

ONCE = {"left": 0}
"""How many more claims answer wrong (a test sets it)."""


class WrongOnce(MemoryBackend):
    """Its next ``ONCE["left"]`` claims answer an epoch they did not install."""

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        token = super().claim(partition, ctx, commit)
        if ONCE["left"] > 0:
            ONCE["left"] -= 1
            return Token(token.epoch + 5, token.frontier)
        return token
