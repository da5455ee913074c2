"""A seeded random scheduler over the simulated runtime (every step refinement-checked).

It picks any runtime step — client, worker, reconciler, environment (time, crashes, links,
wipes) — with random parameters, and a fault hook that turns some store calls into
``abort``/``unknown-committed``/``unknown-aborted``.  Used by ``test_random_walk.py``."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from remora.context import Context
from remora.faults import COMMIT, FaultDecision, IOCall, IOReport, Outcome
from remora.jobs.credentials import write_credential
from remora.jobs.model import AttemptId, JobsConfig, Service
from remora.jobs.model import Outcome as JobOutcome
from remora.sim.jobs.refinement import RefinementChecker
from remora.sim.jobs.simulation import SimConfig, Simulation

WRITE_OUTCOMES = (Outcome.ABORT, Outcome.UNKNOWN_COMMITTED, Outcome.UNKNOWN_ABORTED)


class RandomFaults:
    def __init__(self, rng: random.Random, rate: float) -> None:
        self.rng = rng
        self.rate = rate
        self.enabled = True
        self.seen: dict[str, int] = {}

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        if not self.enabled or self.rng.random() >= self.rate:
            return COMMIT
        outcome = (
            self.rng.choice(WRITE_OUTCOMES) if "write" in call.operation.value else (Outcome.ABORT)
        )
        self.seen[outcome.value] = self.seen.get(outcome.value, 0) + 1
        return FaultDecision(outcome, 0, selected=True)

    def boundary(self, call: IOCall, at: Any, ctx: Context) -> None:
        return None

    def returned(self, call: IOCall, report: IOReport) -> None:
        return None


def walk(
    seed: int,
    steps: int = 150,
    *,
    fault_rate: float = 0.05,
    backends: Any = None,
    embedded_guard: bool = True,
) -> RefinementChecker:
    rng = random.Random(seed)
    jobs = ("j1", "j2", "j3")
    workers = ("w1", "w2", "w3")
    hook = RandomFaults(rng, fault_rate)
    sim = Simulation(
        SimConfig(
            jobs=jobs,
            workers=workers,
            concurrency=2,
            jobs_config=JobsConfig(
                max_attempts=3,
                max_progress=3,
                lease_ticks=2,
                reservation_ticks=2,
                global_limit=3,
                max_credential_intents=2,
            ),
            max_coord_losses=2,
            max_partitions=3,
        ),
        hook=hook,
        backends=backends,
    )
    chk = RefinementChecker(sim)
    r = sim.reconciler
    if seed % 2:
        # Half the walks run the embedded mode (Simulation.embed): each worker's
        # coordination is private, so a cancel or a revocation elsewhere cannot raise its
        # mirror beforehand — only the worker's own durable-locked refresh (durable_guard)
        # protects its steps.
        sim.embed()
        for wk_ in sim.workers.values():
            wk_.durable_guard = embedded_guard
    hook.enabled = False
    chk.step(lambda: sim.start("w1"))
    hook.enabled = True

    def attempts(state: str | None = None) -> list[tuple[Any, AttemptId]]:
        return sorted(
            (
                (w, a)
                for w in sim.workers.values()
                for a, la in w.attempts.items()
                if w.up and (state is None or la.state == state)
            ),
            key=lambda x: (x[0].id, x[1]),
        )

    def pick_attempt() -> AttemptId | None:
        xs = attempts()
        return rng.choice(xs)[1] if xs else None

    def on_attempt(fn: Callable[[AttemptId], Any]) -> Callable[[], Any]:
        def go() -> Any:
            a = pick_attempt()
            return None if a is None else fn(a)

        return go

    def on_owner(name: str, *extra: Any, state: str | None = "executing") -> Callable[[], Any]:
        def go() -> Any:
            xs = attempts(state)
            if not xs:
                return None
            w, a = rng.choice(xs)
            return getattr(w, name)(a, *extra)

        return go

    def reserve() -> Any:
        queued = sorted(sim.stores.coordination.snapshot().queued)
        ups = [w for w in sim.workers.values() if w.up]
        if not queued or not ups:
            return None
        return rng.choice(ups).reserve(rng.choice(queued))

    def authorize() -> Any:
        xs = [(w, j) for w in sim.workers.values() if w.up for j in w.reservations]
        if not xs:
            return None
        w, j = rng.choice(sorted(xs, key=lambda x: (x[0].id, x[1])))
        return w.authorize(j)

    def job() -> str:
        return rng.choice(jobs)

    def wk() -> Any:
        return sim.worker(rng.choice(workers))

    del wk
    submitted: list[str] = []

    def submit() -> None:
        left = [j for j in jobs if j not in submitted]
        if left:
            sim.submit(left[0])
            submitted.append(left[0])

    def advance() -> Any:
        xs = attempts("executing")
        if not xs:
            return None
        w, a = rng.choice(xs)
        local = w.attempts[a]
        if local.progress >= 3:
            return None
        return w.advance(a, rng.randint(local.progress + 1, 3), b"p")

    def send() -> Any:
        o = rng.choice(list(JobOutcome))
        return on_owner("send_outcome", o)()

    def secret() -> Any:
        a = pick_attempt()
        if a is None:
            return None
        return write_credential(sim.stores, sim.client, a, b"s")

    ops: list[tuple[int, Callable[[], Any]]] = [
        (3, submit),
        (1, lambda: sim.start(rng.choice(workers))),
        (1, lambda: sim.crash(rng.choice(workers)) if rng.random() < 0.3 else None),
        (1, lambda: sim.shutdown(rng.choice(workers)) if rng.random() < 0.3 else None),
        (2, lambda: sim.drop_link(rng.choice(workers), rng.choice(list(Service)))),
        (3, lambda: sim.restore_link(rng.choice(workers), rng.choice(list(Service)))),
        (1, lambda: sim.wipe() if rng.random() < 0.3 else None),
        (4, sim.tick),
        (2, lambda: sim.cancel(job())),
        (4, lambda: r.enqueue(job())),
        (1, lambda: r.publish_cancel_notice(job())),
        (1, lambda: r.clean_terminal(job())),
        (1, lambda: r.clear_stale_progress(job())),
        (1, lambda: r.release_reservation(job())),
        (2, on_attempt(r.expire_lease)),
        (2, lambda: r.expire_reservation(job())),
        (2, on_attempt(r.reap)),
        (2, lambda: r.schedule_retry(job())),
        (2, lambda: r.finalize_cancel(job())),
        (1, on_attempt(r.cleanup_stage)),
        (1, on_attempt(r.process_outcome)),
        (1, lambda: r.invalidate_checkpoint(job())),
        (3, r.reconcile_once),
        (5, reserve),
        (5, authorize),
        (5, on_owner("activate", state="authorized")),
        (3, on_owner("renew")),
        (2, on_owner("report_progress")),
        (5, advance),
        (2, on_owner("checkpoint")),
        (4, send),
        (4, on_owner("process_outcome", state=None)),
        (2, on_owner("cooperative_stop")),
        (2, on_owner("record_stop", state=None)),
        (2, on_owner("release_lease", state=None)),
        (1, lambda: sim.worker(rng.choice(workers)).release_reservation(job())),
        (1, secret),
    ]
    weights = [w for w, _ in ops]
    for _ in range(steps):
        _, op = rng.choices(ops, weights=weights)[0]
        chk.step(op)
    return chk


def drain(chk: RefinementChecker, rounds: int = 60) -> None:
    """Fault-free: restore links, start a spare incarnation, let time pass and reconcile,
    stop what runs; every step still checked."""
    sim = chk.sim
    hook = sim.hook
    if isinstance(hook, RandomFaults):
        hook.enabled = False
    for w, wk in sim.workers.items():
        for svc in list(wk.actor.links.down):
            chk.step(lambda w=w, svc=svc: sim.restore_link(w, svc))
    for _ in range(rounds):
        chk.step(sim.reconciler.reconcile_once)
        for wk in sim.workers.values():
            if not wk.up:
                continue
            for a, local in list(wk.attempts.items()):
                if local.state == "executing":
                    chk.step(lambda wk=wk, a=a: wk.cooperative_stop(a))
                chk.step(lambda wk=wk, a=a: wk.record_stop(a))
                chk.step(lambda wk=wk, a=a: wk.release_lease(a))
        chk.step(sim.tick)
