"""The coordination store: reconstructible state (queue, reservations and leases with ages,
cancel notices, live progress), in process memory (embedded default, simulation) or Redis
(:mod:`remora.jobs.redis_coordination`).

Every operation is atomic and guarded — :class:`MemoryCoordination` under one lock with the
``can_*`` methods of the :class:`~remora.jobs.guards.Guards` it is given, Redis in one Lua
script with the same conditions — and appends the spec action it performed to the
coordination log in the same atomic step (its position orders coordination steps when a run
is validated).

Besides the spec's variables the store keeps a **durable mirror** per job: a token *floor*
(every token at or below it is revoked) and a *cancel* mark.  A runtime step that revokes
durable authority raises the floor **before** it commits durably (and ``RequestCancel``
marks cancel before it commits), so the mirror never claims more than the durable store
holds: ``ActivateAttempt``, ``RenewLease`` and ``ReportProgress`` compare the attempt's
token with it inside their atomic step — that is their linearization point for
``CurrentAuthority`` and ``phase = Running`` (see ``docs/jobs.md``).  A wipe forgets the
mirror, and with it every reservation and lease those steps need, so nothing is lost.

Ages: a reservation's or lease's age is the number of whole ticks (``tick_ms``) since it was
made or renewed, capped at the limit, read from the store's clock.  A lease is never
dropped by a TTL: the reaper's ``ExpireLease`` marks it expired explicitly, so the
expiry is a logged step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import attrs

from remora.clock import Clock
from remora.errors import Unavailable, UnknownResult
from remora.jobs.actions import Action
from remora.jobs.guards import SPEC_GUARDS, Guards
from remora.jobs.io import Actor, JobOperation, io_call
from remora.jobs.model import (
    DEFAULT_QUEUE,
    AttemptId,
    CoordEntry,
    CoordSnapshot,
    JobsConfig,
    Lease,
    LiveProgress,
    Reservation,
)


def order_key(order: str) -> tuple[int, int]:
    """Sort key of a coordination log position (``"<ms>-<n>"``, as Redis stream ids)."""
    head, _, tail = order.partition("-")
    return int(head), int(tail or 0)


def narrow(c: CoordSnapshot, job: str, attempts: Iterable[AttemptId] = ()) -> CoordSnapshot:
    """``c`` restricted to ``job`` and the leases of ``attempts``: every guard of
    :mod:`remora.jobs.guards` about ``job`` or one of ``attempts`` evaluates the same on it,
    except :meth:`~remora.jobs.guards.Guards.live_count` and ``other_live_lease`` (which need every
    lease; the scripts that use them read the store themselves).  Its down marks are those
    of its leases' holders only, as the Redis store's ``View`` reads them (a worker asks
    about its own attempt: :meth:`~remora.jobs.worker.Worker.cooperative_stop`) — the
    simulation's store tells a caller no more than production's does (found by the
    coordination twin, ``tests/jobs/coordination_twin.py``)."""
    wanted = set(attempts)
    leases = {a: lease for a, lease in c.leases.items() if a in wanted}
    return CoordSnapshot(
        frozenset({job} & c.queued),
        {job: c.reservations[job]} if job in c.reservations else {},
        leases,
        frozenset({job} & c.notices),
        {job: c.progress[job]} if job in c.progress else {},
        {job: c.floors[job]} if job in c.floors else {},
        frozenset({job} & c.cancels),
        c.now_ms,
        frozenset(lease.worker for lease in leases.values()) & c.down,
    )


def active_part(c: CoordSnapshot) -> CoordSnapshot:
    """``c`` without its dead leases and without the mirror (floors, cancel marks, down
    marks): the reconciler's guards (``can_expire_*``, ``coordination_dirty``,
    ``can_enqueue``, the reaper's lease check) evaluate the same on it.  The Redis store's
    ``Active`` read carries no down marks, so neither does this: an incremental pass
    sweeps no marks in the simulation either (the full passes do; found by the
    coordination twin, ``tests/jobs/coordination_twin.py``)."""
    return attrs.evolve(
        c,
        leases={a: lease for a, lease in c.leases.items() if lease.live},
        floors={},
        cancels=frozenset(),
        down=frozenset(),
    )


def read_back(coord: Coordination, actor: Actor, job: str, worker: str) -> str | None:
    """The reservation id of a ``Reserve`` whose reply was lost but which took effect (the
    log says so; the id was in the lost reply): read back from the store — else the worker
    would hold a made-up id, and its ``AuthorizeAttempt`` and ``ActivateAttempt``, which
    compare it, would be refused although the spec enables them (found by the job
    machines' judgement of refusals).  None when the reservation is no longer this
    worker's (it expired or was released meanwhile)."""
    r = coord.view(actor, job).reservations.get(job)
    return r.rid if r is not None and r.worker == worker else None


@attrs.frozen(order=True)
class Rank:
    """Where a queued job stands in its queue: higher ``priority`` first, then the lower
    ``order`` (the submission order), then the id.  Not a spec variable: which queued job
    a worker reserves is the spec's free choice; the rank is the runtime's choice."""

    priority_key: int  # -priority: sorting ascending puts the highest priority first
    order: int
    job: str

    @classmethod
    def of(cls, job: str, priority: int, order: int) -> Rank:
        return cls(-priority, order, job)


def ranked(ranks: Iterable[tuple[str, Rank]], queues: Iterable[str] | None) -> list[str]:
    """The queued jobs of ``queues`` (every queue when None) in rank order."""
    wanted = None if queues is None else frozenset(queues)
    return [r.job for q, r in sorted(ranks, key=lambda qr: qr[1]) if wanted is None or q in wanted]


class Coordination(Protocol):
    """What the runtime needs from a coordination store."""

    config: JobsConfig

    def enqueue(
        self,
        actor: Actor,
        job: str,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        order: int = 0,
    ) -> bool:
        """``Enqueue(j)`` into ``queue`` with its rank (``priority``, then ``order``)."""
        ...

    def reserve(
        self, actor: Actor, job: str, worker: str, executing: int, local_limit: int
    ) -> str | None: ...

    def reserve_batch(
        self,
        actor: Actor,
        jobs: Sequence[str],
        worker: str,
        executing: int,
        local_limit: int,
        limit: int,
    ) -> list[tuple[str, str]]:
        """``Reserve(j, w)`` for each of ``jobs`` in order, in **one** call to the store,
        until ``limit`` are reserved: each ``(job, rid)`` reserved.  The same observable
        result as calling :meth:`reserve` on each in turn — each job's guard is evaluated on
        the state the earlier ones left (its own global and local limit check), each is
        logged as a ``Reserve`` step of its own, in order, with a sequence number of its
        own — but one round trip, not one per job (docs/jobs.md, *Batched
        transitions*)."""
        ...

    def activate(
        self, actor: Actor, a: AttemptId, worker: str, rid: str, progress: int
    ) -> bool: ...

    def renew(self, actor: Actor, a: AttemptId, worker: str) -> bool: ...

    def report_progress(self, actor: Actor, a: AttemptId, progress: int) -> bool: ...

    def expire_lease(self, actor: Actor, a: AttemptId) -> bool: ...

    def expire_reservation(self, actor: Actor, job: str) -> bool: ...

    def release_lease(self, actor: Actor, a: AttemptId) -> bool: ...

    def release_reservation(self, actor: Actor, job: str, rid: str | None) -> bool: ...

    def publish_cancel_notice(self, actor: Actor, job: str) -> bool: ...

    def clean_terminal(self, actor: Actor, job: str) -> bool: ...

    def clean_terminal_batch(self, actor: Actor, jobs: Sequence[str]) -> list[str]:
        """``CleanTerminalCoordination(j)`` for each of ``jobs`` (terminal, as the caller
        read under their durable locks) in order, in **one** call to the store: the jobs
        it cleaned, each logged as a step of its own with a sequence number of its own.
        A job whose coordination is already clean is refused (and not logged), as
        :meth:`clean_terminal` refuses it."""
        ...

    def clear_stale_progress(self, actor: Actor, job: str, authority: AttemptId | None) -> bool: ...

    def raise_floor(self, actor: Actor, job: str, token: int) -> None: ...

    def mark_cancel(self, actor: Actor, job: str) -> None: ...

    def mark_down(self, actor: Actor, worker: str) -> None: ...

    def unmark_down(self, actor: Actor, workers: Iterable[str]) -> None: ...

    def publish_down(self, actor: Actor, workers: Iterable[str]) -> None: ...

    def is_marked(self, actor: Actor) -> bool: ...

    def wipe(self, actor: Actor) -> None: ...

    def snapshot(self, actor: Actor | None = None) -> CoordSnapshot: ...

    def view(
        self, actor: Actor | None, job: str, attempts: Iterable[AttemptId] = ()
    ) -> CoordSnapshot:
        """A narrow read of one job (:func:`narrow`): what the worker's and the reaper's
        guards of ``job`` need, without reading the whole store."""
        ...

    def active(self, actor: Actor | None = None) -> CoordSnapshot:
        """The reconciler's read (:func:`active_part`): queue, reservations, notices, live
        progress and the *live* leases only — bounded by the work in flight, not by the
        history (released and expired leases stay in the store)."""
        ...

    def await_work(self, actor: Actor, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for an ``Enqueue`` (True when one woke the wait):
        an idle worker's pause between looks at the queue, cut short when work arrives."""
        ...

    def candidates(
        self,
        actor: Actor,
        limit: int,
        accept: Callable[[str], bool] | None = None,
        queues: Iterable[str] | None = None,
        prefetch: Callable[[Sequence[str]], None] | None = None,
    ) -> list[str]:
        """Up to ``limit`` queued jobs of ``queues`` (every queue when None) to try to
        reserve, highest priority first, then in submission order (:class:`Rank`); with
        ``accept``, only jobs it accepts (a worker's registered handlers: the others stay
        queued for a worker that has them — which job to reserve is the spec's free
        choice).  ``prefetch``, with ``accept``, hears the jobs ``accept`` may be asked
        about before it is (the dispatcher reads their handlers in one statement)."""
        ...

    def log(self) -> list[CoordEntry]: ...

    def close(self) -> None: ...


DURABLE_MARK = "@durable"
"""The holder of a down mark republished from the durable store (no actor is named so)."""


@attrs.define
class _Data:
    queued: set[str] = attrs.field(factory=set)
    reservations: dict[str, Reservation] = attrs.field(factory=dict)
    leases: dict[AttemptId, Lease] = attrs.field(factory=dict)
    notices: set[str] = attrs.field(factory=set)
    progress: dict[str, LiveProgress] = attrs.field(factory=dict)
    floors: dict[str, int] = attrs.field(factory=dict)
    cancels: set[str] = attrs.field(factory=set)
    down: set[str] = attrs.field(factory=set)
    #: Who holds each down mark up: the declaring actors whose declaration may still
    #: commit, and :data:`DURABLE_MARK` for a mark republished from the durable store.
    #: A mark is lifted when its last holder lets go (:meth:`~MemoryCoordination.
    #: unmark_down`), so one declarer's failure never lifts another's mark.
    down_by: dict[str, set[str]] = attrs.field(factory=dict)
    #: The queue and rank of each queued job (an index of ``queued``, not a spec variable).
    ranks: dict[str, tuple[str, Rank]] = attrs.field(factory=dict)
    #: The down marks are in place (a fresh store: nothing was declared down before it
    #: existed; after a wipe: not until :meth:`MemoryCoordination.publish_down`).
    marked: bool = True


def _clean(d: _Data, job: str) -> None:
    """``CleanTerminalCoordination(j)``'s effect: the job leaves every coordination entry
    but its leases."""
    d.queued.discard(job)
    d.ranks.pop(job, None)
    d.reservations.pop(job, None)
    d.notices.discard(job)
    d.progress.pop(job, None)


def record_cleans(
    actor: Actor, jobs: Sequence[str], seqs: Sequence[int], steps: Sequence[tuple[int, str]]
) -> list[str]:
    """Record the cleans a batched ``CleanTerminalCoordination`` call made (``steps``:
    each job's index into ``jobs`` and its log order), each with its own sequence number
    and its own job's key (so it is ordered at that job's locked version); the jobs
    cleaned, in order."""
    for i, order in steps:
        actor.record(
            seqs[i],
            Action.CLEAN_TERMINAL_COORDINATION,
            {"j": jobs[i]},
            store="coordination",
            key=jobs[i],
            order=order,
        )
    return [jobs[i] for i, _ in steps]


def copy_data(d: _Data) -> _Data:
    """A copy of a memory store's data that shares no mutable part with it."""
    return attrs.evolve(
        d,
        queued=set(d.queued),
        reservations=dict(d.reservations),
        leases=dict(d.leases),
        notices=set(d.notices),
        progress=dict(d.progress),
        floors=dict(d.floors),
        cancels=set(d.cancels),
        down=set(d.down),
        down_by={w: set(b) for w, b in d.down_by.items()},
        ranks=dict(d.ranks),
    )


class MemoryCoordination:
    """In-process coordination (one lock; time from the injected clock).

    Its log survives :meth:`wipe` (it is the run's history, like the Redis stream copies the
    actors keep); the data does not."""

    def __init__(self, clock: Clock, config: JobsConfig, guards: Guards = SPEC_GUARDS) -> None:
        self.clock = clock
        self.config = config
        #: The conditions of its atomic operations (the spec's unless a simulation plants
        #: a mutation).
        self.guards = guards
        self._data = _Data()
        self._log: list[CoordEntry] = []
        self._lock = threading.Lock()
        self._rids = 0
        self._work = threading.Event()  # set by Enqueue: wakes await_work

    # -- plumbing ---------------------------------------------------------------------------
    def _now(self) -> int:
        return round(self.clock.now() * 1000)

    def _snap(self) -> CoordSnapshot:
        d = self._data
        return CoordSnapshot(
            frozenset(d.queued),
            dict(d.reservations),
            dict(d.leases),
            frozenset(d.notices),
            dict(d.progress),
            dict(d.floors),
            frozenset(d.cancels),
            self._now(),
            frozenset(d.down),
        )

    def _saved(self) -> _Data:
        """A copy of the data (restored after a dry run)."""
        return copy_data(self._data)

    def _op(
        self,
        actor: Actor,
        action: str,
        params: dict[str, Any],
        key: str,
        body: Callable[[_Data, CoordSnapshot, int], Any],
    ) -> Any:
        """One atomic operation: ``body`` returns a truthy result when it changed the store
        (then the step is logged and recorded) or a falsy one when its guard was false."""
        seq = actor.next_seq()
        applied: list[str] = []

        def effect(commit: bool) -> Any:
            with self._lock:
                snap = self._snap()
                saved = self._saved()
                result = body(self._data, snap, snap.now_ms)
                if not commit:
                    self._data = saved
                    return result
                if result:
                    order = f"{len(self._log) + 1}-0"
                    self._log.append(CoordEntry(order, action, params, actor.name, seq))
                    applied.append(order)
                return result

        try:
            result = io_call(actor, JobOperation.COORD_WRITE, key, effect)
        except UnknownResult:
            # Resolved by re-reading the log (the memory store always can): not in it, the
            # call was not applied — Unavailable, as the Redis store answers.
            if not applied:
                raise Unavailable(
                    f"memory {action or key}: not applied (re-read the log)"
                ) from None
            result = True
        if result and applied:
            actor.record(seq, action, params, store="coordination", order=applied[0])
        return result

    # -- spec actions -----------------------------------------------------------------------
    def enqueue(
        self,
        actor: Actor,
        job: str,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        order: int = 0,
    ) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.can_enqueue(c, job, marked=d.marked):
                return False
            d.queued.add(job)
            d.ranks[job] = (queue, Rank.of(job, priority, order))
            return True

        done = bool(self._op(actor, Action.ENQUEUE, {"j": job}, job, body))
        if done:
            self._work.set()
        return done

    def reserve(
        self, actor: Actor, job: str, worker: str, executing: int, local_limit: int
    ) -> str | None:
        def body(d: _Data, c: CoordSnapshot, now: int) -> str | None:
            if not self.guards.can_reserve(
                c, job, worker, executing, local_limit, self.config.global_limit
            ):
                return None
            return self._take(d, job, worker, now)

        result = self._op(actor, Action.RESERVE, {"j": job, "w": worker}, job, body)
        if result is True:  # a lost reply, resolved as applied: its id was in the reply
            return read_back(self, actor, job, worker)
        return str(result) if result else None

    def _take(self, d: _Data, job: str, worker: str, now: int) -> str:
        """``Reserve(j, w)``'s effect once its guard held: the job leaves the queue and its
        ranking, reserved by ``worker`` under a fresh id (returned)."""
        self._rids += 1
        rid = f"r{self._rids}"
        d.queued.discard(job)
        d.ranks.pop(job, None)
        d.reservations[job] = Reservation(worker, rid, now)
        return rid

    def reserve_batch(
        self,
        actor: Actor,
        jobs: Sequence[str],
        worker: str,
        executing: int,
        local_limit: int,
        limit: int,
    ) -> list[tuple[str, str]]:
        # One sequence number per job tried, taken up front (a refused job leaves a gap,
        # as a refused single call does): the reserved jobs' steps keep program order.
        seqs = [actor.next_seq() for _ in jobs]
        applied: list[tuple[int, str]] = []  # (index into jobs, log order) of this call

        def body(d: _Data, now: int) -> list[tuple[str, str]]:
            out: list[tuple[str, str]] = []
            for job in jobs:
                if len(out) >= limit:
                    break
                # Each job's guard on the state the earlier reservations left.
                if not self.guards.can_reserve(
                    self._snap(), job, worker, executing, local_limit, self.config.global_limit
                ):
                    continue
                out.append((job, self._take(d, job, worker, now)))
            return out

        def effect(commit: bool) -> list[tuple[str, str]]:
            with self._lock:
                saved = self._saved()
                out = body(self._data, self._now())
                if not commit:
                    self._data = saved
                    return out
                index = {j: i for i, j in enumerate(jobs)}
                for job, _ in out:
                    order = f"{len(self._log) + 1}-0"
                    i = index[job]
                    self._log.append(
                        CoordEntry(
                            order, Action.RESERVE, {"j": job, "w": worker}, actor.name, seqs[i]
                        )
                    )
                    applied.append((i, order))
                return out

        key = jobs[0] if jobs else ""
        try:
            got = io_call(actor, JobOperation.COORD_WRITE, key, effect)
        except UnknownResult:
            # Resolved by re-reading the log (the memory store always can): the logged
            # reservations were made; their ids were in the lost reply, read back.
            if not applied:
                raise Unavailable("memory Reserve (batch): not applied (re-read the log)") from None
            got = []
            for i, _ in applied:
                rid = read_back(self, actor, jobs[i], worker)
                if rid is not None:
                    got.append((jobs[i], rid))
        for i, order in applied:
            actor.record(
                seqs[i],
                Action.RESERVE,
                {"j": jobs[i], "w": worker},
                store="coordination",
                order=order,
            )
        return got

    def activate(self, actor: Actor, a: AttemptId, worker: str, rid: str, progress: int) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.can_activate(c, a, worker, rid):
                return False
            del d.reservations[a.job]
            d.leases[a] = Lease(worker, now, True)
            d.progress[a.job] = LiveProgress(a, progress)
            return True

        return bool(self._op(actor, Action.ACTIVATE_ATTEMPT, {"a": str(a)}, a.job, body))

    def renew(self, actor: Actor, a: AttemptId, worker: str) -> bool:
        cfg = self.config

        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.can_renew(c, a, worker, cfg.tick_ms, cfg.lease_ticks):
                return False
            d.leases[a] = Lease(worker, now, True)
            return True

        return bool(self._op(actor, Action.RENEW_LEASE, {"a": str(a)}, a.job, body))

    def report_progress(self, actor: Actor, a: AttemptId, progress: int) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.can_report_progress(c, a, progress):
                return False
            d.progress[a.job] = LiveProgress(a, progress)
            return True

        return bool(self._op(actor, Action.REPORT_PROGRESS, {"a": str(a)}, a.job, body))

    def expire_lease(self, actor: Actor, a: AttemptId) -> bool:
        cfg = self.config

        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.can_expire_lease(c, a, cfg.tick_ms, cfg.lease_ticks):
                return False
            d.leases[a] = attrs.evolve(d.leases[a], live=False)
            return True

        return bool(self._op(actor, Action.EXPIRE_LEASE, {"a": str(a)}, a.job, body))

    def expire_reservation(self, actor: Actor, job: str) -> bool:
        cfg = self.config

        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.can_expire_reservation(c, job, cfg.tick_ms, cfg.reservation_ticks):
                return False
            del d.reservations[job]
            return True

        return bool(self._op(actor, Action.EXPIRE_RESERVATION, {"j": job}, job, body))

    def release_lease(self, actor: Actor, a: AttemptId) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            lease = d.leases.get(a)
            if lease is None or not lease.live:
                return False
            d.leases[a] = attrs.evolve(lease, live=False)
            return True

        return bool(self._op(actor, Action.RELEASE_LEASE, {"a": str(a)}, a.job, body))

    def release_reservation(self, actor: Actor, job: str, rid: str | None) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            r = d.reservations.get(job)
            if r is None or (rid is not None and r.rid != rid):
                return False
            del d.reservations[job]
            return True

        return bool(self._op(actor, Action.RELEASE_RESERVATION, {"j": job}, job, body))

    def publish_cancel_notice(self, actor: Actor, job: str) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if job in d.notices:
                return False
            d.notices.add(job)
            return True

        return bool(self._op(actor, Action.PUBLISH_CANCEL_NOTICE, {"j": job}, job, body))

    def clean_terminal(self, actor: Actor, job: str) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.coordination_dirty(c, job):
                return False
            _clean(d, job)
            return True

        return bool(self._op(actor, Action.CLEAN_TERMINAL_COORDINATION, {"j": job}, job, body))

    def clean_terminal_batch(self, actor: Actor, jobs: Sequence[str]) -> list[str]:
        seqs = [actor.next_seq() for _ in jobs]
        applied: list[tuple[int, str]] = []  # (index into jobs, log order) of this call

        def effect(commit: bool) -> list[str]:
            with self._lock:
                saved = self._saved()
                done: list[int] = []
                for i, job in enumerate(jobs):
                    # Each job's guard on the state the earlier cleans left (a job given
                    # twice is cleaned once).
                    if not self.guards.coordination_dirty(self._snap(), job):
                        continue
                    _clean(self._data, job)
                    done.append(i)
                if not commit:
                    self._data = saved
                    return [jobs[i] for i in done]
                for i in done:
                    order = f"{len(self._log) + 1}-0"
                    self._log.append(
                        CoordEntry(
                            order,
                            Action.CLEAN_TERMINAL_COORDINATION,
                            {"j": jobs[i]},
                            actor.name,
                            seqs[i],
                        )
                    )
                    applied.append((i, order))
                return [jobs[i] for i in done]

        try:
            io_call(actor, JobOperation.COORD_WRITE, jobs[0] if jobs else "", effect)
        except UnknownResult:
            # Resolved by re-reading the log (the memory store always can).
            if not applied:
                raise Unavailable(
                    "memory CleanTerminalCoordination (batch): not applied (re-read the log)"
                ) from None
        return record_cleans(actor, jobs, seqs, applied)

    def clear_stale_progress(self, actor: Actor, job: str, authority: AttemptId | None) -> bool:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            if not self.guards.can_clear_stale_progress(c, job, authority):
                return False
            del d.progress[job]
            return True

        return bool(self._op(actor, Action.CLEAR_STALE_LIVE_PROGRESS, {"j": job}, job, body))

    # -- the durable mirror (not spec steps) ------------------------------------------------
    def raise_floor(self, actor: Actor, job: str, token: int) -> None:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            d.floors[job] = max(d.floors.get(job, 0), token)
            return False  # not a spec step: nothing is logged

        self._op(actor, "", {"j": job, "floor": token}, job, body)

    def mark_cancel(self, actor: Actor, job: str) -> None:
        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            d.cancels.add(job)
            return False

        self._op(actor, "", {"j": job, "cancel": True}, job, body)

    def mark_down(self, actor: Actor, worker: str) -> None:
        """The mirror's down mark of ``worker``, raised before its declaration commits:
        ``Reserve``, ``ActivateAttempt``, ``RenewLease`` and ``ReportProgress`` of a
        marked incarnation are refused.  Not a spec step."""

        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            d.down.add(worker)
            d.down_by.setdefault(worker, set()).add(actor.name)
            return False

        self._op(actor, "", {"w": worker, "down": True}, "", body)

    def unmark_down(self, actor: Actor, workers: Iterable[str]) -> None:
        """Let go of ``actor``'s own down marks of ``workers``: its declarations of them
        did not commit (they are durably up), so the marks would claim more than the
        durable store holds.  A mark another declarer — or the durable store, after a
        wipe — still holds stays.  Not a spec step."""
        ids = sorted(workers)

        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            for w in ids:
                holders = d.down_by.get(w)
                if holders is None:
                    continue
                holders.discard(actor.name)
                if not holders:
                    del d.down_by[w]
                    d.down.discard(w)
            return False

        self._op(actor, "", {"up": ids}, "", body)

    def publish_down(self, actor: Actor, workers: Iterable[str]) -> None:
        """Republish the down marks of ``workers`` (every incarnation the durable store
        holds down) after a wipe; ``Enqueue`` is refused until then.  Not a spec step."""
        ids = sorted(workers)

        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            d.down.update(ids)
            for w in ids:
                d.down_by.setdefault(w, set()).add(DURABLE_MARK)
            d.marked = True
            return False

        self._op(actor, "", {"down": ids}, "", body)

    def is_marked(self, actor: Actor) -> bool:
        """Whether the down marks are in place (false after a wipe until republished)."""

        def read(commit: bool) -> bool:
            with self._lock:
                return self._data.marked

        return bool(io_call(actor, JobOperation.COORD_READ, "", read))

    # -- faults and reads -------------------------------------------------------------------
    def wipe(self, actor: Actor) -> None:
        """``LoseCoordinationState``: everything is gone (the log records the wipe)."""

        def body(d: _Data, c: CoordSnapshot, now: int) -> bool:
            self._data = _Data(marked=False)
            return True

        self._op(actor, Action.LOSE_COORDINATION_STATE, {}, "", body)

    def snapshot(self, actor: Actor | None = None) -> CoordSnapshot:
        if actor is None:
            with self._lock:
                return self._snap()

        def read(commit: bool) -> CoordSnapshot:
            with self._lock:
                return self._snap()

        return io_call(actor, JobOperation.COORD_READ, "", read)

    def view(
        self, actor: Actor | None, job: str, attempts: Iterable[AttemptId] = ()
    ) -> CoordSnapshot:
        wanted = tuple(attempts)

        def read(commit: bool = True) -> CoordSnapshot:
            with self._lock:
                return narrow(self._snap(), job, wanted)

        if actor is None:
            return read()
        return io_call(actor, JobOperation.COORD_READ, job, read)

    def active(self, actor: Actor | None = None) -> CoordSnapshot:
        def read(commit: bool = True) -> CoordSnapshot:
            with self._lock:
                return active_part(self._snap())

        if actor is None:
            return read()
        return io_call(actor, JobOperation.COORD_READ, "", read)

    def await_work(self, actor: Actor, timeout: float) -> bool:
        # On the actor's (injected) clock: woken by the next enqueue.
        woken = not actor.ctx.sleep(timeout, wake=self._work)
        self._work.clear()
        return woken

    def candidates(
        self,
        actor: Actor,
        limit: int,
        accept: Callable[[str], bool] | None = None,
        queues: Iterable[str] | None = None,
        prefetch: Callable[[Sequence[str]], None] | None = None,
    ) -> list[str]:
        def read(commit: bool) -> list[str]:
            with self._lock:
                queued = ranked(self._data.ranks.values(), queues)
            return queued if accept is not None else queued[:limit]

        queued = io_call(actor, JobOperation.COORD_READ, "", read)
        if accept is None:
            return queued
        out: list[str] = []
        for n, job in enumerate(queued):  # the filter reads outside the store's call
            if len(out) >= limit:
                break
            if prefetch is not None and n % (8 * limit) == 0:
                prefetch(queued[n : n + 8 * limit])  # a window as long as Redis reads
            if accept(job):
                out.append(job)
        return out

    def log(self) -> list[CoordEntry]:
        with self._lock:
            return list(self._log)

    def close(self) -> None:
        return None


__all__ = [
    "Coordination",
    "MemoryCoordination",
    "Rank",
    "active_part",
    "narrow",
    "order_key",
    "ranked",
    "read_back",
]
