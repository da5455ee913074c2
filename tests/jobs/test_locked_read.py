"""The locked read of a job on PostgreSQL sees what the transaction it waited for wrote.

``DurableStore._lock`` locks the job's row, then reads its attempts, intents and the workers
that are down.  Under READ COMMITTED a statement that waited for a row lock re-reads the
locked row but evaluates everything else in the snapshot it started with: folding the
attempts into the locking statement (as subqueries) made a waiting transaction see the
attempts from before the one it waited for — trace validation found a ``RejectOutcome`` of
an outcome that had just been accepted.  This test holds the row lock in another session,
changes an attempt, lets the store's locked read queue behind it, then commits: the read
must see the change."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

import psycopg

from remora.clock import MonotonicClock
from remora.context import Context
from remora.jobs.durable import Locked, open_postgres
from remora.jobs.io import Actor
from remora.jobs.model import JobsConfig

pytestmark = pytest.mark.services


def test_a_locked_read_that_waited_sees_the_committed_attempts(pg_dsn: str) -> None:
    durable = open_postgres(pg_dsn)
    actor = Actor("t", Context(MonotonicClock()))
    try:
        durable.submit(actor, "j1", "noop", "null", JobsConfig())
        seen: list[Locked] = []
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute("BEGIN")
            other.execute("SELECT 1 FROM remora_jobs_job WHERE id = 'j1' FOR UPDATE")
            other.execute(
                "INSERT INTO remora_jobs_attempt (job, token, worker, reservation, "
                "initial_progress, resumed, adopted_from, transferred, stop, stopped, "
                "committed, pending) VALUES ('j1', 1, 'w1', 'r1', 0, 0, 0, 0, '', 0, 0, '')"
            )
            reader = threading.Thread(
                target=lambda: seen.append(durable.with_lock(actor, "j1", lambda lk: lk))
            )
            reader.start()
            # Commit only once the reader waits for the row lock (not a timing assertion:
            # the loop waits for the server to report the wait).
            for _ in range(500):
                row = other.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                ).fetchone()
                if row and row[0]:
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("the locked read never waited for the row lock")
            other.execute("COMMIT")
            reader.join(timeout=30)
        assert seen, "the locked read did not finish"
        assert set(seen[0].attempts) == {1}, seen[0]
    finally:
        durable.close()
