"""What the simulation gives the runtime instead of the runtime knowing it is simulated
(issue 20, item 3): the guards, the reconciler's and the memory coordination's classes (a
planted mutation is a subclass handed to one simulation — nothing global is patched), the
incarnation's process (a SIGKILL cancels its context: ``tests/jobs/test_loop.py``), and a
lost COMMIT reply resolved from the durable log alone, whatever backend ran below."""

from __future__ import annotations

from typing import Any

import pytest

from remora.faults import FaultDecision, Outcome
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.guards import SPEC_GUARDS, Guards
from remora.jobs.io import JobOperation
from remora.jobs.model import AttemptId, Phase
from remora.jobs.model import Outcome as JobOutcome
from remora.jobs.reconciler import Reconciler
from remora.sim.faults import ScriptedFaults
from remora.sim.jobs.mutations import MUTATIONS, mutation
from remora.sim.jobs.refinement import RefinementChecker, RefinementViolation
from remora.sim.jobs.simulation import SPEC_PARTS, SimConfig, Simulation
from tests.jobs.scenarios import Run

CLASSES = (Guards, Reconciler, MemoryCoordination)


def class_dicts() -> dict[str, dict[str, Any]]:
    return {c.__name__: dict(vars(c)) for c in CLASSES}


def test_every_mutation_plants_itself_in_the_parts_only() -> None:
    """Building every mutation's parts (and a simulation on them) leaves the runtime's
    classes as they were; each mutation replaces exactly what it names."""
    before = class_dicts()
    for m in MUTATIONS:
        parts = m.parts()
        Simulation(SimConfig(), parts=parts).close()
        for named, built, spec in (
            (m.guards, type(parts.guards), Guards),
            (m.reconciler, parts.reconciler, Reconciler),
            (m.coordination, parts.coordination, MemoryCoordination),
        ):
            if not named:
                assert built is spec, m.name
                continue
            assert issubclass(built, spec) and built is not spec, m.name
            assert set(vars(built)) - {"__module__", "__doc__", "__qualname__"} == set(named)
    assert class_dicts() == before
    assert type(SPEC_PARTS.guards) is Guards and SPEC_GUARDS is SPEC_PARTS.guards


def isolation_problems() -> list[str]:
    """A simulation with ``expire-fresh-lease`` planted beside one without, in one process:
    what the spec's simulation did that the spec forbids (empty: the plant stayed in its
    own simulation)."""
    mutant = Run(parts=mutation("expire-fresh-lease").parts())
    spec = Run()
    a = mutant.running()
    b = spec.running()
    problems = []
    with pytest.raises(RefinementViolation, match="ExpireLease"):
        mutant(lambda: mutant.r.expire_lease(a))
    try:
        if spec(lambda: spec.r.expire_lease(b)) is not False:
            problems.append("the spec's simulation expired a fresh lease")
    except RefinementViolation as exc:
        problems.append(f"the spec's simulation: {exc}")
    return problems


def test_a_planted_mutation_changes_only_its_own_simulation() -> None:
    assert isolation_problems() == []


def test_planted_a_mutation_patched_into_the_runtime_globally_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The way mutations used to be planted (``setattr`` on what the runtime looks up):
    every simulation in the process gets the bug."""
    monkeypatch.setattr(
        Guards, "can_expire_lease", lambda self, c, a, tick_ms, limit: c.leases[a].live
    )
    assert [p.split(":")[0] for p in isolation_problems()] == ["the spec's simulation"]


def test_a_lost_reply_of_a_resumed_authorization_is_resolved_from_the_log() -> None:
    """``AuthorizeAttempt`` of a retry resuming a checkpoint, its COMMIT reply lost after it
    committed: the durable log says it committed (the action and the token), the worker
    re-reads the job's row for the rest — it resumes at the checkpoint, step-checked."""
    hook = ScriptedFaults()
    sim = Simulation(SimConfig(), hook=hook)
    chk = RefinementChecker(sim)
    w = sim.worker("w1")

    def ok(op: Any) -> Any:
        result = chk.step(op)
        assert not isinstance(result, Exception), result
        return result

    ok(lambda: sim.start("w1"))
    ok(lambda: sim.submit("j1"))
    ok(lambda: sim.reconciler.enqueue("j1"))
    ok(lambda: w.reserve("j1"))
    a1 = ok(lambda: w.authorize("j1"))
    ok(lambda: w.activate(a1))
    ok(lambda: w.advance(a1, 1, b"half"))
    ok(lambda: w.checkpoint(a1))
    ok(lambda: w.send_outcome(a1, JobOutcome.RETRYABLE))
    ok(lambda: w.process_outcome(a1))
    ok(lambda: w.release_lease(a1))
    ok(lambda: sim.reconciler.schedule_retry("j1"))
    ok(lambda: sim.reconciler.enqueue("j1"))
    ok(lambda: w.reserve("j1"))
    hook.arm({(JobOperation.DURABLE_WRITE, 1): FaultDecision(Outcome.UNKNOWN_COMMITTED, 0)})
    a2 = ok(lambda: w.authorize("j1"))
    assert a2 == AttemptId("j1", 2)
    assert ("durable-write", 1, "unknown-committed", True, "unknown") in hook.log
    assert w.attempts[a2].progress == 1  # the checkpoint, from the row read again
    ok(lambda: w.activate(a2))
    assert sim.stores.durable.job("j1").phase is Phase.RUNNING
    assert chk.actions["AuthorizeAttempt"] == 2
