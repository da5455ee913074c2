"""The two coordination stores side by side: :class:`CoordinationTwin` drives
:class:`~remora.jobs.coordination.MemoryCoordination` and
:class:`~remora.jobs.redis_coordination.RedisCoordination` (its Lua scripts, a private
namespace per example) with the same calls on one logical clock, and holds them to the same
observable results after every call.

Why a machine of its own: the job machines run Redis only as a twin of a whole run (durable
store, workers, reconciler, a few examples under ``ci``), so a script that compares one
field fewer than the memory store is judged only if a run happens to make that call in that
state.  Here every operation of the :class:`~remora.jobs.coordination.Coordination`
protocol is called directly, with arguments drawn from small domains (three jobs, two
workers, three tokens, the reservation ids the stores handed out or a stale one) and time
advanced around the lease and reservation ages, so the guards' edges (an age at its limit, a
marked incarnation, a raised floor, a wiped store) are met hundreds of times per second.

After every call the two stores must agree on: the call's result (a reservation id by
whether there is one), the whole snapshot (reservation ids mapped through the pairs the
twin's ``Reserve`` calls handed out), each job's narrow view, the reconciler's active read,
the ranked candidates of every queue, whether the down marks are in place, and the sequence
of coordination transitions each logged; and the Redis namespace must hold nothing its
snapshot does not show (:func:`~tests.jobs.job_services.namespace_problems`)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from remora.clock import LogicalClock
from remora.context import Context
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.io import Actor
from remora.jobs.model import AttemptId, CoordSnapshot, JobsConfig
from remora.jobs.redis_coordination import RedisCoordination
from tests.jobs.job_services import namespace_keys, namespace_problems

T = TypeVar("T")

JOBS = ("j1", "j2", "j3")
WORKERS = ("w1", "w2")
QUEUES = ("default", "q2")
ACTORS = ("r1", "r2")
#: The incarnations the down-mark rules mark: w1 is never marked, so work keeps flowing.
MARKABLE = ("w2",)
CONFIG = JobsConfig(tick_ms=100, lease_ticks=2, reservation_ticks=2, global_limit=2)

jobs = st.sampled_from(JOBS)
workers = st.sampled_from(WORKERS)
tokens = st.integers(1, 3)
attempts = st.builds(AttemptId, jobs, tokens)


class TwinDisagrees(AssertionError):
    """The memory and Redis coordination stores answered one call differently."""


class CoordinationTwin(RuleBasedStateMachine):
    """Memory and Redis coordination, call for call (module docstring).  ``redis_url``
    is set by the test; a subclass may swap the Redis store's class to plant a bug."""

    redis_url: str = ""
    redis_class: type[RedisCoordination] = RedisCoordination

    def __init__(self) -> None:
        super().__init__()
        self.clock = LogicalClock()
        ctx = Context(self.clock)
        self.actors = {name: Actor(name, ctx) for name in (*ACTORS, *WORKERS, "client")}
        self.memory = MemoryCoordination(self.clock, CONFIG)
        self.redis = self.redis_class(
            self.redis_url,
            CONFIG,
            namespace=f"remora-twin:{secrets.token_hex(6)}",
            clock=self.clock,
        )
        # A fresh Redis namespace cannot tell itself from a wiped one: its down marks are
        # published first, as the runtime's stores do (docs/jobs.md); memory starts marked.
        self.redis.publish_down(self.actors["r1"], [])
        #: (memory's id, Redis's id) of every reservation the twin's ``Reserve`` made.
        self.rids: list[tuple[str, str]] = []
        self.calls = 0
        #: Where memory's log stood at the last wipe.
        self.wiped_at = 0
        self.checks = 0

    def teardown(self) -> None:
        try:
            keys = namespace_keys(self.redis.client, self.redis.ns)
            if keys:
                self.redis.client.delete(*keys)
        finally:
            self.redis.close()
            self.memory.close()

    # -- one call on both ----------------------------------------------------------------------
    def both(self, what: str, call: Callable[[Any], T], same: Callable[[T], Any] = repr) -> T:
        """``call`` on memory, then on Redis: the results must agree (as ``same`` sees
        them); memory's result is returned."""
        self.calls += 1
        got = call(self.memory)
        theirs = call(self.redis)
        if same(got) != same(theirs):
            raise TwinDisagrees(f"{what}: memory answered {got!r}, Redis {theirs!r}")
        return got

    def rid_pair(self, data: st.DataObject) -> tuple[str, str]:
        """A reservation id pair the stores handed out, or a stale id neither did."""
        options = [*self.rids, ("stale", "stale")]
        return data.draw(st.sampled_from(options), label="rid")

    def attempt(self, data: st.DataObject) -> AttemptId:
        """An attempt: most often one that holds a lease (the guards' interesting edges
        are there), else any of the small domain's."""
        # time passes before a lease's call, as it does between a worker's calls (the
        # ages are what these guards compare)
        self.clock.advance(data.draw(st.integers(0, 2), label="half ticks") * CONFIG.tick_ms // 2)
        held = sorted(self.memory.snapshot().leases, key=str)
        if held and data.draw(st.integers(0, 3), label="held") > 0:
            return data.draw(st.sampled_from(held), label="attempt")
        return data.draw(attempts, label="attempt")

    def job(self, data: st.DataObject, among: Callable[[CoordSnapshot], Any]) -> str:
        """A job: most often one of ``among`` the store's state (the queued ones, the
        reserved ones, …), else any of the small domain's."""
        these = sorted(among(self.memory.snapshot()))
        if these and data.draw(st.integers(0, 3), label="among") > 0:
            return data.draw(st.sampled_from(these), label="job")
        return data.draw(jobs, label="job")

    def reserve_on_both(
        self, job: str, worker: str, executing: int, limit: int
    ) -> tuple[str, str] | None:
        """``Reserve`` on both stores: both reserve or neither; the ids' pair, if any."""
        actor = self.actors[worker]
        self.calls += 1
        mine = self.memory.reserve(actor, job, worker, executing, limit)
        theirs = self.redis.reserve(actor, job, worker, executing, limit)
        if (mine is None) != (theirs is None):
            raise TwinDisagrees(f"Reserve({job}, {worker}): memory {mine!r}, Redis {theirs!r}")
        if mine is None or theirs is None:
            return None
        self.rids.append((mine, theirs))
        return mine, theirs

    def activate_on_both(
        self, a: AttemptId, worker: str, rids: tuple[str, str], progress: int
    ) -> None:
        """``ActivateAttempt`` on both stores, each with its own reservation id."""
        actor = self.actors[worker]
        self.calls += 1
        ours = self.memory.activate(actor, a, worker, rids[0], progress)
        other = self.redis.activate(actor, a, worker, rids[1], progress)
        if ours != other:
            raise TwinDisagrees(f"ActivateAttempt({a}, {worker}): memory {ours}, Redis {other}")

    # -- the spec's coordination steps ---------------------------------------------------------
    @rule(
        job=jobs,
        queue=st.sampled_from(QUEUES),
        priority=st.integers(0, 2),
        order=st.integers(0, 3),
    )
    def enqueue(self, job: str, queue: str, priority: int, order: int) -> None:
        actor = self.actors["client"]
        self.both(
            f"Enqueue({job})",
            lambda c: c.enqueue(actor, job, queue=queue, priority=priority, order=order),
        )

    @rule(data=st.data(), worker=workers, executing=st.integers(0, 1), limit=st.integers(1, 2))
    def reserve(self, data: st.DataObject, worker: str, executing: int, limit: int) -> None:
        self.reserve_on_both(self.job(data, lambda c: c.queued), worker, executing, limit)

    @rule(
        data=st.data(),
        worker=workers,
        executing=st.integers(0, 1),
        local=st.integers(1, 3),
        limit=st.integers(1, 3),
    )
    def reserve_batch(
        self, data: st.DataObject, worker: str, executing: int, local: int, limit: int
    ) -> None:
        """A batching dispatcher's reservation: several jobs (mostly queued ones, in a
        drawn order, perhaps repeated) in one call."""
        queued = sorted(self.memory.snapshot().queued)
        pool = st.sampled_from(queued) if queued else jobs
        batch = data.draw(st.lists(st.one_of(pool, jobs), min_size=1, max_size=3), label="jobs")
        actor = self.actors[worker]
        self.calls += 1
        mine = self.memory.reserve_batch(actor, batch, worker, executing, local, limit)
        theirs = self.redis.reserve_batch(actor, batch, worker, executing, local, limit)
        if [j for j, _ in mine] != [j for j, _ in theirs]:
            raise TwinDisagrees(
                f"reserve_batch({batch}, {worker}): memory {mine!r}, Redis {theirs!r}"
            )
        self.rids.extend((ours, other) for (_, ours), (_, other) in zip(mine, theirs, strict=True))

    @rule(job=jobs, worker=workers, token=tokens, progress=st.integers(0, 2))
    def take_work(self, job: str, worker: str, token: int, progress: int) -> None:
        """A worker's dispatch of one job, composed: ``Enqueue`` (unless queued),
        ``Reserve`` and ``ActivateAttempt`` with the reservation it got — each call on both
        stores and compared; the rules around it then age, renew, mark, expire and
        release what it made (a uniform mix of single calls seldom gets this far)."""
        client = self.actors["client"]
        if job not in self.memory.snapshot().queued:
            self.both(f"Enqueue({job})", lambda c: c.enqueue(client, job))
        pair = self.reserve_on_both(job, worker, 0, 2)
        if pair is not None:
            self.activate_on_both(AttemptId(job, token), worker, pair, progress)

    @rule(data=st.data(), a=attempts, worker=workers, progress=st.integers(0, 2))
    def activate(self, data: st.DataObject, a: AttemptId, worker: str, progress: int) -> None:
        """Most often with a reservation the stores hold (its worker and id), else with
        whatever was drawn."""
        ours, theirs = self.rid_pair(data)
        held = self.memory.snapshot().reservations
        names = dict(self.rids)
        if held and data.draw(st.integers(0, 2), label="reserved") > 0:
            job = data.draw(st.sampled_from(sorted(held)), label="reserved job")
            a, worker = AttemptId(job, a.token), held[job].worker
            ours, theirs = held[job].rid, names.get(held[job].rid, "stale")
            if data.draw(st.integers(0, 2), label="stale id") == 0:
                ours, theirs = self.rid_pair(data)  # another reservation's id, or none's
        self.activate_on_both(a, worker, (ours, theirs), progress)

    @rule(data=st.data(), worker=workers)
    def renew(self, data: st.DataObject, worker: str) -> None:
        a = self.attempt(data)
        lease = self.memory.snapshot().leases.get(a)
        if lease is not None and data.draw(st.integers(0, 3), label="holder") > 0:
            worker = lease.worker
        actor = self.actors[worker]
        self.both(f"RenewLease({a}, {worker})", lambda c: c.renew(actor, a, worker))

    @rule(data=st.data(), progress=st.integers(0, 2))
    def report_progress(self, data: st.DataObject, progress: int) -> None:
        a = self.attempt(data)
        actor = self.actors["w1"]
        self.both(
            f"ReportProgress({a}, {progress})", lambda c: c.report_progress(actor, a, progress)
        )

    @precondition(lambda self: bool(self.memory.snapshot().leases))
    @rule()
    def sweep_leases(self) -> None:
        """Every call a lease's holder makes, on every lease the stores hold, in one step
        (``RenewLease``, then ``ReportProgress`` of each progress value): whatever state
        the other rules left — a holder marked down, a lease aged past its limit, a floor
        raised above it — each of these guards is compared there, not only when a single
        call happens to be drawn for it."""
        for a, lease in sorted(self.memory.snapshot().leases.items(), key=lambda x: str(x[0])):
            w = lease.worker
            self.both(f"RenewLease({a}, {w})", lambda c, a=a, w=w: c.renew(self.actors[w], a, w))
            for p in range(3):
                self.both(
                    f"ReportProgress({a}, {p})",
                    lambda c, a=a, w=w, p=p: c.report_progress(self.actors[w], a, p),
                )

    @rule(data=st.data())
    def expire_lease(self, data: st.DataObject) -> None:
        a = self.attempt(data)
        actor = self.actors["r1"]
        self.both(f"ExpireLease({a})", lambda c: c.expire_lease(actor, a))

    @rule(data=st.data())
    def expire_reservation(self, data: st.DataObject) -> None:
        job = self.job(data, lambda c: c.reservations)
        actor = self.actors["r1"]
        self.both(f"ExpireReservation({job})", lambda c: c.expire_reservation(actor, job))

    @rule(data=st.data())
    def release_lease(self, data: st.DataObject) -> None:
        a = self.attempt(data)
        actor = self.actors["w1"]
        self.both(f"ReleaseLease({a})", lambda c: c.release_lease(actor, a))

    @rule(data=st.data(), known=st.booleans())
    def release_reservation(self, data: st.DataObject, known: bool) -> None:
        job = self.job(data, lambda c: c.reservations)
        actor = self.actors["w1"]
        ours, theirs = self.rid_pair(data) if known else (None, None)
        self.calls += 1
        mine = self.memory.release_reservation(actor, job, ours)
        other = self.redis.release_reservation(actor, job, theirs)
        if mine != other:
            raise TwinDisagrees(f"ReleaseReservation({job}): memory {mine}, Redis {other}")

    @rule(job=jobs)
    def publish_cancel_notice(self, job: str) -> None:
        actor = self.actors["r1"]
        self.both(f"PublishCancelNotice({job})", lambda c: c.publish_cancel_notice(actor, job))

    @rule(job=jobs)
    def clean_terminal(self, job: str) -> None:
        actor = self.actors["r1"]
        self.both(f"CleanTerminalCoordination({job})", lambda c: c.clean_terminal(actor, job))

    @rule(batch=st.lists(jobs, min_size=1, max_size=4))
    def clean_terminal_batch(self, batch: list[str]) -> None:
        """A reconcile pass's clean of the terminal jobs it found: several jobs (perhaps
        one given twice, perhaps one already clean) in one call."""
        actor = self.actors["r1"]
        self.both(
            f"CleanTerminalCoordination batch {batch}",
            lambda c: c.clean_terminal_batch(actor, batch),
        )

    @rule(job=jobs, authority=st.none() | tokens)
    def clear_stale_progress(self, job: str, authority: int | None) -> None:
        actor = self.actors["r1"]
        a = None if authority is None else AttemptId(job, authority)
        self.both(
            f"ClearStaleLiveProgress({job}, {a})",
            lambda c: c.clear_stale_progress(actor, job, a),
        )

    # -- the durable mirror, the down marks, a wipe --------------------------------------------
    @rule(job=jobs, token=tokens)
    def raise_floor(self, job: str, token: int) -> None:
        actor = self.actors["r1"]
        self.both(f"raise_floor({job}, {token})", lambda c: c.raise_floor(actor, job, token))

    @rule(job=jobs)
    def mark_cancel(self, job: str) -> None:
        actor = self.actors["client"]
        self.both(f"mark_cancel({job})", lambda c: c.mark_cancel(actor, job))

    @rule(by=st.sampled_from(ACTORS), worker=st.sampled_from(MARKABLE))
    def mark_down(self, by: str, worker: str) -> None:
        actor = self.actors[by]
        self.both(f"mark_down({worker}) by {by}", lambda c: c.mark_down(actor, worker))
        # a declared incarnation does not know yet: its process goes on calling
        self.sweep_leases()

    @rule(by=st.sampled_from(ACTORS), which=st.lists(workers, max_size=2, unique=True))
    def unmark_down(self, by: str, which: list[str]) -> None:
        actor = self.actors[by]
        self.both(f"unmark_down({which}) by {by}", lambda c: c.unmark_down(actor, which))

    @rule(which=st.lists(st.sampled_from(MARKABLE), max_size=1))
    def publish_down(self, which: list[str]) -> None:
        actor = self.actors["r1"]
        self.both(f"publish_down({which})", lambda c: c.publish_down(actor, which))

    @precondition(lambda self: self.calls > 0)
    @rule()
    def wipe(self) -> None:
        actor = self.actors["client"]
        self.both("wipe", lambda c: c.wipe(actor))
        log = self.memory.log()  # its own entry opens Redis's new log
        self.wiped_at = len(log) - (1 if log and log[-1].action == "LoseCoordinationState" else 0)

    @rule(half_ticks=st.integers(1, 3))
    def time_passes(self, half_ticks: int) -> None:
        """Half a tick at a time: ages land on both sides of every limit."""
        self.clock.advance(half_ticks * CONFIG.tick_ms // 2)

    # -- after every call ----------------------------------------------------------------------
    def mapped(self, c: CoordSnapshot) -> CoordSnapshot:
        """Redis's snapshot with its reservation ids renamed to memory's."""
        names = {theirs: ours for ours, theirs in self.rids}
        return attrs.evolve(
            c,
            reservations={
                j: attrs.evolve(r, rid=names.get(r.rid, f"unknown {r.rid}"))
                for j, r in c.reservations.items()
            },
        )

    @invariant()
    def the_stores_agree(self) -> None:
        self.checks += 1
        mine, theirs = self.memory.snapshot(), self.mapped(self.redis.snapshot())
        if mine != theirs:
            raise TwinDisagrees(f"snapshots differ:\n  memory {mine}\n  Redis  {theirs}")
        actor = self.actors["r2"]
        # one job's narrow view per step, in turn (a view is a script call of its own)
        for job in (JOBS[self.checks % len(JOBS)],):
            everyone = [AttemptId(job, t) for t in (1, 2, 3)]
            ours = self.memory.view(actor, job, everyone)
            other = self.mapped(self.redis.view(actor, job, everyone))
            if ours != other:
                raise TwinDisagrees(f"view({job}) differs:\n  memory {ours}\n  Redis  {other}")
        ours_a, other_a = self.memory.active(actor), self.mapped(self.redis.active(actor))
        if ours_a != other_a:
            raise TwinDisagrees(f"active reads differ:\n  memory {ours_a}\n  Redis  {other_a}")
        for queues in (None, ("q2",)):
            ours_c = self.memory.candidates(actor, 5, None, queues)
            other_c = self.redis.candidates(actor, 5, None, queues)
            if ours_c != other_c:
                raise TwinDisagrees(f"candidates({queues}): memory {ours_c}, Redis {other_c}")
        if self.memory.is_marked(actor) != self.redis.is_marked(actor):
            raise TwinDisagrees("the stores disagree on whether the down marks are in place")
        # Redis's log starts at its last wipe; memory's is the whole run's
        ours_log = [(e.action, e.params, e.actor) for e in self.memory.log()[self.wiped_at :]]
        other_log = [(e.action, e.params, e.actor) for e in self.redis.log()]
        if ours_log != other_log:
            raise TwinDisagrees(f"the logs differ:\n  memory {ours_log}\n  Redis  {other_log}")
        problems = namespace_problems(self.redis)
        if problems:
            raise TwinDisagrees("the Redis namespace: " + "; ".join(problems))


__all__ = ["CONFIG", "CoordinationTwin", "TwinDisagrees"]
