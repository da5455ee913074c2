"""The durable store's schema on both engines (:data:`remora.jobs.sql.SCHEMA`, migrated by
the shared helper): a database an older Remora created — its worker table without the
heartbeat column ``seen``, its job table without the job's own timeout ``timeout_s`` — is
upgraded on open: a worker registers and beats on it, its jobs read with no timeout, and a
new job keeps the timeout it was submitted with."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.jobs.durable import DurableStore, open_postgres, open_sqlite
from remora.jobs.io import Actor
from remora.jobs.model import JobsConfig
from tests.jobs.first_release import FIRST_RELEASE_JOB as OLD_JOB
from tests.jobs.first_release import first_release_tables as old_tables


def timeouts_kept(durable: DurableStore) -> bool:
    """The older job reads with no timeout; a new one keeps its own."""
    actor = Actor("client", Context(LogicalClock()))
    durable.submit(actor, "new", "h", "null", JobsConfig(), timeout=2.5)
    return durable.job("old").timeout == 0.0 and durable.job("new").timeout == 2.5


def beats(durable: DurableStore) -> bool:
    """An incarnation registers and renews its heartbeat (on the injected clock)."""
    actor = Actor("w1", Context(LogicalClock()))
    durable.register_worker(actor, "w1", 5.0)
    return durable.heartbeat(actor, "w1", 6.0) and durable.liveness(7.0)[1] == [("w1", True, 6.0)]


def seen_column(cur: Any, durable: DurableStore) -> bool:
    return bool(durable.dialect.column_exists(cur, "remora_jobs_worker", "seen"))


def test_an_older_sqlite_database_gets_the_heartbeat_column(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    conn = sqlite3.connect(path)
    for statement in old_tables():
        conn.execute(statement)
    conn.execute("INSERT INTO remora_jobs_config VALUES ('schema_version', '1')")
    conn.execute(OLD_JOB)
    conn.commit()
    durable = open_sqlite(":memory:")  # only for its dialect
    assert not seen_column(conn, durable)
    conn.close()
    durable = open_sqlite(path)
    try:
        assert beats(durable)
        assert timeouts_kept(durable)
    finally:
        durable.close()
    conn = sqlite3.connect(path)
    assert seen_column(conn, durable)
    conn.close()


@pytest.mark.services
def test_an_older_postgres_database_gets_the_heartbeat_column(remora_scratch_database: str) -> None:
    import psycopg

    with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
        for statement in old_tables():
            conn.execute(statement)
        conn.execute("INSERT INTO remora_jobs_config VALUES ('schema_version', '1')")
        conn.execute(OLD_JOB)
    durable = open_postgres(remora_scratch_database, injected_clock=True)
    try:
        assert beats(durable)
        assert timeouts_kept(durable)
        with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
            assert seen_column(conn.cursor(), durable)
    finally:
        durable.close()
