"""Schedules for real threads: scheduling points, a PCT-style policy, and replay.

The parallel machines (:mod:`remora.sim.parallel`) run their branches on real threads
against the real stores.  Left alone, the operating system decides the interleaving, and
a race that needs one particular interleaving shows up once in a thousand runs and then
never again.  This module serializes the threads at **scheduling points**: a thread that
reaches one parks until the scheduler grants it the turn, so exactly one managed thread
runs between two points and the scheduler's choices *are* the interleaving.  The points
are the fault seam's boundaries before and after each effect
(:func:`remora.faults.controlled_call`), every SQL statement a store sends (its
``statement_hook``), every acquire of a lock the harness instrumented
(:meth:`Scheduler.lock`, :func:`instrument`), every wait on the harness's clock
(:class:`ScheduledClock`), and the start of each command.

Policies choose who runs next:

* :class:`PCT` — probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010, as in
  Coyote): each thread has a distinct priority, the highest-priority ready thread runs, and
  at ``d - 1`` *change points* (step numbers) the running thread drops below every other.
  A bug of depth ``d`` is found with probability at least ``1 / (n * k^(d-1))`` per run for
  ``n`` threads and ``k`` steps.  The parameters are explicit (the Hypothesis layer draws
  them, so shrinking simplifies the schedule too); :meth:`PCT.seeded` makes them from a
  seed;
* :class:`RandomWalk` — a seeded uniform choice at every step;
* :class:`Replay` — the recorded choices of an earlier run, step by step.

What a thread does between points is not controlled: a statement that blocks *inside* the
database engine (a PostgreSQL row lock, an SQLite busy lock) keeps its thread away from its
next point.  When the running thread has not come back to a point within ``stall`` seconds,
the scheduler counts a *stall*, lets that thread run free (it parks again at its next point)
and grants the turn to another — so the engine's own locks cannot deadlock the scheduler,
at the price of determinism around them.  A thread that waits for another (a busy-lock
poll on the harness clock) *yields*: it runs only when no thread that does not yield is
ready.  Locks made by :meth:`Scheduler.lock` are fully controlled: a thread blocked on one
is not ready until its holder releases it, and if every thread is blocked the scheduler
times out a waiter that gave a timeout, else reports :class:`Deadlock`.

With only controlled blocking (the memory store, the lifecycle's mutex) a run is
deterministic: the same policy gives the same interleaving.  With a real engine the
recorded choices replay the same interleaving as far as the engine lets them, and the
number of stalls and of replay divergences says how far that was.

Nothing here imports Hypothesis: the command line replays a schedule with it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import attrs

from remora.clock import Disarm, MonotonicClock

DEFAULT_STALL = 0.05
"""Seconds the running thread may take to reach its next point before it is let run free."""

DEFAULT_GIVE_UP = 120.0
"""Seconds a run may take in all before it is reported as a hang."""

_TICK = 0.005


class ScheduleHang(RuntimeError):
    """A run did not finish within its time limit."""


class Deadlock(RuntimeError):
    """Every thread waited for a controlled lock another one held."""


# -- policies ---------------------------------------------------------------------------


class Chooser(Protocol):
    """One run's choices (a policy may keep state across the steps of one run)."""

    def choose(
        self, candidates: Sequence[int], last: int | None, step: int, free: frozenset[int]
    ) -> int | None:
        """The thread to run at ``step`` among ``candidates`` (sorted; ``last`` ran the step
        before).  None: wait — a thread that is running free may still come (replay)."""
        ...


class Policy(Protocol):
    """A schedule's recipe: its JSON form, and a fresh chooser per run."""

    def start(self, threads: int) -> Chooser: ...

    def to_json(self) -> dict[str, Any]: ...


@attrs.frozen
class PCT:
    """Priorities per thread (higher runs first) and the steps where the running thread's
    priority drops below every other (module docstring)."""

    priorities: tuple[int, ...]
    change_points: tuple[int, ...] = ()

    @classmethod
    def seeded(cls, seed: int, threads: int, depth: int, horizon: int) -> PCT:
        """Random priorities and ``depth - 1`` distinct change points in ``[0, horizon)``."""
        rng = random.Random(seed)
        order = list(range(threads))
        rng.shuffle(order)
        points = rng.sample(range(max(horizon, depth)), max(0, depth - 1))
        return cls(tuple(order), tuple(sorted(points)))

    def start(self, threads: int) -> Chooser:
        return _PCTRun(self, threads)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": "pct",
            "priorities": list(self.priorities),
            "change_points": list(self.change_points),
        }


class _PCTRun:
    def __init__(self, policy: PCT, threads: int) -> None:
        given = list(policy.priorities)
        # threads beyond the given priorities rank below them, in index order
        extra = [-(i + 1) for i in range(threads - len(given))]
        base = len(policy.change_points) + threads
        self.priority = [base + p for p in given[:threads]] + [base + e for e in extra]
        self.changes = {step: i for i, step in enumerate(policy.change_points)}

    def choose(
        self, candidates: Sequence[int], last: int | None, step: int, free: frozenset[int]
    ) -> int:
        change = self.changes.get(step)
        if change is not None and last is not None and last < len(self.priority):
            self.priority[last] = change - len(self.changes)  # below every initial priority
        return max(candidates, key=lambda t: self.priority[t] if t < len(self.priority) else -t)


@attrs.frozen
class RandomWalk:
    """A seeded uniform choice among the ready threads at every step."""

    seed: int

    def start(self, threads: int) -> Chooser:
        rng = random.Random(self.seed)

        class _Walk:
            def choose(
                self, candidates: Sequence[int], last: int | None, step: int, free: frozenset[int]
            ) -> int:
                return candidates[rng.randrange(len(candidates))]

        return _Walk()

    def to_json(self) -> dict[str, Any]:
        return {"name": "random", "seed": self.seed}


@attrs.frozen
class Replay:
    """The choices an earlier run made, step by step; past them (or where the recorded
    thread is not ready and nothing may still bring it) the lowest-numbered ready thread,
    counted as a divergence."""

    decisions: tuple[int, ...]
    grace: float = DEFAULT_STALL

    def start(self, threads: int) -> Chooser:
        return _ReplayRun(self)

    def to_json(self) -> dict[str, Any]:
        return {"name": "replay", "decisions": list(self.decisions)}


class _ReplayRun:
    def __init__(self, policy: Replay) -> None:
        self.policy = policy
        self.diverged = 0
        self._waiting_since: float | None = None

    def choose(
        self, candidates: Sequence[int], last: int | None, step: int, free: frozenset[int]
    ) -> int | None:
        decisions = self.policy.decisions
        if step < len(decisions):
            want = decisions[step]
            if want in candidates:
                self._waiting_since = None
                return want
            if want in free:  # it is running free: it may still park here in time
                now = time.monotonic()
                if self._waiting_since is None:
                    self._waiting_since = now
                if now - self._waiting_since < self.policy.grace:
                    return None
        self.diverged += 1  # not the recorded thread, or past the recording
        self._waiting_since = None
        return candidates[0]


def policy_from_json(doc: dict[str, Any]) -> Policy:
    """The policy a schedule's JSON names (already validated by the caller)."""
    name = doc["name"]
    if name == "pct":
        return PCT(tuple(doc["priorities"]), tuple(doc["change_points"]))
    if name == "random":
        return RandomWalk(int(doc["seed"]))
    return Replay(tuple(doc["decisions"]))


# -- the record of a run ----------------------------------------------------------------


@attrs.frozen
class ScheduleRecord:
    """What a run's scheduler did: the policy, the thread chosen at every step (and the
    point it resumed at), how often a thread ran free (stalls) and how often a replay could
    not follow its recording (divergences)."""

    policy: dict[str, Any]
    decisions: tuple[int, ...]
    labels: tuple[str, ...]
    stalls: int
    diverged: int

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "decisions": list(self.decisions),
            "stalls": self.stalls,
            "diverged": self.diverged,
        }


# -- the scheduler ----------------------------------------------------------------------


class Scheduler:
    """Serializes the threads of :meth:`run` at their scheduling points (module docstring).

    Points reached by a thread the scheduler does not manage (the main thread running a
    sequential prefix, a timer thread) do nothing, and its locks are plain locks there."""

    def __init__(
        self,
        policy: Policy,
        *,
        stall: float = DEFAULT_STALL,
        give_up: float = DEFAULT_GIVE_UP,
    ) -> None:
        self.policy = policy
        self.stall = stall
        self.give_up = give_up
        self._cond = threading.Condition()
        self._local = threading.local()
        self._chooser: Chooser = policy.start(0)
        self.current: int | None = None
        self.last: int | None = None
        self.waiting: dict[int, str] = {}
        self.yielding: set[int] = set()
        self.blocked: dict[int, ScheduledLock] = {}
        self.timeouts: dict[int, bool] = {}  # blocked thread -> its acquire has a timeout
        self.timed_out: set[int] = set()
        self.deadlocked: set[int] = set()
        self.free: set[int] = set()
        self.decisions: list[int] = []
        self.labels: list[str] = []
        self.stalls = 0
        self.granted_at = 0.0
        self._deadline = 0.0
        self._starting = 0  # threads of the run not yet at their first point
        self.failures: list[BaseException] = []

    # -- running ----------------------------------------------------------------------
    def run(self, bodies: Sequence[Callable[[], None]]) -> ScheduleRecord:
        """Run each body on a thread of its own, interleaved at the points; returns the
        record.  An exception a body raises is kept in :attr:`failures` (the bodies of the
        parallel machines catch what the system under test raises themselves)."""
        self._chooser = self.policy.start(len(bodies))
        self._deadline = time.monotonic() + self.give_up
        self._starting = len(bodies)  # the first choice waits until every thread is there
        threads = [
            threading.Thread(target=self._body, args=(i, body), name=f"branch-{i}", daemon=True)
            for i, body in enumerate(bodies)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, self._deadline - time.monotonic()) + 1.0)
        if any(t.is_alive() for t in threads):
            raise ScheduleHang(
                f"the branches did not finish within {self.give_up:g} s "
                f"(decisions so far: {len(self.decisions)}, stalls: {self.stalls})"
            )
        return self.record()

    def record(self) -> ScheduleRecord:
        diverged = getattr(self._chooser, "diverged", 0)
        return ScheduleRecord(
            self.policy.to_json(),
            tuple(self.decisions),
            tuple(self.labels),
            self.stalls,
            int(diverged),
        )

    def _body(self, index: int, body: Callable[[], None]) -> None:
        self._local.index = index
        try:
            with self._cond:
                self._starting -= 1
                self._park(index, "start", yielding=False)
            body()
        except BaseException as exc:  # kept for the run's verdict, never lost
            self.failures.append(exc)
        finally:
            with self._cond:
                self.waiting.pop(index, None)
                self.yielding.discard(index)
                self.free.discard(index)
                if self.current == index:
                    self.current = None
                    self.last = index
                self._schedule()
                self._cond.notify_all()

    def managed(self) -> int | None:
        """The calling thread's index, if this scheduler runs it."""
        index: int | None = getattr(self._local, "index", None)
        return index

    # -- points -----------------------------------------------------------------------
    def point(self, label: str) -> None:
        """A scheduling point: park until this thread is granted the turn."""
        me = self.managed()
        if me is None:
            return
        with self._cond:
            self._park(me, label, yielding=False)

    def pause(self, label: str) -> None:
        """A point where the thread waits for another (a poll): it runs again only when no
        thread that does not yield is ready."""
        me = self.managed()
        if me is None:
            return
        if self.free:
            time.sleep(0.001)  # a thread running free may be the one we wait for
        with self._cond:
            self._park(me, label, yielding=True)

    def _park(self, me: int, label: str, yielding: bool) -> None:
        self.waiting[me] = label
        if yielding:
            self.yielding.add(me)
        self.free.discard(me)
        if self.current == me:
            self.current = None
            self.last = me
        self._schedule()
        self._await_turn(me)

    def _await_turn(self, me: int) -> None:
        while self.current != me:
            self._cond.wait(_TICK)
            self._tick()
        self.waiting.pop(me, None)
        self.yielding.discard(me)
        self.granted_at = time.monotonic()

    def _tick(self) -> None:
        """Run by every waiting thread at each wake-up: the hang limit, stall detection,
        and a pending choice (a replay waiting for a thread running free)."""
        now = time.monotonic()
        if now > self._deadline:
            raise ScheduleHang(f"a run took more than {self.give_up:g} s")
        current = self.current
        if current is None:
            self._schedule()
            return
        if (
            current not in self.waiting
            and current not in self.blocked
            and now - self.granted_at > self.stall
        ):
            self.free.add(current)
            self.stalls += 1
            self.last = current
            self.current = None
            self._schedule()

    def _schedule(self) -> None:
        """Grant the turn if nobody holds it (the condition is held)."""
        if self.current is not None or self._starting > 0:
            return
        ready = sorted(self.waiting)
        if not ready:
            if self.blocked and not self.free:
                self._break_deadlock()
            return
        eager = [t for t in ready if t not in self.yielding]
        candidates = eager or ready
        step = len(self.decisions)
        choice = self._chooser.choose(candidates, self.last, step, frozenset(self.free))
        if choice is None:
            return
        self.current = choice
        self.decisions.append(choice)
        self.labels.append(self.waiting[choice])
        self._cond.notify_all()

    def _break_deadlock(self) -> None:
        """Every live thread waits for a controlled lock: time out a waiter that gave a
        timeout (the lowest-numbered), else fail them all with :class:`Deadlock`."""
        with_timeout = sorted(t for t in self.blocked if self.timeouts.get(t))
        victims = with_timeout[:1] or sorted(self.blocked)
        for t in victims:
            del self.blocked[t]
            if with_timeout:
                self.timed_out.add(t)
            else:
                self.deadlocked.add(t)
            self.waiting[t] = "deadlock"
        self._schedule()

    # -- controlled locks -------------------------------------------------------------
    def lock(self, name: str) -> ScheduledLock:
        """A lock whose waits the scheduler controls."""
        return ScheduledLock(self, name)


class ScheduledLock:
    """A :class:`threading.Lock` stand-in whose acquire is a scheduling point and whose
    waiters the scheduler knows are blocked (see :class:`Scheduler`)."""

    _UNMANAGED = -1

    def __init__(self, scheduler: Scheduler, name: str) -> None:
        self.scheduler = scheduler
        self.name = name
        self.owner: int | None = None

    def locked(self) -> bool:
        return self.owner is not None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        s = self.scheduler
        me = s.managed()
        if me is None:
            return self._acquire_unmanaged(blocking, timeout)
        s.point(f"acquire {self.name}")
        with s._cond:
            while self.owner is not None:
                if not blocking:
                    return False
                s.blocked[me] = self
                s.timeouts[me] = timeout >= 0
                if s.current == me:
                    s.current = None
                    s.last = me
                s._schedule()
                while me in s.blocked:
                    s._cond.wait(_TICK)
                    s._tick()
                s.timeouts.pop(me, None)
                s._await_turn(me)
                if me in s.timed_out:
                    s.timed_out.discard(me)
                    return False
                if me in s.deadlocked:
                    s.deadlocked.discard(me)
                    raise Deadlock(f"every thread waits for a lock ({self.name})")
            self.owner = me
            return True

    def _acquire_unmanaged(self, blocking: bool, timeout: float) -> bool:
        s = self.scheduler
        give_up = None if timeout < 0 else time.monotonic() + timeout
        with s._cond:
            while self.owner is not None:
                if not blocking or (give_up is not None and time.monotonic() >= give_up):
                    return False
                s._cond.wait(_TICK)
            self.owner = self._UNMANAGED
            return True

    def release(self) -> None:
        s = self.scheduler
        with s._cond:
            if self.owner is None:
                raise RuntimeError(f"release of the unlocked lock {self.name}")
            self.owner = None
            for t, lock in list(s.blocked.items()):
                if lock is self:
                    del s.blocked[t]
                    s.waiting[t] = f"woken {self.name}"
            s._schedule()
            s._cond.notify_all()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


_PLAIN_LOCK = type(threading.Lock())


def instrument(obj: object, scheduler: Scheduler, names: Iterable[str] | None = None) -> list[str]:
    """Replace the plain :class:`threading.Lock` attributes of ``obj`` (or those named)
    with locks ``scheduler`` controls; returns the names replaced.  How the harness reaches
    the locks of objects it did not build (a backend's, a lifecycle's mutex) without the
    objects knowing."""
    replaced = []
    for name, value in list(vars(obj).items()):
        if names is not None and name not in names:
            continue
        if isinstance(value, _PLAIN_LOCK):
            setattr(obj, name, scheduler.lock(f"{type(obj).__name__}.{name}"))
            replaced.append(name)
    return replaced


class ScheduledClock:
    """The harness's clock: real time and real timers (:class:`MonotonicClock`), but a wait
    is a *yield* point that returns at once — a retry wait or a busy-lock poll lets the
    other threads run instead of sleeping."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._real = MonotonicClock()

    def now(self) -> float:
        return self._real.now()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Disarm:
        return self._real.call_later(seconds, callback)

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        self.scheduler.pause(f"sleep {seconds:g}")
        return not wake.is_set()


__all__ = [
    "DEFAULT_STALL",
    "DEFAULT_GIVE_UP",
    "ScheduleHang",
    "Deadlock",
    "Chooser",
    "Policy",
    "PCT",
    "RandomWalk",
    "Replay",
    "policy_from_json",
    "ScheduleRecord",
    "Scheduler",
    "ScheduledLock",
    "instrument",
    "ScheduledClock",
]
