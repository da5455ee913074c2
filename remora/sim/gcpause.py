"""Replays run with the cyclic garbage collector paused.

Why: a replay keeps millions of long-lived objects — the parsed source, the oracle's fold of
it, one event and one attempt per I/O call — and allocates many more short-lived ones.  Every
full pass of CPython's cyclic collector walks all of them, so the passes a long run triggers
cost more the longer it gets: at 100k source records the collector took about half of the
replay (45.9 s with it, 21.5 s without, on the benchmark of ``benchmarks/replay_scale.py``).

Pausing it changes nothing a report can see: reference counting still frees every acyclic
object the moment it is dropped, and the few cycles a run makes (an exception and the frame
of its traceback, one per failed call) are collected once the collector is back on.  The
previous state is restored on the way out, so nesting (``run_trace`` → ``replay``) and a
caller that had disabled the collector itself are both respected.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block, then restore its previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = [
    "collector_paused",
]
