"""The suite's parallel machines (imported by the tests and the campaign).

* :class:`MemoryStoreInParallel` — the memory store shared by 2-3 threads;
* :class:`LifecyclesInParallel` — real lifetimes over one memory store, any thread
  addressing any lifetime;
* :class:`SqliteStoreInParallel` — the SQLite store over a connection per thread, one file;
* :class:`LifecyclesOnSqlite` — lifetimes on a connection each to one SQLite file;
* the PostgreSQL ones (a connection per thread) are in ``tests/postgres/parallel_machines.py``.

Budgets (examples per test under ``ci``) are in :data:`BUDGET`; every example runs
``runs`` times (k = 1 where the scheduler controls every wait, see the table in
``docs/stateful.md``).
"""

from __future__ import annotations

from remora.testing.parallel import ParallelMachine
from tests.parallel import planted
from tests.parallel.hunt import Planted


class MemoryStoreInParallel(ParallelMachine):
    partitions = 2


class LifecyclesInParallel(ParallelMachine):
    kind = "lifecycle"
    partitions = 1
    lifetimes = 2


class SqliteStoreInParallel(ParallelMachine):
    store = "sqlite"
    partitions = 1


class LifecyclesOnSqlite(ParallelMachine):
    kind = "lifecycle"
    store = "sqlite"
    partitions = 1


MACHINES: tuple[type[ParallelMachine], ...] = (
    MemoryStoreInParallel,
    LifecyclesInParallel,
    SqliteStoreInParallel,
    LifecyclesOnSqlite,
)

BUDGET = {
    "MemoryStoreInParallel": 500,
    "LifecyclesInParallel": 300,
    "SqliteStoreInParallel": 300,
    "LifecyclesOnSqlite": 150,
}
"""Examples per machine under a full-budget profile (the parallel machines' share of the
``ci`` time, measured in docs/stateful.md)."""

PLANTED_CASES = (
    Planted("MemoryLockGap", MemoryStoreInParallel, backend=planted.MemoryLockGap),
    Planted("SqliteReadOutside", SqliteStoreInParallel, backend=planted.SqliteReadOutside),
    Planted("SqliteSplitClaim", SqliteStoreInParallel, backend=planted.SqliteSplitClaim),
    Planted("SqliteDirtyCache", SqliteStoreInParallel, backend=planted.SqliteDirtyCache),
    Planted("StaleSavedToken", LifecyclesInParallel, lifecycle=planted.StaleSavedToken),
)
"""Each planted bug of tests/parallel/planted.py and the parallel machine that hunts it."""

__all__ = [
    "MemoryStoreInParallel",
    "LifecyclesInParallel",
    "SqliteStoreInParallel",
    "LifecyclesOnSqlite",
    "MACHINES",
    "BUDGET",
    "PLANTED_CASES",
]
