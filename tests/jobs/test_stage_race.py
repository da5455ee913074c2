"""A zombie's stage write racing ``CleanupStage`` on PostgreSQL (two connections, interleaved
by hand).  Under READ COMMITTED the write's refusal check (``NOT EXISTS`` a cleaned row or a
row at or ahead of its progress) reads the snapshot its statement started with: while the
cleanup's transaction is open its ``cleaned = 1`` is invisible, and a row at a new progress
does not conflict with the rows the cleanup locked.  The write went in beside the cleanup —
a cleaned attempt with live staging that :meth:`PostgresTarget.data` returns, although
``CleanupStage`` promises that a late write of a cleaned attempt is refused.  Both now take
the attempt's transaction-scoped advisory lock first."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

import psycopg

from remora.clock import MonotonicClock
from remora.context import Context
from remora.jobs.durable import open_postgres
from remora.jobs.io import Actor
from remora.jobs.model import AttemptId, NotEnabled
from remora.jobs.postgres import PostgresTarget

pytestmark = pytest.mark.services


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipeline", "no-pipeline"])
def test_a_write_racing_the_cleanup_of_its_attempt_is_refused(
    remora_scratch_database: str, pipelined: bool
) -> None:
    open_postgres(remora_scratch_database).close()  # the schema
    cleaner, zombie = (
        PostgresTarget(remora_scratch_database),
        PostgresTarget(remora_scratch_database),
    )
    cleaner.backend.pipelined = zombie.backend.pipelined = pipelined
    a = AttemptId("j1", 1)
    clock = MonotonicClock()
    try:
        zombie.write(Actor("w1", Context(clock)), a, 1, b"half")
        # The cleanup stops before its COMMIT until the zombie's write has had its chance.
        in_window, go_on = threading.Event(), threading.Event()
        commit = cleaner.backend._commit

        def paused_commit(cur: Any) -> None:
            in_window.set()
            go_on.wait(30)
            commit(cur)

        cleaner.backend._commit = paused_commit  # type: ignore[method-assign]
        cleaning = threading.Thread(
            target=cleaner.cleanup, args=(Actor("reconciler", Context(clock)), a)
        )
        cleaning.start()
        assert in_window.wait(30)
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                zombie.write(Actor("w1", Context(clock)), a, 2, b"zombie")
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        writing = threading.Thread(target=write)
        writing.start()
        writing.join(1.0)  # it ends here without the lock; with it, it waits for the cleanup
        go_on.set()
        cleaning.join(30)
        writing.join(30)
        assert not cleaning.is_alive() and not writing.is_alive()
        with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
            live = conn.execute(
                "SELECT progress FROM remora_jobs_stage WHERE job = 'j1' AND token = 1 "
                "AND cleaned = 0"
            ).fetchall()
        assert live == [], "a cleaned attempt kept staging written beside its cleanup"
        assert zombie.data(a) is None
        info = zombie.info(None, a)
        assert info is not None and info.cleaned
        assert len(outcome) == 1 and isinstance(outcome[0], NotEnabled), outcome
    finally:
        cleaner.close()
        zombie.close()
