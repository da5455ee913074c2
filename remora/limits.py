"""The bounds every Remora input is held to, in one place.

Each bound is what *every* store and every clock can run, so that an input one parser
accepts runs the same on memory, SQLite and PostgreSQL — and the generators use the very
same bounds, so nothing Remora writes is refused when it is read back:

* offsets, lifetime ids and seeds fit a signed 64-bit integer (SQLite ``INTEGER``,
  PostgreSQL ``bigint``), and an offset leaves room for its frontier, ``offset + 1``;
* a partition number of a source file fits PostgreSQL's ``integer`` column;
* delays, retry waits and budgets are logical milliseconds on a clock that sleeps, so they
  stay below a day (a budget of 10^30 ms overflows the clock's ``float`` seconds and looks like
  a worker exception, not like a bad input);
* a fault selector's ``call`` and the number of worker threads stay far below what a machine
  can run.
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1
"""The largest value a 64-bit store column holds."""

MAX_OFFSET = INT64_MAX - 1
"""The largest record offset: its frontier, ``offset + 1``, must fit a 64-bit column too."""

MAX_ID = INT64_MAX
"""The largest lifetime (worker or replacement) id and seed."""

MAX_PARTITION = 2**31 - 1
"""The largest partition number of a source file (PostgreSQL ``integer``)."""

MAX_TRACE_PARTITIONS = 64
"""The most partitions a simulated trace configures."""

MAX_STEPS = 100_000
"""The most steps a trace may configure (and a generator may be asked for)."""

MAX_DELAY_MS = 3_600_000
"""The longest fault delay, in logical milliseconds (one hour)."""

MAX_WAIT_MS = 3_600_000
"""The longest retry wait, in logical milliseconds (one hour)."""

MAX_BUDGET_MS = 86_400_000
"""The longest per-call budget, in logical milliseconds (one day)."""

MAX_CALL = 1_000_000
"""The highest call number a fault selector may select."""

MAX_WORKERS = 256
"""The most worker lifetimes (threads) ``remora run --workers`` starts."""


__all__ = [
    "INT64_MAX",
    "MAX_OFFSET",
    "MAX_ID",
    "MAX_PARTITION",
    "MAX_TRACE_PARTITIONS",
    "MAX_STEPS",
    "MAX_DELAY_MS",
    "MAX_WAIT_MS",
    "MAX_BUDGET_MS",
    "MAX_CALL",
    "MAX_WORKERS",
]
