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

import contextlib
import threading
import time
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

import psycopg

from remora.clock import MonotonicClock
from remora.context import Context
from remora.jobs.durable import Locked, open_postgres
from remora.jobs.guards import Change
from remora.jobs.io import Actor
from remora.jobs.model import AttemptId, JobsConfig, NotEnabled, StageInfo
from remora.jobs.postgres import PostgresTarget

pytestmark = pytest.mark.services


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipeline", "no-pipeline"])
def test_a_locked_read_that_waited_sees_the_committed_attempts(
    remora_scratch_database: str, pipelined: bool
) -> None:
    """Also without pipeline mode (libpq before 14): one round trip per statement."""
    durable = open_postgres(remora_scratch_database)
    durable.backend.pipelined = pipelined  # type: ignore[attr-defined]
    actor = Actor("t", Context(MonotonicClock()))
    try:
        durable.submit(actor, "j1", "noop", "null", JobsConfig())
        seen: list[Locked] = []
        with psycopg.connect(remora_scratch_database, autocommit=True) as other:
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


def test_an_extra_read_under_the_lock_sees_what_the_lock_holder_committed(
    remora_scratch_database: str,
) -> None:
    """``transact(…, also=…)`` (``AcceptSuccess``'s stage read when the target shares the
    durable store's database) sends the extra read with the locked read, before the lock is
    granted; as a statement of its own the server runs it only once the lock was granted,
    with a fresh snapshot, so it sees the stage row the lock holder committed."""
    durable = open_postgres(remora_scratch_database)
    target = PostgresTarget(remora_scratch_database)
    actor = Actor("t", Context(MonotonicClock()))
    try:
        durable.submit(actor, "j1", "noop", "null", JobsConfig())
        a = AttemptId("j1", 1)
        also = target.locked_info(durable, a)
        assert also is not None
        seen: list[Any] = []

        def decide(lk: Locked) -> Change:
            seen.append(lk.also)
            raise NotEnabled("only looking")

        def run() -> None:
            with contextlib.suppress(NotEnabled):
                durable.transact(actor, "j1", decide, also=also)

        with psycopg.connect(remora_scratch_database, autocommit=True) as other:
            other.execute("BEGIN")
            other.execute("SELECT 1 FROM remora_jobs_job WHERE id = 'j1' FOR UPDATE")
            other.execute(
                "INSERT INTO remora_jobs_stage (job, token, progress, data) "
                "VALUES ('j1', 1, 3, 'x')"
            )
            reader = threading.Thread(target=run)
            reader.start()
            _await_lock_wait(other)
            other.execute("COMMIT")
            reader.join(timeout=30)
        assert seen, "the locked read did not finish"
        assert target.info_from(actor, a, seen[0]) == StageInfo(3, False), seen[0]
    finally:
        target.close()
        durable.close()


def _await_lock_wait(other: psycopg.Connection[Any]) -> None:
    """Return once a session waits for a lock (the server reports the wait)."""
    for _ in range(500):
        row = other.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        ).fetchone()
        if row and row[0]:
            return
        time.sleep(0.01)
    raise AssertionError("the locked read never waited for the row lock")


def test_the_job_row_lock_holds_the_row_and_reads_nothing_else(
    remora_scratch_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``with_job_lock`` (``CleanTerminalCoordination``, ``PublishCancelNotice``, …): the
    job's row is locked while the block runs — another session cannot lock it — and the row
    lock is the transaction's only read (``BEGIN``, the lock, ``ROLLBACK``).  Fails if the
    light lock forgets ``FOR UPDATE`` or reads the attempts after all."""
    durable = open_postgres(remora_scratch_database)
    actor = Actor("t", Context(MonotonicClock()))
    try:
        durable.submit(actor, "j1", "noop", "null", JobsConfig())
        statements: list[str] = []
        execute = psycopg.Cursor.execute
        other = psycopg.connect(remora_scratch_database, autocommit=True)

        def counted(self: Any, query: Any, *a: Any, **k: Any) -> Any:
            if self.connection is not other:
                statements.append(" ".join(str(query).split())[:40])
            return execute(self, query, *a, **k)

        def block(row: Any) -> str:
            assert row.id == "j1" and row.version == 1
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT 1 FROM remora_jobs_job WHERE id = 'j1' FOR UPDATE NOWAIT")
            return "done"

        monkeypatch.setattr(psycopg.Cursor, "execute", counted)
        assert durable.with_job_lock(actor, "j1", block) == "done"
        monkeypatch.undo()
        assert len(statements) == 3, statements
        assert actor.held is None
        other.close()
    finally:
        durable.close()
