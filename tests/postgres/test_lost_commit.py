"""Lost COMMIT replies on the real server, through a TCP proxy that cuts the connection.

* ``before``: the proxy drops the COMMIT and closes — the server rolls back;
* ``after``: the proxy forwards the COMMIT, reads the server's reply and drops it — the
  server committed;
* ``in-flight``: forwarded, then cut at once — a race the client cannot resolve locally.

In every case the client only sees its connection die during COMMIT, so the store must
report :class:`UnknownResult`, and the lifecycle must resolve it by re-reading: the frontier
moved ⇒ done; it did not ⇒ retry the same record; and every record ends in the outbox
exactly once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from remora.clock import MonotonicClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import RemoraError, UnknownResult
from remora.sim.checker import Checker
from remora.source import MemorySourceLog
from remora.store import StateStore, Token
from remora.store.postgres import PostgresBackend, PostgresStore
from remora.testing.faults import ScriptedFaults
from remora.worker import Lifecycle
from tests.common.workload import generate
from tests.postgres.proxy import Cut, PgProxy

pytestmark = pytest.mark.services

P = 0


def ctx() -> Context:
    return Context(MonotonicClock())


@pytest.fixture
def proxy(remora_scratch_database: str) -> Iterator[PgProxy]:
    proxy = PgProxy(remora_scratch_database)
    yield proxy
    proxy.close()


def source() -> list[SourceRecord]:
    return [r for r in generate(7, 1, 12, subjects=4) if r.visible]


# -- the store alone ----------------------------------------------------------------


@pytest.mark.parametrize(("cut", "committed"), [(Cut.BEFORE, False), (Cut.AFTER, True)])
def test_lost_process_commit_is_unknown_result(
    remora_scratch_database: str, proxy: PgProxy, cut: Cut, committed: bool
) -> None:
    store = PostgresStore(proxy.dsn(remora_scratch_database))
    direct = PostgresStore(remora_scratch_database)
    try:
        token = store.claim(P, ctx())
        record = source()[0]
        proxy.arm(cut)
        with pytest.raises(UnknownResult, match="connection lost during COMMIT"):
            store.process(P, token, record, ctx())
        assert proxy.cuts == [cut]
        snap = direct.snapshot()
        assert snap.partition(P).frontier == (record.offset + 1 if committed else 0)
        assert len(snap.outbox) + len(snap.quarantine) == (1 if committed else 0)
        # The store replaced the broken connection: the next call works.
        assert store.observe(P, ctx()) == direct.observe(P, ctx())
    finally:
        store.close()
        direct.close()


@pytest.mark.parametrize(("cut", "committed"), [(Cut.BEFORE, False), (Cut.AFTER, True)])
def test_lost_claim_commit_is_unknown_result(
    remora_scratch_database: str, proxy: PgProxy, cut: Cut, committed: bool
) -> None:
    store = PostgresStore(proxy.dsn(remora_scratch_database))
    try:
        proxy.arm(cut)
        with pytest.raises(UnknownResult):
            store.claim(P, ctx())
        assert store.observe(P, ctx()) == Token(1 if committed else 0, 0)
    finally:
        store.close()


# -- the lifecycle resolves it --------------------------------------------------------


def run_with_lost_commits(store: StateStore, proxy: PgProxy, cut: Cut, direct: StateStore) -> Any:
    """Process the source through a production lifecycle, losing the COMMIT of every third
    record; returns the problems found (empty: every loss resolved, exactly once)."""
    records = source()
    hook = ScriptedFaults()  # no faults scripted: it only records every call and its outcome
    store.hook = hook
    life = Lifecycle(store, MemorySourceLog(records, [P]), name="lost-commit")
    problems: list[str] = []
    life.assign([P])
    life.seek(P)
    for i, record in enumerate(records):
        if i % 3 == 1:
            proxy.arm(cut)
        hook.log.clear()
        try:
            token = life.process(P, record)
        except RemoraError as exc:
            problems.append(f"offset {record.offset}: {type(exc).__name__}: {exc}")
            break
        durable = direct.observe(P, ctx())
        if token != durable or token.frontier != record.offset + 1:
            problems.append(f"offset {record.offset}: lifecycle holds {token}, durable {durable}")
        if i % 3 == 1:
            calls = [(op, obs) for op, _n, _outcome, _applied, obs in hook.log]
            done = [("process", "unknown"), ("observe", "ok")]  # committed: resolved as done
            retried = [*done, ("process", "ok")]  # not committed: the same record again
            allowed = {
                Cut.BEFORE: [retried],
                Cut.AFTER: [done],
                Cut.IN_FLIGHT: [done, retried],
                Cut.LATE: [done, retried],
            }[cut]
            if calls not in allowed:
                problems.append(f"offset {record.offset}: calls {calls}, expected {allowed}")
    problems += Checker(records, [P]).final_problems(direct.snapshot())
    return problems


@pytest.mark.parametrize("cut", list(Cut), ids=lambda c: c.value)
def test_lifecycle_resolves_lost_commit_exactly_once(
    remora_scratch_database: str, proxy: PgProxy, cut: Cut
) -> None:
    """Every way of losing a COMMIT: the lifecycle never retires and never duplicates."""
    store = PostgresStore(proxy.dsn(remora_scratch_database))
    direct = PostgresStore(remora_scratch_database)
    try:
        assert run_with_lost_commits(store, proxy, cut, direct) == []
        assert proxy.cuts == [cut] * len(range(1, len(source()), 3))
    finally:
        store.close()
        direct.close()


def test_lifecycle_resolves_lost_claim_by_a_fresh_claim(
    remora_scratch_database: str, proxy: PgProxy
) -> None:
    store = PostgresStore(proxy.dsn(remora_scratch_database))
    try:
        life = Lifecycle(store, MemorySourceLog(source(), [P]))
        proxy.arm(Cut.AFTER)  # epoch 1 is installed, its reply lost
        assert life.assign([P]) == {P: Token(2, 0)}  # never adopts epoch 1: claims afresh
        proxy.arm(Cut.BEFORE)
        life.revoke()
        assert life.assign([P]) == {P: Token(3, 0)}
    finally:
        store.close()


@pytest.mark.parametrize(
    ("delay", "grace", "lands"),
    [(0.01, 5.0, True), (1.0, 0.05, False)],
    ids=["lands-while-settling", "never-lands"],
)
def test_unknown_result_is_reported_only_once_the_outcome_is_final(
    remora_scratch_database: str, proxy: PgProxy, delay: float, grace: float, lands: bool
) -> None:
    """A COMMIT still on its way when the client's connection broke.  The store settles the
    server session before reporting the unknown result: it waits for the session to finish
    (the COMMIT lands within the grace period), or, if the session stays idle inside the
    transaction past the grace period, terminates it (the COMMIT can never land).  Either
    way a re-read right after the error is final.  (Generous margins between the COMMIT's
    delay and the grace period keep the two cases apart on a busy machine.)"""
    proxy.late_delay = delay
    store = StateStore(PostgresBackend(proxy.dsn(remora_scratch_database), settle_grace=grace))
    direct = PostgresStore(remora_scratch_database)
    try:
        token = store.claim(P, ctx())
        proxy.arm(Cut.LATE)
        with pytest.raises(UnknownResult, match="server session"):
            store.process(P, token, source()[0], ctx())
        first = direct.observe(P, ctx())
        assert first.frontier == (source()[0].offset + 1 if lands else 0)
        time.sleep(delay + 0.2)  # long after the late COMMIT was due
        assert direct.observe(P, ctx()) == first
    finally:
        store.close()
        direct.close()


# -- the check catches planted bugs --------------------------------------------------


class LostReplyIsSuccess(PostgresBackend):
    """Planted bug: a connection lost during COMMIT is taken as a successful commit."""

    def _commit(self, cur: psycopg.Cursor[Any]) -> None:
        with contextlib.suppress(psycopg.OperationalError):
            super()._commit(cur)


class LostReplyIsFailure(PostgresBackend):
    """Planted bug: a connection lost during COMMIT is reported as plain unavailability."""

    def _commit_failure(self, exc: psycopg.Error, conn: Any, ctx: Context, what: str) -> Exception:
        return self._failure(exc, ctx, what)


class NoSettle(PostgresBackend):
    """Planted bug: the unknown result is reported while the COMMIT may still land."""

    def _settle(self, session: tuple[Any, ...], ctx: Context) -> str:
        return "not settled"


@pytest.mark.parametrize(
    ("backend", "cut"),
    [(LostReplyIsSuccess, Cut.BEFORE), (LostReplyIsFailure, Cut.AFTER), (NoSettle, Cut.LATE)],
    ids=["lost-reply-is-success", "lost-reply-is-failure", "no-settle"],
)
def test_planted_misclassification_is_caught(
    remora_scratch_database: str, proxy: PgProxy, backend: type[PostgresBackend], cut: Cut
) -> None:
    proxy.late_delay = 1.0  # the unsettled re-read must come well before the late COMMIT
    store = StateStore(backend(proxy.dsn(remora_scratch_database)))
    direct = PostgresStore(remora_scratch_database)
    try:
        problems = run_with_lost_commits(store, proxy, cut, direct)
        assert problems, "a misclassified lost COMMIT went unnoticed"
    finally:
        store.close()
        direct.close()
