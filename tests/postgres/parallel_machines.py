"""The parallel machines over PostgreSQL: a connection per thread (the store target) and a
connection per lifetime (the lifecycle target), on a scratch database per test, emptied
before each run.  PostgreSQL's row locks block inside the server, where no scheduling point
reaches: the scheduler lets a blocked thread run free after ``stall_ms`` (counted as a
stall), so a schedule is not forced exactly there — every example runs ``runs`` (k = 2)
times, and a failure says how often its recorded schedule failed again."""

from __future__ import annotations

from remora.testing.parallel import ParallelMachine
from tests.parallel.hunt import Planted
from tests.postgres import parallel_planted


class PgStoreInParallel(ParallelMachine):
    store = "postgres"
    partitions = 1
    runs = 3


class LifecyclesOnPostgres(ParallelMachine):
    kind = "lifecycle"
    store = "postgres"
    partitions = 1
    runs = 3


PG_MACHINES: tuple[type[ParallelMachine], ...] = (PgStoreInParallel, LifecyclesOnPostgres)

PG_BUDGET = {"PgStoreInParallel": 150, "LifecyclesOnPostgres": 40}
"""Examples per machine under a full-budget profile."""

PG_PLANTED_CASES = (
    Planted("PgUnlockedRead", PgStoreInParallel, backend=parallel_planted.PgUnlockedRead),
    Planted("PgSplitProcess", PgStoreInParallel, backend=parallel_planted.PgSplitProcess),
)
"""Each planted bug of tests/postgres/parallel_planted.py and the machine that hunts it."""

__all__ = [
    "PgStoreInParallel",
    "LifecyclesOnPostgres",
    "PG_MACHINES",
    "PG_BUDGET",
    "PG_PLANTED_CASES",
]
