"""A lost COMMIT reply of a durable job transition on the real PostgreSQL server (through
the TCP proxy of ``tests/postgres/proxy.py``): the store reports an unknown result and
resolves it by re-reading the transition log — never by a blind retry — and the run stays a
refinement of the spec, step by step."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

import psycopg

from remora.clock import LogicalClock, MonotonicClock
from remora.context import Context
from remora.errors import StoreError, Unavailable
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import open_postgres
from remora.jobs.guards import Change
from remora.jobs.io import Actor
from remora.jobs.model import JobsConfig, Outcome, Phase
from remora.jobs.postgres import PostgresTarget
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget, MemoryVault
from tests.jobs import scenarios as A
from tests.postgres.proxy import Cut, PgProxy

pytestmark = pytest.mark.services


@pytest.fixture
def proxy(remora_scratch_database: str) -> Iterator[PgProxy]:
    proxy = PgProxy(remora_scratch_database)
    yield proxy
    proxy.close()


@pytest.mark.parametrize("same_database", [False, True], ids=["memory-target", "pg-target"])
@pytest.mark.parametrize(("cut", "committed"), [(Cut.AFTER, True), (Cut.BEFORE, False)])
def test_lost_accept_success_commit(
    remora_scratch_database: str, proxy: PgProxy, cut: Cut, committed: bool, same_database: bool
) -> None:
    """The transition's writes travel with its COMMIT (pipeline mode); with the target in
    the durable store's database its stage read travels with the locked read too."""

    def build(clock: LogicalClock, config: JobsConfig) -> Stores:
        return Stores(
            open_postgres(proxy.dsn(remora_scratch_database)),
            MemoryCoordination(clock, config),
            PostgresTarget(proxy.dsn(remora_scratch_database)) if same_database else MemoryTarget(),
            MemoryVault(),
            clock,
            config,
        )

    A.BACKENDS = build
    try:
        run = A.Run()
        a = run.running()
        run.ok(lambda: run.w1.advance(a, 2, b"the output"))
        run.ok(lambda: run.w1.send_outcome(a, Outcome.SUCCESS))
        # Fresh connections: psycopg prepares a statement it ran five times on a connection
        # and then sends it without its text, where the proxy could not see a COMMIT.
        run.sim.stores.durable.close()
        run.sim.stores.durable = open_postgres(proxy.dsn(remora_scratch_database))
        proxy.arm(cut)
        result = run(lambda: run.w1.process_outcome(a))
        assert proxy.cut_done.wait(10), result
        assert proxy.cuts == [cut]
        if committed:  # resolved by re-reading: it committed
            assert result == "AcceptSuccess"
        else:  # resolved by re-reading: it did not; trying again is not blind
            assert isinstance(result, Unavailable) and "did not commit" in str(result)
            assert run.ok(lambda: run.w1.process_outcome(a)) == "AcceptSuccess"
        assert run.phase("j1") is Phase.SUCCEEDED
        assert run.sim.stores.result("j1") == b"the output"
        assert run.chk.actions["AcceptSuccess"] == 1
        run.sim.close()
    finally:
        A.BACKENDS = None


def test_a_write_failing_beside_its_commit_is_a_definite_failure(
    remora_scratch_database: str,
) -> None:
    """In pipeline mode a transition's writes go out with its COMMIT, so a write's error
    arrives after the COMMIT was sent.  It is still definitive (the transaction aborted, the
    COMMIT rolled back, the server said so on a live connection): a failure, not an unknown
    result for the log re-read to resolve.  Provoked by a log row at the version the
    transition is about to take (a unique violation of the folded write)."""
    durable = open_postgres(remora_scratch_database)
    actor = Actor("t", Context(MonotonicClock()))
    try:
        durable.submit(actor, "j1", "noop", "null", JobsConfig())
        with psycopg.connect(remora_scratch_database, autocommit=True) as other:
            other.execute(
                "INSERT INTO remora_jobs_log (subject, version, action, params, actor, "
                "actor_seq, result) VALUES ('j1', 2, 'x', '{}', 'planted', 1, '')"
            )
        seen: list[str] = []

        def decide(lk: object) -> Change:
            seen.append("decided")
            return Change("RequestCancel", {"j": "j1"})

        with pytest.raises(StoreError, match="UniqueViolation") as raised:
            durable.transact(actor, "j1", decide)
        assert type(raised.value) is StoreError, raised.value  # not Unavailable/UnknownResult
        assert seen == ["decided"]
        assert durable.job("j1").version == 1  # nothing committed
        assert durable.find_log("t", 2) is None
    finally:
        durable.close()


def test_a_connection_is_not_reused_after_a_failed_pipelined_transaction(
    remora_scratch_database: str,
) -> None:
    """psycopg prepares a statement on its sixth execution.  In pipeline mode a statement
    queued behind a failed one is skipped by the server, its ``Parse`` too, yet psycopg
    counts it as prepared: a connection reused after five or more transitions failing
    beside their ``COMMIT`` failed every later transition (``prepared statement "_pg3_…"
    does not exist``).  The store drops a connection whose call failed."""
    durable = open_postgres(remora_scratch_database)
    actor = Actor("t", Context(MonotonicClock()))

    def cancel(lk: object) -> Change:
        return Change("RequestCancel", {"j": "j1"})

    try:
        durable.submit(actor, "j1", "noop", "null", JobsConfig())
        with psycopg.connect(remora_scratch_database, autocommit=True) as other:
            other.execute(
                "INSERT INTO remora_jobs_log (subject, version, action, params, actor, "
                "actor_seq, result) VALUES ('j1', 2, 'x', '{}', 'planted', 1, '')"
            )
            for _ in range(8):
                with pytest.raises(StoreError, match="UniqueViolation"):
                    durable.transact(actor, "j1", cancel)
            other.execute("DELETE FROM remora_jobs_log WHERE actor = 'planted'")
        durable.transact(actor, "j1", cancel)
        assert durable.job("j1").version == 2
    finally:
        durable.close()
