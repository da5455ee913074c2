"""Regressions for the places where the runtime could take a step the spec forbids (found
by the seeded random walks of ``test_random_walk.py``; see ``docs/jobs.md``, Findings)."""

from __future__ import annotations

from remora.faults import FaultDecision, Outcome
from remora.jobs import credentials as C
from remora.jobs.io import JobOperation
from remora.jobs.model import JobsConfig, NotEnabled
from remora.jobs.model import Outcome as JobOutcome
from remora.sim.jobs.refinement import RefinementChecker
from remora.sim.jobs.simulation import SimConfig, Simulation
from remora.testing.faults import ScriptedFaults
from tests.jobs.scenarios import Run


def test_worker_learns_an_outcome_the_reconciler_processed() -> None:
    """Finding 2: the reconciler's ``AcceptPermanentFailure`` stops the attempt
    (``AttemptStopped``) while its worker, unaware, went on to ``AdvanceAttempt``."""
    run = Run()
    a = run.running()
    run.ok(lambda: run.w1.send_outcome(a, JobOutcome.PERMANENT))
    assert run.ok(lambda: run.r.process_outcome(a))
    assert isinstance(run(lambda: run.w1.advance(a, 1, b"late")), NotEnabled)
    assert isinstance(run(lambda: run.w1.renew(a)), NotEnabled)
    assert not run.ok(lambda: run.w1.cooperative_stop(a))  # learns instead of stopping
    assert run.w1.attempts[a].finished


def test_lost_reply_of_a_vault_write_is_resolved_by_rereading() -> None:
    """Finding 1: a vault write whose reply was lost (``unknown-committed``) left a live
    secret the writer believed absent — a ``CompleteCredentialWrite`` nobody recorded."""
    hook = ScriptedFaults()
    hook.script[(JobOperation.VAULT_WRITE, 1)] = FaultDecision(  # type: ignore[index]
        Outcome.UNKNOWN_COMMITTED, 0, selected=True
    )
    sim = Simulation(SimConfig(), hook=hook)
    chk = RefinementChecker(sim)
    chk.step(lambda: sim.start("w1"))
    chk.step(lambda: sim.submit("j1"))
    chk.step(lambda: sim.reconciler.enqueue("j1"))
    w = sim.worker("w1")
    chk.step(lambda: w.reserve("j1"))
    a = chk.step(lambda: w.authorize("j1"))
    chk.step(lambda: w.activate(a))  # type: ignore[arg-type]
    c = chk.step(lambda: w.put_secret(a, b"s"))  # type: ignore[arg-type]
    assert not isinstance(c, Exception), c
    assert ("vault-write", 1, "unknown-committed", True, "unknown") in hook.log
    assert chk.actions["CommitCredentialVersion"] == 1


def test_credential_intents_are_bounded_per_job() -> None:
    """Finding 0: a job could prepare more intents than ``MaxCredentialIntents``."""
    run = Run(
        jobs_config=JobsConfig(
            max_attempts=2,
            max_progress=2,
            lease_ticks=1,
            reservation_ticks=1,
            global_limit=1,
            max_credential_intents=1,
        )
    )
    a = run.running()
    run.ok(lambda: C.prepare_credential(run.sim.stores, run.w1.actor, a))
    assert isinstance(
        run(lambda: C.prepare_credential(run.sim.stores, run.w1.actor, a)), NotEnabled
    )
