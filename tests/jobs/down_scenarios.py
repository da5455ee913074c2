"""Incarnation liveness: a dead (or cut-off) incarnation is declared down once its
heartbeat expired — the spec's ``CrashWorker(w)`` — and fenced everywhere it could still
act; then its staging is cleaned and a checkpoint it owned is resumed.  Every step is
checked by the refinement checker (memory stores), and every guard and fence has a
planted bug that a test here catches."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from remora.jobs.coordination import MemoryCoordination
from remora.jobs.guards import Guards
from remora.jobs.model import AttemptId, NotEnabled, Outcome, Phase, Service
from remora.jobs.target import MemoryTarget
from remora.sim.jobs.mutations import planted_guards, unguarded
from remora.sim.jobs.refinement import RefinementViolation
from remora.sim.jobs.simulation import SMALL, SPEC_PARTS, Parts
from tests.jobs.scenarios import Run


def expire(run: Run, *, renew: AttemptId | None = None) -> None:
    """Let the heartbeat expiry pass (``down_after``: three lease periods here); the
    running incarnations renew their heartbeats on each tick."""
    cfg = run.sim.stores.config
    for _ in range(round(cfg.down_after_s * 1000 / cfg.tick_ms)):
        run.ok(run.sim.tick)
        if renew is not None:
            run.ok(lambda: run.w1.renew(renew))


def test_a_killed_incarnation_is_declared_down_after_its_heartbeat_expired() -> None:
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"half"))
    run.ok(lambda: run.sim.start("w2"))
    run.ok(lambda: run.sim.crash("w1"))  # SIGKILL: a stutter, nothing recorded
    assert "CrashWorker" not in run.chk.actions
    run.ok(run.sim.tick)
    assert run.ok(lambda: run.r.declare_down("w1")) is False  # the heartbeat is fresh
    expire(run)
    run.ok(lambda: run.r.reconcile_once())
    run.saw("CrashWorker", "ReapLostAttempt")
    assert not run.sim.stores.durable.worker_up("w1")
    assert run.sim.stores.durable.worker_up("w2")  # it renewed its heartbeat
    run.ok(lambda: run.r.reconcile_once())
    run.saw("CleanupStage")
    assert run.sim.stores.target.snapshot()[a].cleaned
    assert "w1" in run.sim.stores.coordination.snapshot().down


def planted(**methods: Any) -> Parts:
    """The spec's parts with guard ``methods`` replaced (given to the simulation)."""
    return Parts(guards=planted_guards(**methods))


def test_no_declaration_without_other_capacity() -> None:
    """``OtherCapacity(w)``: the last incarnation up is not declared down.  Planted: the
    guard without that conjunct declares it."""

    def declared(parts: Parts = SPEC_PARTS) -> bool:
        run = Run(parts=parts)
        run.running()
        run.ok(lambda: run.sim.crash("w1"))
        expire(run)
        return bool(run.ok(lambda: run.r.declare_down("w1")))

    assert declared() is False
    assert declared(planted(declare_down=unguarded("declare_down", "OtherCapacity"))) is True


def test_a_fresh_heartbeat_is_not_declared_down() -> None:
    """A running incarnation that renews its heartbeat is never declared down, and a
    reconciler never declares its own incarnation.  Planted: the guard without the
    freshness conjunct declares the live one."""

    def declared(parts: Parts = SPEC_PARTS) -> bool:
        run = Run(parts=parts)
        run.running()
        run.ok(lambda: run.sim.start("w2"))
        expire(run)
        run.r.incarnation = "w2"
        assert run.ok(lambda: run.r.declare_down("w2")) is False  # itself
        return bool(run.ok(lambda: run.r.declare_down("w1")))

    assert declared() is False
    assert declared(planted(declare_down=unguarded("declare_down", "fresh"))) is True


def cut_off(run: Run) -> AttemptId:
    """w1 runs an attempt, loses its link to the durable store (its heartbeat is missed)
    while it keeps renewing its lease; w2 is up; w1 is declared down."""
    a = run.running()
    run.ok(lambda: run.sim.start("w2"))
    run.ok(lambda: run.sim.drop_link("w1", Service.DURABLE))
    expire(run, renew=a)
    assert run.ok(lambda: run.r.declare_down("w1"))
    run.saw("CrashWorker")
    return a


def test_a_live_incarnation_declared_down_is_fenced_everywhere() -> None:
    """A partitioned but live incarnation, once declared down, can take no step of a
    worker: the coordination store refuses its renew, progress report and reservation,
    the target its stage write, the durable store its checkpoint and outcome; it learns
    it is down from its heartbeat and stops.  Every step is refinement-checked."""
    run = Run()
    a = cut_off(run)
    w1 = run.w1
    run.ok(run.sim.tick)
    assert run.ok(lambda: w1.renew(a)) is False
    assert run.ok(lambda: w1.report_progress(a)) is False
    assert isinstance(run(lambda: w1.advance(a, 1, b"late")), NotEnabled)
    run.ok(lambda: run.sim.submit("j2"))
    assert run.ok(lambda: run.r.enqueue("j2"))
    assert run.ok(lambda: w1.reserve("j2")) is None
    run.ok(lambda: run.sim.restore_link("w1", Service.DURABLE))
    assert isinstance(run(lambda: w1.checkpoint(a)), NotEnabled)
    assert isinstance(run(lambda: w1.send_outcome(a, Outcome.RETRYABLE)), NotEnabled)
    assert run.ok(w1.heartbeat) is False
    assert not w1.up
    # w2 takes the job over; the declared-down incarnation's staging does not block it.
    for _ in range(3):
        run.ok(lambda: run.r.reconcile_once())
        run.ok(run.sim.tick)
    assert run.phase("j1") is Phase.QUEUED


@pytest.mark.parametrize("fence", ["renew", "stage-write", "reserve"])
def test_each_fence_catches_its_planted_bug(fence: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one fence removed, the declared-down incarnation's step is taken and the
    refinement checker reports it (the spec's worker actions need ``WorkerUp``)."""
    parts = SPEC_PARTS
    if fence == "renew":
        parts = planted(
            can_renew=lambda g, c, *args: Guards.can_renew(
                g, attrs_evolve(c, down=frozenset()), *args
            )
        )
    elif fence == "reserve":
        parts = planted(
            can_reserve=lambda g, c, *args: Guards.can_reserve(
                g, attrs_evolve(c, down=frozenset()), *args
            )
        )
    else:
        monkeypatch.setattr(MemoryTarget, "fence", lambda self, actor, worker: None)
    # Room for a second reservation (w1's attempt still counts against its capacity).
    run = Run(concurrency=2, jobs_config=attrs.evolve(SMALL, global_limit=3), parts=parts)
    a = cut_off(run)
    run.ok(run.sim.tick)
    with pytest.raises(RefinementViolation, match="not enabled"):
        if fence == "renew":
            run(lambda: run.w1.renew(a))
        elif fence == "reserve":
            run.ok(lambda: run.sim.submit("j2"))
            run.ok(lambda: run.r.enqueue("j2"))
            run(lambda: run.w1.reserve("j2"))
        else:
            run(lambda: run.w1.advance(a, 1, b"late"))


def attrs_evolve(c: Any, **kw: Any) -> Any:
    return attrs.evolve(c, **kw)


def reserved_after_wipe(*, republished: bool = True, parts: Parts = SPEC_PARTS) -> object:
    """w1 is declared down, the coordination store is wiped, a job is enqueued again:
    what w1's ``Reserve`` of it returns."""
    run = Run(concurrency=2, jobs_config=attrs.evolve(SMALL, global_limit=3), parts=parts)
    cut_off(run)
    run.ok(run.sim.wipe)
    assert "w1" not in run.sim.stores.coordination.snapshot().down
    run.ok(lambda: run.sim.submit("j2"))
    run.ok(lambda: run.r.enqueue("j2"))
    assert ("w1" in run.sim.stores.coordination.snapshot().down) is republished
    return run(lambda: run.w1.reserve("j2"))


def test_a_wipe_does_not_let_a_declared_down_incarnation_reserve() -> None:
    """A wipe forgets the down marks; nothing is enqueued again until they are
    republished (from the durable store), so the declared-down incarnation cannot reserve
    the re-enqueued job."""
    assert reserved_after_wipe() is None


def test_planted_enqueue_without_the_marks_is_caught() -> None:
    """Planted: an Enqueue that does not wait for the down marks after a wipe."""
    parts = planted(
        can_enqueue=lambda g, c, job, marked=True: Guards.can_enqueue(g, c, job, marked=True)
    )
    with pytest.raises(RefinementViolation, match="Reserve"):
        reserved_after_wipe(republished=False, parts=parts)


def test_a_killed_owners_checkpoint_is_resumed_not_invalidated() -> None:
    """``AuthorizeAttempt`` resumes from a valid checkpoint once its owner is stopped —
    which the declaration makes it (``CrashWorker`` stops w's attempts)."""
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"half"))
    run.ok(lambda: run.w1.checkpoint(a))
    run.ok(lambda: run.sim.start("w2"))
    run.ok(lambda: run.sim.crash("w1"))
    expire(run)
    run.ok(lambda: run.r.reconcile_once())
    run.saw("CrashWorker", "ReapLostAttempt")
    w2 = run.sim.worker("w2")
    for _ in range(3):
        run.ok(lambda: run.r.reconcile_once())
        if "j1" in run.sim.stores.coordination.snapshot().queued:
            break
    assert run.ok(lambda: w2.reserve("j1"))
    b = run.ok(lambda: w2.authorize("j1"))
    assert "InvalidateCheckpoint" not in run.chk.actions
    row = next(r for r in run.sim.stores.durable.snapshot().attempts if r.id == b)
    assert row.resumed and row.initial_progress == 1 and row.adopted_from == a.token


def test_memory_coordination_refuses_a_marked_incarnation() -> None:
    """The coordination guards themselves (the Redis scripts are held equal by the
    contract suite): a marked incarnation cannot reserve."""
    run = Run()
    run.ok(lambda: run.sim.start("w1"))
    run.ok(lambda: run.sim.submit("j1"))
    run.ok(lambda: run.r.enqueue("j1"))
    coord = run.sim.stores.coordination
    assert isinstance(coord, MemoryCoordination)
    coord.mark_down(run.r.actor, "w1")
    assert run.ok(lambda: run.w1.reserve("j1")) is None


def test_a_stop_after_a_wipe_asks_the_durable_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a wipe the declared-down incarnation's mark is gone and its lease too: its
    cooperative stop (the lease is lost) must not be recorded — the attempt is stopped in
    the spec already.  The stop asks the durable store first (waits while it cannot
    reach it).  Planted: a durable read that does not report the incarnation down."""
    from remora.errors import Unavailable
    from remora.jobs.durable import DurableStore

    def stop_after_wipe() -> object:
        run = Run()
        a = cut_off(run)
        run.ok(run.sim.wipe)
        assert isinstance(run(lambda: run.w1.cooperative_stop(a)), Unavailable)  # waits
        run.ok(lambda: run.sim.restore_link("w1", Service.DURABLE))
        return run(lambda: run.w1.cooperative_stop(a))

    assert stop_after_wipe() is False
    real = DurableStore.read_locked
    monkeypatch.setattr(
        DurableStore,
        "read_locked",
        lambda self, actor, job: attrs.evolve(real(self, actor, job), workers_down=frozenset()),
    )
    with pytest.raises(RefinementViolation, match="CooperativeStop"):
        stop_after_wipe()


def test_an_embedded_worker_declares_the_earlier_incarnations_down_at_start() -> None:
    """Embedded mode: the worker holding the store's lock knows every other incarnation
    still up is a dead process, and declares it down at start (``CrashWorker``), without
    waiting for its heartbeat to expire."""
    from remora.cli.jobs import declare_earlier_incarnations_down
    from remora.jobs.worker import Worker

    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.advance(a, 1, b"half"))
    run.ok(lambda: run.sim.crash("w1"))
    w2 = run.sim.worker("w2")
    run.ok(lambda: run.sim.start("w2"))
    assert isinstance(w2, Worker)
    declared = run.ok(
        lambda: declare_earlier_incarnations_down(run.sim.stores, w2, run.sim.recorder)
    )
    assert declared == 1
    run.saw("CrashWorker")
    assert not run.sim.stores.durable.worker_up("w1") and run.sim.stores.durable.worker_up("w2")
