"""The parallel machines over PostgreSQL: a connection per thread (the store target) and a
connection per lifetime (the lifecycle target), on a scratch database per test, emptied
before each run.  PostgreSQL's row locks block inside the server, where no scheduling point
reaches: the scheduler lets a blocked thread run free after ``stall_ms`` (counted as a
stall), so a schedule is not forced exactly there — every example runs ``runs`` (k = 2)
times, and a failure says how often its recorded schedule failed again."""

from __future__ import annotations

from remora.testing.parallel import ParallelMachine


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

PG_BUDGET = {"PgStoreInParallel": 60, "LifecyclesOnPostgres": 30}
"""Examples per machine under a full-budget profile."""

__all__ = ["PgStoreInParallel", "LifecyclesOnPostgres", "PG_MACHINES", "PG_BUDGET"]
