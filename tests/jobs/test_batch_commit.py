"""Batched fenced transitions on the real backends (SQLite; PostgreSQL with
``REMORA_REQUIRE_SERVICES=1``): several jobs' spec steps in **one** durable transaction
(:meth:`~remora.jobs.transactions.Transactions.transact_batch`), each row guarded by its
own condition — a refused row is rolled back alone, the others commit; every step
refinement-checked; a lost COMMIT reply resolved from the log for every row."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.errors import NotEnabled, Unavailable, UnknownResult
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.model import AttemptId, JobsConfig, Outcome, Phase
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryVault
from remora.sim.jobs.simulation import SMALL
from tests.jobs import scenarios as A

#: Two jobs at once (the simulation's default global limit is one).
CONFIG = attrs.evolve(SMALL, global_limit=2, lease_ticks=2)


def _postgres(dsn: str) -> Callable[[LogicalClock, JobsConfig], Stores]:
    from remora.jobs.durable import open_postgres
    from remora.jobs.postgres import PostgresTarget

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


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test on SQLite (memory coordination and target) and on PostgreSQL (the
    target in the durable store's database: the stage write joins the batch)."""
    if request.param == "postgres":
        pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")
        request.applymarker(pytest.mark.services)
        dsn = request.getfixturevalue("remora_scratch_database")
        A.BACKENDS = _postgres(dsn)
    try:
        yield request.param
    finally:
        A.BACKENDS = None


def _writes(monkeypatch: pytest.MonkeyPatch, backend: Any) -> list[str]:
    """Every write transaction of ``backend`` (its ``what``)."""
    seen: list[str] = []
    real = backend.write

    def counted(ctx: Any, commit: bool, what: str, body: Any) -> Any:
        seen.append(what)
        return real(ctx, commit, what, body)

    monkeypatch.setattr(backend, "write", counted)
    return seen


def _two_reserved(run: A.Run) -> None:
    wk = run.w1
    run.ok(lambda: run.sim.start("w1"))
    for job in ("j1", "j2"):
        run.ok(lambda job=job: run.sim.submit(job))
        run.ok(lambda job=job: run.r.enqueue(job))
        assert run.ok(lambda job=job: wk.reserve(job))


def _two_running(run: A.Run) -> tuple[AttemptId, AttemptId]:
    _two_reserved(run)
    a1, a2 = run.ok(lambda: run.w1.authorize_batch(["j1", "j2"]))
    run.ok(lambda: run.w1.activate(a1))
    run.ok(lambda: run.w1.activate(a2))
    return a1, a2


def test_two_authorizations_commit_in_one_transaction(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = A.Run(concurrency=2, jobs_config=CONFIG)
    try:
        _two_reserved(run)
        writes = _writes(monkeypatch, run.sim.stores.durable.backend)
        got = run.ok(lambda: run.w1.authorize_batch(["j2", "j1"]))
        assert got == [AttemptId("j2", 1), AttemptId("j1", 1)]
        assert writes == ["batched transitions"]  # one transaction: one COMMIT
        assert [r.action for r, _ in run.chk.last_steps] == ["AuthorizeAttempt"] * 2
        # recorded in commit order (the jobs are locked in id order)
        assert [r.params["j"] for r, _ in run.chk.last_steps] == ["j1", "j2"]
    finally:
        run.sim.close()


def test_a_refused_row_rolls_back_alone(backend: str) -> None:
    """j2's outcome is already in flight (the worker does not know: as after a reply it
    lost): its row's ``SendOutcome`` is refused and rolled back to its savepoint — j1's
    steps still commit, in the same transaction."""
    run = A.Run(concurrency=2, jobs_config=CONFIG)
    try:
        a1, a2 = _two_running(run)
        wk = run.w1
        run.ok(lambda: wk.advance(a1, 2, b"one"))
        run.ok(lambda: wk.send_outcome(a2, Outcome.RETRYABLE))
        wk.attempts[a2].outcome_sent = False
        got = run.ok(
            lambda: wk.complete_batch(
                [(a1, Outcome.SUCCESS, "", None), (a2, Outcome.PERMANENT, "", None)]
            )
        )
        assert got[0] == "AcceptSuccess"
        assert isinstance(got[1], NotEnabled) and "in flight" in str(got[1]), got
        assert [r.action for r, _ in run.chk.last_steps] == ["SendOutcome", "AcceptSuccess"]
        assert run.phase("j1") is Phase.SUCCEEDED
        lk = run.sim.stores.durable.read_locked(wk.actor, "j2")
        assert lk.job.phase is Phase.RUNNING
        assert lk.attempts[a2.token].pending is Outcome.RETRYABLE  # the first send's, kept
    finally:
        run.sim.close()


def test_a_stale_attempt_in_a_batch_changes_nothing_and_the_others_commit(
    backend: str,
) -> None:
    """j2's attempt lost its authority (its lease expired, reaped): its outcome, completed
    in one batch with j1's, is rejected by its own token compare; j1's is accepted."""
    run = A.Run(concurrency=2, jobs_config=CONFIG)
    try:
        a1, a2 = _two_running(run)
        wk = run.w1
        stores = run.sim.stores
        run.ok(lambda: wk.advance(a1, 2, b"one"))
        for _ in range(stores.config.lease_ticks + 1):
            run.ok(run.sim.tick)
            run.ok(lambda: wk.renew(a1))
        assert run.ok(lambda: run.r.expire_lease(a2))
        assert run.ok(lambda: run.r.reap(a2))
        got = run.ok(
            lambda: wk.complete_batch(
                [(a1, Outcome.SUCCESS, "", None), (a2, Outcome.PERMANENT, "", None)]
            )
        )
        assert got == ["AcceptSuccess", "RejectOutcome"], got
        assert run.phase("j1") is Phase.SUCCEEDED
        assert run.phase("j2") is not Phase.FAILED
    finally:
        run.sim.close()


@pytest.mark.parametrize("committed", [True, False])
def test_a_lost_batched_commit_is_resolved_for_every_row(
    backend: str, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """The batch's COMMIT reply lost: committed — both rows' steps read back from the log
    and recorded; not committed — :class:`Unavailable`, and trying again is not blind."""
    run = A.Run(concurrency=2, jobs_config=CONFIG)
    try:
        a1, a2 = _two_running(run)
        wk = run.w1
        b = run.sim.stores.durable.backend
        real = b.write

        def lose(ctx: Any, commit: bool, what: str, body: Any) -> Any:
            if what != "batched transitions":
                return real(ctx, commit, what, body)
            monkeypatch.setattr(b, "write", real)
            real(ctx, committed, what, body)
            raise UnknownResult("the COMMIT reply was lost")

        monkeypatch.setattr(b, "write", lose)
        finished = [(a1, Outcome.PERMANENT, "", None), (a2, Outcome.RETRYABLE, "", None)]
        got = run(lambda: wk.complete_batch(finished))
        if committed:
            assert got == ["AcceptPermanentFailure", "AcceptRetryableFailureWithBudget"], got
            steps = [r.action for r, _ in run.chk.last_steps]
            assert steps == [
                "SendOutcome",
                "AcceptPermanentFailure",
                "SendOutcome",
                "AcceptRetryableFailureWithBudget",
            ]
        else:
            assert isinstance(got, Unavailable) and "none of its rows" in str(got), got
            got = run.ok(lambda: wk.complete_batch(finished))
            assert got == ["AcceptPermanentFailure", "AcceptRetryableFailureWithBudget"], got
        assert run.phase("j1") is Phase.FAILED
        assert run.phase("j2") is Phase.RETRY_WAIT
    finally:
        run.sim.close()


def test_the_batch_completer_commits_the_finished_attempts_together(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:class:`~remora.jobs.settlement.BatchCompleter` of 2: the first finished attempt
    waits (another one still executes), the second's arrival fills the batch and commits
    both in one transaction, each with its deferred stage."""
    from remora.jobs.settlement import BatchCompleter

    run = A.Run(concurrency=2, jobs_config=CONFIG)
    try:
        a1, a2 = _two_running(run)
        wk = run.w1
        completer = BatchCompleter(2, flush_every=0.0)
        waited: list[int] = []
        real_sleep = Context.sleep

        def sleep(ctx: Context, seconds: float, **kw: Any) -> bool:
            # the first attempt waits: meanwhile the second one finishes
            if ctx is wk.ctx and not waited:
                waited.append(1)
                wk.attempts[a2].deferred_stage = b"two"
                completer(wk, a2, Outcome.SUCCESS, "")
            return real_sleep(ctx, 0.0, **kw)

        monkeypatch.setattr(Context, "sleep", sleep)
        writes = _writes(monkeypatch, run.sim.stores.durable.backend)
        wk.attempts[a1].deferred_stage = b"one"
        run.ok(lambda: completer(wk, a1, Outcome.SUCCESS, ""))
        assert completer.flushed == [2]
        assert writes.count("batched transitions") == 1
        assert run.chk.actions["AcceptSuccess"] == 2
        assert run.sim.stores.result("j1") == b"one"
        assert run.sim.stores.result("j2") == b"two"
    finally:
        run.sim.close()
