"""A lost COMMIT reply of a durable job transition on the real PostgreSQL server (through
the TCP proxy of ``tests/postgres/proxy.py``): the store reports an unknown result and
resolves it by re-reading the transition log — never by a blind retry — and the run stays a
refinement of the spec, step by step."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

from remora.clock import LogicalClock
from remora.errors import Unavailable
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import open_postgres
from remora.jobs.model import JobsConfig, Outcome, Phase
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget, MemoryVault
from tests.jobs import test_actions as A
from tests.postgres.proxy import Cut, PgProxy

pytestmark = pytest.mark.services


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[PgProxy]:
    proxy = PgProxy(pg_dsn)
    yield proxy
    proxy.close()


@pytest.mark.parametrize(("cut", "committed"), [(Cut.AFTER, True), (Cut.BEFORE, False)])
def test_lost_accept_success_commit(pg_dsn: str, proxy: PgProxy, cut: Cut, committed: bool) -> None:
    def build(clock: LogicalClock, config: JobsConfig) -> Stores:
        return Stores(
            open_postgres(proxy.dsn(pg_dsn)),
            MemoryCoordination(clock, config),
            MemoryTarget(),
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
        run.sim.stores.durable = open_postgres(proxy.dsn(pg_dsn))
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
