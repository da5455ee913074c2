"""The retry policy: how many calls an I/O operation gets and how long to wait between."""

from __future__ import annotations

import attrs

from remora.errors import InvalidInput


def _check_waits(
    inst: RetryPolicy, _attr: attrs.Attribute[tuple[float, ...]], value: tuple[float, ...]
) -> None:
    if inst.max_calls < 1:
        raise InvalidInput("max_calls must be at least 1")
    if len(value) != inst.max_calls - 1 or any(w < 0 for w in value):
        raise InvalidInput("waits must hold one non-negative wait per retry (max_calls - 1)")


@attrs.frozen
class RetryPolicy:
    """At most ``max_calls`` calls; ``waits[i]`` seconds pass before call ``i + 2``.

    The production policy is three calls with 100 ms and 200 ms waits."""

    max_calls: int = 3
    waits: tuple[float, ...] = attrs.field(default=(0.1, 0.2), validator=_check_waits)

    def wait_before(self, call: int) -> float:
        """Seconds to wait before call number ``call`` (2-based; call 1 never waits)."""
        return self.waits[call - 2]


DEFAULT_RETRY = RetryPolicy()


__all__ = [
    "RetryPolicy",
    "DEFAULT_RETRY",
]
