"""The fused transaction on the real PostgreSQL server with the target in the durable
store's database: ``AdvanceAttempt``, ``SendOutcome`` and ``ProcessOutcome`` of the sending
worker commit together (``Worker.complete(…, stage=…)``, ``PostgresTarget.locked_write``),
every step refinement-checked (the intermediate states too); a refused stage write rolls
every step back; a lost COMMIT reply (through the TCP proxy of ``tests/postgres/proxy.py``)
is resolved from the log for all three steps or none."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

from remora.clock import LogicalClock
from remora.errors import Unavailable
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import open_postgres
from remora.jobs.model import JobsConfig, NotEnabled, Outcome, Phase
from remora.jobs.postgres import PostgresTarget
from remora.jobs.settlement import settle
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryVault
from tests.jobs import scenarios as A
from tests.postgres.proxy import Cut, PgProxy

pytestmark = pytest.mark.services


def _builder(dsn: str) -> Callable[[LogicalClock, JobsConfig], Stores]:
    def build(clock: LogicalClock, config: JobsConfig) -> Stores:
        return Stores(
            open_postgres(dsn, injected_clock=True),
            MemoryCoordination(clock, config),
            PostgresTarget(dsn),
            MemoryVault(),
            clock,
            config,
        )

    return build


@pytest.fixture
def on_postgres(remora_scratch_database: str) -> Iterator[str]:
    A.BACKENDS = _builder(remora_scratch_database)
    try:
        yield remora_scratch_database
    finally:
        A.BACKENDS = None


def _count_writes(monkeypatch: pytest.MonkeyPatch, backend: Any, seen: list[str]) -> None:
    """Count ``backend``'s write transactions: each call of ``write_then`` (which ``write``
    calls) is one transaction with one COMMIT; the calls go through to the server."""
    real = backend.write_then

    def counted(*args: Any, **kw: Any) -> Any:
        seen.append(str(args[2]))
        return real(*args, **kw)

    monkeypatch.setattr(backend, "write_then", counted)


def test_the_stage_write_sending_and_accepting_commit_once(
    on_postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = A.Run()
    try:
        a = run.running()
        durable_writes: list[str] = []
        target_writes: list[str] = []
        _count_writes(monkeypatch, run.sim.stores.durable.backend, durable_writes)
        _count_writes(monkeypatch, run.sim.stores.target.backend, target_writes)
        result = run.ok(lambda: run.w1.complete(a, Outcome.SUCCESS, stage=b"the output"))
        assert result == "AcceptSuccess"
        assert durable_writes == ["job transitions"]  # one transaction: one COMMIT
        assert target_writes == []
        steps = [r.action for r, _ in run.chk.last_steps]
        assert steps == ["AdvanceAttempt", "SendOutcome", "AcceptSuccess"]
        assert run.phase("j1") is Phase.SUCCEEDED
        assert run.sim.stores.result("j1") == b"the output"
    finally:
        run.sim.close()


def test_a_refused_fused_stage_write_rolls_every_step_back(on_postgres: str) -> None:
    """The worker's stage writes fenced (as a declaration of it does first): the fused
    transaction is refused as a whole — no stage row, no outcome in flight, no accept."""
    run = A.Run()
    try:
        a = run.running()
        stores = run.sim.stores
        stores.target.fence(run.w1.actor, "w1")
        result = run(lambda: run.w1.complete(a, Outcome.SUCCESS, stage=b"the output"))
        assert isinstance(result, NotEnabled) and "refused" in str(result), result
        lk = stores.durable.read_locked(run.w1.actor, "j1")
        assert lk.job.phase is Phase.RUNNING
        assert lk.attempts[a.token].pending is None
        assert stores.target.info(None, a) is None
        assert run.w1.attempts[a].progress == 0
        # the attempt may still fail (the production settlement sends a retryable failure)
        assert run.ok(lambda: run.w1.complete(a, Outcome.RETRYABLE, "refused")) == (
            "AcceptRetryableFailureWithBudget"
        )
    finally:
        run.sim.close()


def test_the_settlement_ends_a_refused_deferred_stage_as_a_retryable_failure(
    on_postgres: str,
) -> None:
    """The production settlement (``settle``) with a successful handler's output deferred
    to the fused transaction: the stage write refused, the attempt ends as a handler that
    failed to stage does — a retryable failure, sent and accepted in one transaction."""
    run = A.Run()
    try:
        a = run.running()
        run.sim.stores.target.fence(run.w1.actor, "w1")
        run.w1.attempts[a].deferred_stage = b"the output"
        run.ok(lambda: settle(run.w1, a, Outcome.SUCCESS, ""))
        assert run.chk.actions.get("AcceptSuccess", 0) == 0
        assert run.chk.actions["AcceptRetryableFailureWithBudget"] == 1
        job = run.sim.stores.durable.job("j1")
        assert job.phase is Phase.RETRY_WAIT
        assert "refused" in job.error, job.error
        assert run.w1.attempts[a].deferred_stage is None
    finally:
        run.sim.close()


@pytest.fixture
def proxy(remora_scratch_database: str) -> Iterator[PgProxy]:
    proxy = PgProxy(remora_scratch_database)
    yield proxy
    proxy.close()


@pytest.mark.parametrize(("cut", "committed"), [(Cut.AFTER, True), (Cut.BEFORE, False)])
def test_a_lost_fused_commit_is_resolved_for_every_step(
    remora_scratch_database: str, proxy: PgProxy, cut: Cut, committed: bool
) -> None:
    dsn = proxy.dsn(remora_scratch_database)
    A.BACKENDS = _builder(dsn)
    try:
        run = A.Run()
        a = run.running()
        # Fresh connections: psycopg prepares a statement it ran five times on a connection
        # and then sends it without its text, where the proxy could not see a COMMIT.
        stores = run.sim.stores
        stores.durable.close()
        stores.durable = open_postgres(dsn, injected_clock=True)
        stores.durable.clock = stores.clock
        proxy.arm(cut)
        result = run(lambda: run.w1.complete(a, Outcome.SUCCESS, stage=b"the output"))
        assert proxy.cut_done.wait(10), result
        assert proxy.cuts == [cut]
        if committed:  # resolved by re-reading the log: all three steps committed
            assert result == "AcceptSuccess"
        else:  # none did; trying again is not blind
            assert isinstance(result, Unavailable) and "did not commit" in str(result)
            assert stores.target.info(None, a) is None
            result = run.ok(lambda: run.w1.complete(a, Outcome.SUCCESS, stage=b"the output"))
            assert result == "AcceptSuccess"
        assert run.phase("j1") is Phase.SUCCEEDED
        assert stores.result("j1") == b"the output"
        for action in ("AdvanceAttempt", "SendOutcome", "AcceptSuccess"):
            assert run.chk.actions[action] == 1, run.chk.actions
        run.sim.close()
    finally:
        A.BACKENDS = None
