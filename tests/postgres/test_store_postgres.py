"""What the PostgreSQL backend adds to the shared contract: schema ownership, error
classification on a real server, cancellation through the driver, connection reuse."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from remora.clock import MonotonicClock
from remora.context import Context
from remora.errors import (
    Canceled,
    InvalidInput,
    LifetimeRetired,
    StoreError,
    Unavailable,
)
from remora.source import MemorySourceLog
from remora.store import Token
from remora.store.postgres import (
    MIGRATION_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
    PostgresBackend,
    PostgresStore,
    describe_dsn,
)
from remora.worker import Lifecycle
from tests.common.support import amendment, records
from tests.postgres.locks import BOUND, in_thread, wait_for_waiters

pytestmark = pytest.mark.services

P = 0


def ctx() -> Context:
    return Context(MonotonicClock())


def recs() -> list[Any]:
    return records(P, amendment("a", "submit", 1, n=1), amendment("a", "correct", 2, n=2))


# -- schema -------------------------------------------------------------------------


def test_schema_is_versioned_and_idempotent(remora_scratch_database: str) -> None:
    PostgresStore(remora_scratch_database).close()
    store = PostgresStore(remora_scratch_database)  # a second start changes nothing
    assert store.backend.schema_version() == SCHEMA_VERSION
    store.close()
    with psycopg.connect(remora_scratch_database) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'remora_%'"
            ).fetchall()
        }
    assert tables == {
        "remora_meta",
        "remora_partition",
        "remora_subject",
        "remora_outbox",
        "remora_quarantine",
        "remora_intent",
        "remora_source",
    }


def test_newer_schema_is_rejected(remora_scratch_database: str) -> None:
    PostgresStore(remora_scratch_database).close()
    with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
        conn.execute("UPDATE remora_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(InvalidInput, match="schema version 99 is newer"):
        PostgresStore(remora_scratch_database)


def test_status_mode_never_creates_a_schema(remora_scratch_database: str) -> None:
    with pytest.raises(InvalidInput, match="no Remora schema"):
        PostgresBackend(remora_scratch_database, migrate=False)
    PostgresStore(remora_scratch_database).close()
    PostgresBackend(remora_scratch_database, migrate=False).close()


def test_concurrent_first_starts_all_succeed(remora_scratch_database: str) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def start() -> None:
        barrier.wait(BOUND)
        try:
            PostgresStore(remora_scratch_database).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND)
    assert errors == []


class NoMigrationLock(PostgresBackend):
    """Planted bug: migrations do not serialize on the advisory lock."""

    def _lock_schema(self, cur: psycopg.Cursor[Any]) -> None:
        return None


@pytest.mark.parametrize(("backend", "fails"), [(PostgresBackend, False), (NoMigrationLock, True)])
def test_migration_racing_another_process(
    remora_scratch_database: str, backend: type[PostgresBackend], fails: bool
) -> None:
    """Another process is mid-migration (tables created, not committed) when we start."""
    with psycopg.connect(remora_scratch_database, autocommit=True) as other:
        other.execute("BEGIN")
        other.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        other.execute("CREATE TABLE remora_meta (key text PRIMARY KEY, value text NOT NULL)")
        for statement in MIGRATIONS[0]:
            other.execute(statement)
        other.execute("INSERT INTO remora_meta VALUES ('schema_version', '1')")
        thread, out = in_thread(lambda: backend(remora_scratch_database).close())
        with psycopg.connect(remora_scratch_database, autocommit=True) as watcher:
            wait_for_waiters(watcher, 1)  # our start waits (advisory lock or catalog row)
        other.execute("COMMIT")
        thread.join(BOUND)
    assert not thread.is_alive()
    if fails:
        assert isinstance(out.error, StoreError), out
    else:
        assert out.error is None, out


# -- errors -------------------------------------------------------------------------


def test_bad_dsn_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="bad PostgreSQL DSN"):
        PostgresStore("this is not a dsn")


def test_unreachable_server_is_unavailable(remora_scratch_database: str) -> None:
    dsn = psycopg.conninfo.make_conninfo(remora_scratch_database, port="1", connect_timeout="2")
    with pytest.raises(Unavailable, match="cannot connect to PostgreSQL") as info:
        PostgresStore(dsn)
    assert "\n" not in str(info.value)


def test_describe_dsn_hides_the_password() -> None:
    shown = describe_dsn("postgresql://alice:s3cret@db.example:6543/remora")
    assert shown == "host=db.example port=6543 dbname=remora user=alice"


def hold_partition_lock(dsn: str) -> psycopg.Connection[Any]:
    blocker = psycopg.connect(dsn, autocommit=True)
    blocker.execute("BEGIN")
    blocker.execute("SELECT * FROM remora_partition WHERE partition = %s FOR UPDATE", (P,))
    return blocker


def test_lock_timeout_is_unavailable_without_effect(remora_scratch_database: str) -> None:
    store = PostgresStore(remora_scratch_database, lock_timeout=0.1)
    token = store.claim(P, ctx())
    blocker = hold_partition_lock(remora_scratch_database)
    try:
        with pytest.raises(Unavailable, match="lock timeout"):
            store.process(P, token, recs()[0], ctx())
        with pytest.raises(Unavailable):
            store.claim(P, ctx())
    finally:
        blocker.close()
    assert store.observe(P, ctx()) == Token(1, 0)
    store.process(P, token, recs()[0], ctx())  # the store recovered its connections
    store.close()


def test_terminated_connection_before_commit_is_unavailable(remora_scratch_database: str) -> None:
    """The server kills our session while we wait for the row lock: nothing was committed,
    so this is plain unavailability, never an unknown result."""
    store = PostgresStore(remora_scratch_database)
    token = store.claim(P, ctx())
    blocker = hold_partition_lock(remora_scratch_database)
    try:
        thread, out = in_thread(lambda: store.process(P, token, recs()[0], ctx()))
        wait_for_waiters(blocker, 1)
        blocker.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        thread.join(BOUND)
    finally:
        blocker.close()
    assert isinstance(out.error, Unavailable), out
    assert store.snapshot().outbox == ()
    assert store.process(P, token, recs()[0], ctx()) == Token(1, 1)
    store.close()


# -- cancellation ---------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["claim", "process"])
def test_cancel_ends_a_statement_blocked_on_the_row_lock(
    remora_scratch_database: str, operation: str
) -> None:
    store = PostgresStore(
        remora_scratch_database, lock_timeout=60.0
    )  # only the cancel can end the wait
    token = store.claim(P, ctx())
    blocker = hold_partition_lock(remora_scratch_database)
    c = ctx()
    try:
        if operation == "claim":
            thread, out = in_thread(lambda: store.claim(P, c))
        else:
            thread, out = in_thread(lambda: store.process(P, token, recs()[0], c))
        wait_for_waiters(blocker, 1)
        c.cancel()
        thread.join(BOUND)
        assert not thread.is_alive()
        assert isinstance(out.error, Canceled), out
    finally:
        blocker.close()
    assert store.observe(P, ctx()) == Token(1, 0)  # no effect, and the store still works
    store.close()


def test_lifecycle_stop_interrupts_blocked_assign(remora_scratch_database: str) -> None:
    store = PostgresStore(remora_scratch_database, lock_timeout=60.0)
    store.claim(P, ctx())
    life = Lifecycle(store, MemorySourceLog(recs(), [P]), name="blocked")
    blocker = hold_partition_lock(remora_scratch_database)
    try:
        thread, out = in_thread(lambda: life.assign([P]))
        wait_for_waiters(blocker, 1)
        life.stop()  # does not need the mutex the blocked assign holds
        thread.join(BOUND)
        assert not thread.is_alive()
        assert isinstance(out.error, Canceled), out
    finally:
        blocker.close()
    with pytest.raises(LifetimeRetired):
        life.assign([P])
    assert store.observe(P, ctx()) == Token(1, 0)
    store.close()


def test_connections_are_reused_and_closed(remora_scratch_database: str) -> None:
    store = PostgresStore(remora_scratch_database)
    token = store.claim(P, ctx())
    for record in recs():
        token = store.process(P, token, record, ctx())
        store.observe(P, ctx())

    def sessions() -> int:
        with psycopg.connect(remora_scratch_database) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 'remora'"
            ).fetchone()
            return int(row[0]) if row else -1

    assert sessions() == 1  # one thread, sequential calls: one connection
    store.close()
    give_up = time.monotonic() + BOUND
    while sessions() != 0:  # the server ends a closed connection's session asynchronously
        assert time.monotonic() < give_up, "closed connections' sessions linger"
        time.sleep(0.01)
    with pytest.raises(Unavailable, match="closed"):
        store.observe(P, ctx())
