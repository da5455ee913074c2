"""Cancellation contexts, clocks and the controlled-call seam."""

from __future__ import annotations

import threading

import pytest

from remora.clock import LogicalClock, MonotonicClock
from remora.context import Context
from remora.errors import Canceled, DeadlineExceeded, InvalidInput
from remora.faults import (
    NO_FAULTS,
    At,
    FaultDecision,
    IOCall,
    Operation,
    Outcome,
    controlled_call,
)
from remora.store import MemoryStore, Token
from remora.testing.faults import ScriptedFaults
from remora.worker import RetryPolicy
from tests.common.support import amendment, records


def test_cancel_propagates_to_children_and_callbacks() -> None:
    root = Context(LogicalClock())
    child = root.child(budget=1.0)
    grandchild = child.child()
    fired: list[str] = []
    child.on_cancel(lambda: fired.append("child"))
    unregister = child.on_cancel(lambda: fired.append("never"))
    unregister()
    unregister()  # idempotent
    root.cancel(Canceled("why"))
    root.cancel()  # first reason wins
    assert child.canceled and grandchild.canceled
    assert fired == ["child"]
    with pytest.raises(Canceled, match="why"):
        grandchild.check()
    late: list[str] = []
    child.on_cancel(lambda: late.append("now"))  # already canceled: runs at once
    assert late == ["now"]
    assert Context(LogicalClock(), parent=root).canceled  # adopting a canceled parent


def test_deadline_on_logical_clock() -> None:
    clock = LogicalClock()
    root = Context(clock)
    ctx = root.child(budget=0.5)
    assert ctx.remaining() == 0.5 and root.remaining() is None
    inner = ctx.child(budget=10.0)
    assert inner.deadline == ctx.deadline  # a child never outlives its parent's budget
    clock.advance(501)
    with pytest.raises(DeadlineExceeded):
        inner.check()
    assert not inner.canceled
    ctx.close()
    ctx.close()
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_real_sleep_wakes_on_cancel() -> None:
    ctx = Context(MonotonicClock())
    assert ctx.sleep(0.0)
    child = ctx.child()
    threading.Timer(0.05, ctx.cancel).start()
    assert not child.sleep(60.0)  # woken by the parent's cancellation, not after 60 s
    assert not ctx.sleep(60.0)  # already canceled: returns at once


def test_logical_sleep_advances_the_clock_instead_of_sleeping() -> None:
    clock = LogicalClock()
    ctx = Context(clock)
    assert ctx.sleep(0.2)
    assert clock.ms == 200 and clock.now() == 0.2
    budget = ctx.child(budget=0.5)
    clock.call_later(0.5, budget.cancel)  # a budget timer firing during the wait
    assert not budget.sleep(1.0)  # cut short by the cancellation ...
    assert clock.ms == 1200  # ... yet the whole logical time passed, as the schedule says
    assert not budget.sleep(0.1) and clock.ms == 1300


def test_sleep_wakes_on_an_event_on_either_clock() -> None:
    """``Context.sleep(wake=...)``: the job worker's loop waits for a handler to finish
    through the injected clock, so the simulation and production share the path."""
    wake = threading.Event()
    ctx = Context(MonotonicClock())
    threading.Timer(0.05, wake.set).start()
    assert not ctx.sleep(60.0, wake=wake)  # woken by the event, not after 60 s
    wake.clear()
    assert ctx.sleep(0.0, wake=wake)
    threading.Timer(0.05, ctx.cancel).start()
    assert not ctx.sleep(60.0, wake=wake)  # a cancellation wakes it too
    assert wake.is_set()
    clock = LogicalClock()
    logical = Context(clock)
    event = threading.Event()
    assert logical.sleep(0.2, wake=event) and clock.ms == 200
    clock.call_later(0.1, event.set)  # e.g. a handler finishing during the wait
    assert not logical.sleep(1.0, wake=event) and clock.ms == 1200
    logical.cancel()
    event.clear()
    assert not logical.sleep(0.1, wake=event)  # canceled: reported as cut short


def test_no_faults_hook_commits() -> None:
    store = MemoryStore(NO_FAULTS)
    ctx = Context(LogicalClock())
    assert store.claim(0, ctx) == Token(1, 0)
    assert store.process(0, Token(1, 0), records(0, amendment("s", "submit", 1))[0], ctx) == Token(
        1, 1
    )


def test_controlled_call_reports_non_store_errors() -> None:
    hook = ScriptedFaults()

    def boom(commit: bool) -> None:
        raise InvalidInput("bad")

    with pytest.raises(InvalidInput):
        controlled_call(hook, IOCall(Operation.PROCESS, 0), Context(LogicalClock()), boom)
    assert hook.log == [("process", 1, "commit", False, "error")]


def test_scripted_delay_without_clock_is_ignored() -> None:
    hook = ScriptedFaults({(Operation.CLAIM, 1): FaultDecision(Outcome.COMMIT, 5, True)})
    assert hook.decide(IOCall(Operation.CLAIM, 0), Context(LogicalClock())).delay_ms == 5
    hook.boundary(IOCall(Operation.CLAIM, 0), At.BEFORE, Context(LogicalClock()))


@pytest.mark.parametrize(("max_calls", "waits"), [(0, ()), (3, (0.1,)), (2, (-1.0,))])
def test_retry_policy_validated(max_calls: int, waits: tuple[float, ...]) -> None:
    with pytest.raises(InvalidInput):
        RetryPolicy(max_calls=max_calls, waits=waits)


def test_memory_backend_observer_reads() -> None:
    store = MemoryStore()
    ctx = Context(LogicalClock())
    assert store.backend.partition_row(4).epoch == 0
    empty = store.backend.partition_state(4)
    assert empty.outbox == () == empty.quarantine == empty.intents
    assert store.backend.change_count(4) == 0
    token = store.claim(4, ctx)
    recs = records(4, amendment("s", "submit", 1), "x")
    token = store.process(4, token, recs[0], ctx)
    store.process(4, token, recs[1], ctx)
    assert store.backend.partition_row(4).frontier == 2
    state = store.backend.partition_state(4)
    assert [e.seq for e in state.outbox] == [1]
    assert [q.reason for q in state.quarantine] == ["malformed"]
    assert [i.version for i in state.intents] == [1]
    assert store.backend.change_count(4) == 3  # one claim, two process writes
    assert store.snapshot().partition(9).epoch == 0


def test_logical_timers_fire_inside_advance() -> None:
    clock = LogicalClock()
    fired: list[str] = []
    clock.call_later(0.5, lambda: fired.append("a"))
    disarm = clock.call_later(0.3, lambda: fired.append("never"))
    clock.call_later(0.5, lambda: fired.append("b"))
    disarm()
    disarm()
    clock.advance(400)
    assert fired == []
    clock.advance(100)
    assert fired == ["a", "b"]  # in arming order at equal times


def test_monotonic_timers_fire_once_and_disarm() -> None:
    clock = MonotonicClock()
    done = threading.Event()
    fired: list[int] = []
    # a second to disarm 199 timers before they are due: a loaded machine (CI's, with the
    # other tests beside) once took longer than the 50 ms this test first allowed
    disarms = [clock.call_later(1.0, lambda i=i: fired.append(i)) for i in range(200)]
    for disarm in disarms[1:]:
        disarm()  # compacts the heap once most timers are disarmed
    clock.call_later(1.2, done.set)
    clock.call_later(1.1, lambda: 1 / 0)  # a failing callback does not stop the watchdog
    assert done.wait(5)
    assert fired == [0]
