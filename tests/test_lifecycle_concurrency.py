"""Bounded concurrent tests: stop() while another thread holds the mutex inside blocked I/O."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from remora.clock import MonotonicClock
from remora.context import Context
from remora.errors import Canceled, DeadlineExceeded, LifetimeRetired
from remora.faults import At, Operation
from remora.store import SqliteStore, Token
from remora.worker import Lifecycle
from tests.common.support import Harness, amendment, records

BOUND = 10.0  # seconds: generous upper bound so a hang fails instead of blocking CI


def test_stop_interrupts_claim_blocked_under_the_mutex() -> None:
    h = Harness(records(0, amendment("s", "submit", 1)))
    entered = threading.Event()

    def block_until_canceled(ctx: Context) -> None:
        # Blocked I/O (the harness's clock is logical, so ctx.sleep would not block): it
        # returns only when the cancellation interrupts it (or after BOUND).
        interrupted = threading.Event()
        ctx.on_cancel(interrupted.set)
        entered.set()
        interrupted.wait(BOUND)

    h.hook.on_boundary(Operation.CLAIM, 1, At.BEFORE, block_until_canceled)
    outcome: list[BaseException] = []

    def assign() -> None:
        try:
            h.lifecycle.assign([0])
        except BaseException as exc:  # recorded for the assertion
            outcome.append(exc)

    worker = threading.Thread(target=assign)
    worker.start()
    assert entered.wait(BOUND)
    assert h.lifecycle._mutex.locked()  # the worker holds the mutex inside the claim
    h.lifecycle.stop()  # must not need the mutex
    worker.join(BOUND)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], Canceled)
    assert h.calls()[-1] == ("claim", "commit", False, "canceled")
    assert h.store.snapshot().partitions == ()  # the claim never installed an epoch
    with pytest.raises(LifetimeRetired):
        h.lifecycle.assign([0])
    with pytest.raises(LifetimeRetired):
        h.lifecycle.seek(0)


def test_budget_starts_before_waiting_for_the_mutex() -> None:
    h = Harness(records(0, amendment("s", "submit", 1)))
    entered, release = threading.Event(), threading.Event()

    def hold(ctx: Context) -> None:
        entered.set()
        release.wait(BOUND)

    h.hook.on_boundary(Operation.CLAIM, 1, At.BEFORE, hold)
    impatient = Lifecycle(h.store, h.log, clock=MonotonicClock(), budget=0.05)
    # Share the mutex-holding lifetime's lock: two callbacks into the same lifetime.
    impatient._mutex = h.lifecycle._mutex
    worker = threading.Thread(target=lambda: h.lifecycle.assign([0]))
    worker.start()
    assert entered.wait(BOUND)
    try:
        with pytest.raises(DeadlineExceeded):
            impatient.seek(0)
    finally:
        release.set()
        worker.join(BOUND)
    assert h.lifecycle.owned() == {0: Token(1, 0)}


def test_sqlite_lock_wait_is_interrupted_by_cancellation(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    ctx = Context(MonotonicClock())
    threading.Timer(0.05, ctx.cancel).start()
    try:
        with pytest.raises(Canceled):
            store.claim(0, ctx)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.observe(0, Context(MonotonicClock())) == Token(0, 0)
    store.close()


def test_sqlite_lock_timeout_is_unavailable(tmp_path: Path) -> None:
    from remora.errors import Unavailable
    from remora.store.sqlite import SqliteBackend

    path = tmp_path / "state.sqlite3"
    SqliteStore(path).close()
    backend = SqliteBackend(path, lock_timeout=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(Unavailable):
            backend.claim(0, Context(MonotonicClock()), True)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        backend.close()


def test_budget_interrupts_blocked_io() -> None:
    """The operation budget does not just fail the next check: when it runs out, the
    operation's context is canceled, which ends I/O that is blocked."""
    h = Harness(records(0, amendment("s", "submit", 1)))
    lifecycle = Lifecycle(h.store, h.log, clock=MonotonicClock(), budget=0.2)
    h.hook.on_boundary(Operation.CLAIM, 1, At.BEFORE, lambda ctx: ctx.sleep(BOUND))
    outcome: list[BaseException] = []

    def assign() -> None:
        try:
            lifecycle.assign([0])
        except BaseException as exc:  # recorded for the assertion
            outcome.append(exc)

    worker = threading.Thread(target=assign)
    worker.start()
    worker.join(BOUND)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], DeadlineExceeded)
    assert "budget" in str(outcome[0])
    assert h.calls()[-1] == ("claim", "commit", False, "canceled")
    assert lifecycle.retired is outcome[0] and lifecycle.owned() == {}


def test_a_mutex_timeout_retires_the_lifetime_holding_nothing() -> None:
    """A callback that spends its budget waiting for the mutex retires its lifetime, and
    a retired lifetime holds nothing: not while the call that holds the mutex runs, nor
    after it saved its token and let go (found by the machines' contended-mutex rule)."""
    h = Harness(records(0, amendment("s", "submit", 1)))
    entered, release = threading.Event(), threading.Event()

    def hold(ctx: Context) -> None:
        entered.set()
        release.wait(BOUND)

    h.hook.on_boundary(Operation.CLAIM, 1, At.BEFORE, hold)
    worker = threading.Thread(target=lambda: h.lifecycle.assign([0]))
    worker.start()
    assert entered.wait(BOUND)
    try:
        h.lifecycle.budget = 0.05  # the next callback's budget (the holder has its own)
        with pytest.raises(DeadlineExceeded):
            h.lifecycle.seek(0)
        assert isinstance(h.lifecycle.retired, DeadlineExceeded)
        assert h.lifecycle.owned() == {}
    finally:
        release.set()
        worker.join(BOUND)
    assert not worker.is_alive()
    assert h.lifecycle.owned() == {}  # the holder's claim committed, its token is not kept
    with pytest.raises(LifetimeRetired):
        h.lifecycle.process(0, records(0, amendment("s", "submit", 1))[0])
