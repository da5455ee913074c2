"""Remora: fenced, exactly-once work ownership.

The library has two halves that share one production code path:

* the worker lifecycle (:mod:`remora.worker`) that owns source partitions under fencing
  epochs and advances a durable frontier through a state store (:mod:`remora.store`);
* the deterministic simulation (:mod:`remora.sim`) and the Hypothesis stateful suite
  (:mod:`remora.testing`) that drive that same lifecycle through controlled I/O and check it
  against an independent oracle (:mod:`remora.oracle`).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
