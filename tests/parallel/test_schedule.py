"""The scheduler of real threads (remora.sim.schedule): determinism, PCT's priorities and
change points, replay, controlled locks and deadlocks, stalls and yields."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from remora.sim.schedule import (
    PCT,
    Deadlock,
    RandomWalk,
    Replay,
    ScheduledClock,
    Scheduler,
    instrument,
    policy_from_json,
)


def program(
    scheduler: Scheduler, threads: int = 3, steps: int = 4
) -> tuple[list[Callable[[], None]], list[tuple[int, int]]]:
    log: list[tuple[int, int]] = []
    lock = scheduler.lock("log")

    def body(i: int) -> Callable[[], None]:
        def run() -> None:
            for k in range(steps):
                scheduler.point(f"step {k}")
                with lock:
                    log.append((i, k))

        return run

    return [body(i) for i in range(threads)], log


def run(policy: PCT | RandomWalk | Replay) -> tuple[list[tuple[int, int]], tuple[int, ...]]:
    scheduler = Scheduler(policy)
    bodies, log = program(scheduler)
    record = scheduler.run(bodies)
    return log, record.decisions


def test_the_highest_priority_runs_until_a_change_point() -> None:
    log, _ = run(PCT((0, 2, 1)))  # thread 1 first, then 2, then 0
    assert [t for t, _ in log] == [1] * 4 + [2] * 4 + [0] * 4
    # decisions 0-2 grant thread 1 its start, its first point and the log's lock; at
    # decision 3 (its second point) it drops below every other thread
    log, decisions = run(PCT((0, 2, 1), (3,)))
    assert [t for t, _ in log] == [1] + [2] * 4 + [0] * 4 + [1] * 3
    assert decisions[:4] == (1, 1, 1, 2)


def test_a_policy_gives_the_same_interleaving_every_time() -> None:
    for policy in (PCT.seeded(7, 3, 3, 30), RandomWalk(11)):
        first = run(policy)
        assert all(run(policy) == first for _ in range(5))
    assert (
        run(RandomWalk(1))[0] != run(RandomWalk(2))[0]
        or run(RandomWalk(3))[0] != run(RandomWalk(1))[0]
    )


def test_replay_follows_the_recorded_choices() -> None:
    log, decisions = run(RandomWalk(5))
    scheduler = Scheduler(Replay(decisions))
    bodies, replayed = program(scheduler)
    record = scheduler.run(bodies)
    assert replayed == log and record.decisions == decisions and record.diverged == 0


def test_replay_past_its_recording_diverges_and_still_finishes() -> None:
    scheduler = Scheduler(Replay((2, 2)))
    bodies, log = program(scheduler)
    record = scheduler.run(bodies)
    assert len(log) == 12 and record.diverged > 0


def test_policies_round_trip_through_json() -> None:
    for policy in (PCT((1, 0), (4, 9)), RandomWalk(3), Replay((0, 1, 1))):
        assert policy_from_json(policy.to_json()) == policy


def test_seeded_pct_has_depth_minus_one_change_points() -> None:
    policy = PCT.seeded(1, 3, 3, 40)
    assert sorted(policy.priorities) == [0, 1, 2]
    assert len(policy.change_points) == 2 and all(0 <= c < 40 for c in policy.change_points)


def test_a_thread_waiting_for_a_controlled_lock_is_not_ready() -> None:
    """The holder parks inside the lock; the waiter (granted next) blocks on it and is not
    ready: the scheduler grants the holder — no stall, no spinning — and then the waiter."""
    # holder: start, acquire; waiter: start, before, acquire (blocks); then nothing is
    # recorded: the choices after that are the scheduler's own
    scheduler = Scheduler(Replay((0, 0, 1, 1, 1)))
    lock = scheduler.lock("l")
    order: list[str] = []

    def holder() -> None:
        with lock:
            scheduler.point("inside")
            order.append("holder")

    def waiter() -> None:
        scheduler.point("before")
        with lock:
            order.append("waiter")

    record = scheduler.run([holder, waiter])
    assert order == ["holder", "waiter"]
    assert record.stalls == 0
    assert record.labels[4:7] == ("acquire l", "inside", "woken l")
    assert record.decisions[4:7] == (1, 0, 1)


def test_a_deadlock_between_controlled_locks_is_reported() -> None:
    raised: list[BaseException] = []

    def take(first: object, second: object) -> Callable[[], None]:
        def run() -> None:
            try:
                with first:  # type: ignore[attr-defined]
                    scheduler.point("between")
                    with second:  # type: ignore[attr-defined]
                        pass
            except Deadlock as exc:
                raised.append(exc)

        return run

    # thread 0 takes a, thread 1 takes b, then each wants the other's
    scheduler = Scheduler(Replay((0, 0, 1, 1, 0, 1)))
    a, b = scheduler.lock("a"), scheduler.lock("b")
    scheduler.run([take(a, b), take(b, a)])
    assert raised and all(isinstance(e, Deadlock) for e in raised)


def test_a_lock_waiter_with_a_timeout_times_out_instead() -> None:
    scheduler = Scheduler(Replay((0, 0, 1, 1)))
    lock = scheduler.lock("m")
    got: list[bool] = []

    def holder() -> None:
        lock.acquire()
        scheduler.point("holding")
        got.append(lock.acquire(timeout=1.0))  # its own lock again: nobody can release it
        lock.release()

    def waiter() -> None:
        got.append(lock.acquire(timeout=1.0))

    scheduler.run([holder, waiter])
    assert False in got


def test_an_uncontrolled_block_is_a_stall_not_a_hang() -> None:
    """Thread 0 blocks on a plain lock thread 1 holds across a point: after ``stall`` the
    scheduler lets it run free and grants thread 1, which releases the lock."""
    scheduler = Scheduler(PCT((0, 1), (2,)), stall=0.02)
    plain = threading.Lock()
    done: list[int] = []

    def holder() -> None:
        with plain:
            scheduler.point("holding")
            scheduler.point("still holding")
        done.append(1)

    def blocked() -> None:
        scheduler.point("before")
        with plain:
            done.append(0)

    record = scheduler.run([blocked, holder])
    assert sorted(done) == [0, 1] and record.stalls >= 1


def test_instrument_replaces_plain_locks_only() -> None:
    class Thing:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.rlock = threading.RLock()
            self.value = 3

    thing = Thing()
    scheduler = Scheduler(RandomWalk(0))
    assert instrument(thing, scheduler) == ["lock"]
    assert thing.lock is not None and type(thing.rlock) is type(threading.RLock())


def test_clock_waits_yield_to_threads_that_do_not_wait() -> None:
    """A poller yields at every wait: the worker (lower priority) still finishes first."""
    scheduler = Scheduler(PCT((0, 1)))  # the poller (1) has the higher priority
    clock = ScheduledClock(scheduler)
    flag: list[int] = []
    wake = threading.Event()

    def worker() -> None:
        for _ in range(3):
            scheduler.point("work")
        flag.append(1)

    def poller() -> None:
        start = time.monotonic()
        while not flag and time.monotonic() - start < 5:
            clock.sleep(0.01, wake)

    record = scheduler.run([worker, poller])
    assert flag and record.stalls == 0


def test_points_outside_a_run_do_nothing() -> None:
    scheduler = Scheduler(RandomWalk(0))
    scheduler.point("main thread")
    lock = scheduler.lock("x")
    with lock:
        assert lock.locked()
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()
