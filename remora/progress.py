"""Progress lines for long commands: one helper, on stderr, only for a person watching.

``remora run``, ``corpus``, ``evidence``, ``reduce``, ``explore`` and ``sim-worker`` can run
for minutes.  They report through :class:`Progress`, which draws one line that rewrites
itself (``\\r`` and clear-to-end-of-line) on stderr — never on stdout, whose JSON or table
other programs read — and only when stderr is a terminal: piped or redirected output stays
byte-for-byte what it was.  ``--quiet`` turns it off on a terminal too.

With a known total the line carries the share done, the rate and an estimate of the time
left (``ETA``), from the average rate since the start.  Updates are throttled (two a second
by default; ``REMORA_PROGRESS_INTERVAL`` sets the seconds between redraws, 0 draws every
update — what the pty tests use, so what they see does not depend on the machine's speed),
so reporting from a hot loop costs a clock read.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

CLEAR = "\r\033[K"
"""Back to the start of the line and clear it."""


def _clock() -> float:
    return time.monotonic()


def default_interval() -> float:
    """Seconds between redraws: ``REMORA_PROGRESS_INTERVAL`` when it is a number >= 0,
    else 0.5."""
    try:
        value = float(os.environ.get("REMORA_PROGRESS_INTERVAL", "0.5"))
    except ValueError:
        return 0.5
    return value if 0 <= value < float("inf") else 0.5


def duration(seconds: float) -> str:
    """``seconds`` as ``1h02m``, ``3m05s`` or ``42s``."""
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class Progress:
    """One self-rewriting progress line on a terminal (module docstring).

    ``enabled`` None (the default) means: when ``stream`` is a terminal.  ``quiet`` turns it
    off whatever the stream."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        quiet: bool = False,
        enabled: bool | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = _clock,
    ) -> None:
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = _is_terminal(self.stream)
        self.enabled = enabled and not quiet
        self.interval = default_interval() if interval is None else interval
        self.clock = clock
        self.started = clock()
        self._last: float | None = None
        self._shown = False

    def due(self) -> bool:
        """Whether an update now would be drawn (callers may skip computing one)."""
        if not self.enabled:
            return False
        return self._last is None or self.clock() - self._last >= self.interval

    def update(
        self,
        message: str,
        *,
        done: int | None = None,
        total: int | None = None,
        unit: str = "",
        force: bool = False,
    ) -> None:
        """Draw ``message`` (with ``done``/``total``: count, share, rate and ETA)."""
        if not self.enabled or not (force or self.due()):
            return
        now = self.clock()
        self._last = now
        line = message
        if done is not None:
            line += f" {self.counts(done, total, unit, now)}"
        self.stream.write(CLEAR + line)
        self.stream.flush()
        self._shown = True

    def counts(self, done: int, total: int | None, unit: str, now: float) -> str:
        """``done/total unit (pct%), rate/s, ETA …`` (the parts that are known)."""
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        suffix = f" {unit}" if unit else ""
        if total is None or total <= 0:
            return f"{done}{suffix}, {rate:.0f}/s"
        share = min(done / total, 1.0)
        text = f"{done}/{total}{suffix} ({share:.0%}), {rate:.0f}/s"
        if 0 < done < total and rate > 0:
            text += f", ETA {duration((total - done) / rate)}"
        return text

    def clear(self) -> None:
        """Clear the line whoever drew it (e.g. a library given this stream)."""
        if self.enabled:
            self.stream.write(CLEAR)
            self.stream.flush()

    def done(self) -> None:
        """Clear the line (before the command's own output)."""
        if self.enabled and self._shown:
            self.stream.write(CLEAR)
            self.stream.flush()
            self._shown = False


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        return False


__all__ = [
    "CLEAR",
    "default_interval",
    "duration",
    "Progress",
]
