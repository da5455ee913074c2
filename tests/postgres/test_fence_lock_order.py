"""Fence lock orders on the real server: a stale owner's process races a new owner's claim.

Two lifetimes on separate stores (separate connections) share partition 0.  A third
connection holds the partition row's lock; the racing calls queue behind it in a chosen
order (PostgreSQL grants a row lock to its waiters first come, first served); then the
blocker lets go:

* ``process-first``: the old owner's process locks the row first and commits — legitimately,
  it still owned the epoch — and the claim installs epoch 2 at the advanced frontier; the old
  owner's *next* process is fenced;
* ``claim-first``: the claim installs epoch 2 first; the old owner's process then locks the
  updated row, reads epoch 2 and is fenced: it never commits.

The new owner then finishes the source and the oracle holds: every record exactly once.
Planted bugs (no fence check; reading the partition row without ``FOR UPDATE``) must make
this check fail.
"""

from __future__ import annotations

import psycopg
import pytest

from remora.domain import SourceRecord
from remora.errors import Fenced, RemoraError
from remora.sim.checker import Checker
from remora.source import MemorySourceLog
from remora.store import StateStore, Token
from remora.store.postgres import LOCK_PARTITION_SQL, PostgresBackend, PostgresStore
from remora.worker import Lifecycle
from tests.common.workload import generate
from tests.postgres.locks import BOUND, NoFence, in_thread, wait_for_waiters

pytestmark = pytest.mark.services

P = 0


def source() -> list[SourceRecord]:
    return [r for r in generate(11, 1, 8, subjects=3) if r.visible]


def race(dsn: str, order: str, stale_backend: type[PostgresBackend]) -> list[str]:
    """Run one lock-order race; returns the problems found (empty: the fence held)."""
    records = source()
    log = MemorySourceLog(records, [P])
    old_store = StateStore(stale_backend(dsn))
    new_store = PostgresStore(dsn)
    problems: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as blocker:
        try:
            old = Lifecycle(old_store, log, name="old")
            new = Lifecycle(new_store, log, name="new")
            old.assign([P])
            old.seek(P)
            old.process(P, records[0])  # frontier 1 under epoch 1

            blocker.execute("BEGIN")
            blocker.execute("SELECT * FROM remora_partition WHERE partition = %s FOR UPDATE", (P,))
            first, second = (
                (lambda: old.process(P, records[1]), lambda: new.assign([P]))
                if order == "process-first"
                else (lambda: new.assign([P]), lambda: old.process(P, records[1]))
            )
            t1, out1 = in_thread(first)
            wait_for_waiters(blocker, 1)
            t2, out2 = in_thread(second)
            wait_for_waiters(blocker, 2)
            blocker.execute("ROLLBACK")  # the queued calls now take the row lock in order
            t1.join(BOUND)
            t2.join(BOUND)
            assert not t1.is_alive() and not t2.is_alive(), "a racing call hung"
            processed, claimed = (out1, out2) if order == "process-first" else (out2, out1)
            if claimed.error is not None:
                return [f"the claim failed: {claimed.error!r}"]
            new_token = claimed.value
            assert isinstance(new_token, dict)
            if order == "process-first":
                if processed.error is not None:
                    problems.append(f"the owner's process failed: {processed.error!r}")
                if new_token != {P: Token(2, records[1].offset + 1)}:
                    problems.append(f"claim after the commit returned {new_token}")
                try:  # the old owner is stale now: its next process must be fenced
                    old.process(P, records[2])
                    problems.append("the stale owner committed its next record")
                except Fenced:
                    pass
            else:
                if not isinstance(processed.error, Fenced):
                    problems.append(f"the stale owner's process ended with {processed!r}")
                    if processed.error is None:
                        problems.append("the stale owner committed after the claim")
                if new_token != {P: Token(2, records[0].offset + 1)}:
                    problems.append(f"claim before the process returned {new_token}")

            # The new owner finishes from the durable frontier.
            try:
                frontier = new.seek(P)
                for record in records:
                    if record.offset >= frontier:
                        new.process(P, record)
            except RemoraError as exc:
                problems.append(f"the new owner could not finish: {exc!r}")
            problems += Checker(records, [P]).final_problems(new_store.snapshot())
        finally:
            old_store.close()
            new_store.close()
    return problems


@pytest.mark.parametrize("order", ["process-first", "claim-first"])
def test_stale_owner_is_fenced_in_both_lock_orders(
    remora_scratch_database: str, order: str
) -> None:
    assert race(remora_scratch_database, order, PostgresBackend) == []


class NoRowLock(PostgresBackend):
    """Planted bug: the partition row is read without ``FOR UPDATE`` (the fence then checks
    a row a concurrent claim is about to change)."""

    lock_sql = LOCK_PARTITION_SQL.replace("FOR UPDATE OF p", "")


@pytest.mark.parametrize(
    ("backend", "order"),
    [
        (NoFence, "process-first"),
        (NoFence, "claim-first"),
        (NoRowLock, "claim-first"),
    ],
)
def test_planted_fence_bugs_are_caught(
    remora_scratch_database: str, backend: type[PostgresBackend], order: str
) -> None:
    problems = race(remora_scratch_database, order, backend)
    assert any("stale owner" in p for p in problems), problems
