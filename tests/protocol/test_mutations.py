"""Planted mutations: each breaks the spec in one place and the explorer must report exactly
the matching invariant / action property with a counterexample that replays.

Every mutation is a subclass of :class:`Remora` overriding one action (a dropped guard or a
wrong update); production code has no mutation switch.
"""

from __future__ import annotations

import pytest

from remora.protocol.explore import ExploreOptions, explore
from remora.protocol.liveness import check_liveness
from remora.protocol.spec import (
    ACTION_PROPERTIES,
    INVARIANTS,
    AttemptExecuting,
    Remora,
    State,
)
from remora.protocol.trace import replay

from .helpers import model
from .spec_mutants import CASES, Case, NoCleanup


def test_every_invariant_and_action_property_has_a_mutation() -> None:
    assert sorted(c[0] for c in CASES) == sorted([*INVARIANTS, *ACTION_PROPERTIES])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_planted_mutation_is_reported(case: Case) -> None:
    expected, cls, config, overrides, first = case
    base = model(config, **overrides)
    mutant = cls(base.constants)
    opts = ExploreOptions(
        invariants=first or INVARIANTS,
        check_properties=not first,
    )
    r = explore(mutant, config, opts)
    v = r.violation
    assert v is not None, f"{cls.__name__} went unnoticed"
    kind = "action-property" if expected in ACTION_PROPERTIES else "invariant"
    assert (v.kind, v.name) == (kind, expected)
    # The counterexample replays through the mutated spec and really violates the property.
    doc = v.document(mutant, config)
    states, _steps = replay(mutant, doc)
    assert len(states) == len(v.states) >= 2
    if kind == "invariant":
        assert not getattr(mutant, expected)(states[-1])
        assert all(getattr(mutant, expected)(s) for s in states[:-1])
    else:
        step = getattr(mutant, ACTION_PROPERTIES[expected])
        assert not step(states[-2], states[-1])
    # The same trace does not replay through the faithful spec (the mutation is needed).
    with pytest.raises(Exception):  # noqa: B017 - TraceError or a failed check
        faithful_states, _ = replay(base, doc)
        if kind == "invariant":
            assert not getattr(base, expected)(faithful_states[-1])
        else:
            assert not getattr(base, ACTION_PROPERTIES[expected])(
                faithful_states[-2], faithful_states[-1]
            )
        raise AssertionError("trace is also a counterexample of the faithful spec")


def test_deadlock_is_reported_like_tlc() -> None:
    m = NoCleanup(model("tiny").constants)
    r = explore(m, "tiny")
    assert r.violation is not None and r.violation.kind == "deadlock"
    last = r.violation.states[-1]
    assert not m.SystemQuiescent(last)
    assert all(m.apply(last, st) is None for st in m.NextSteps())
    r2 = explore(m, "tiny", ExploreOptions(check_deadlock=False))
    assert r2.violation is None


class StopNeverHappens(Remora):
    def CooperativeStop(self, s: State, a: int) -> State | None:
        return None


def test_planted_liveness_violation_has_a_replayable_lasso() -> None:
    m = StopNeverHappens(model("tiny").constants)
    r = explore(m, "tiny", ExploreOptions(keep_graph=True))
    assert r.violation is None and r.graph is not None
    results = {x.label: x for x in check_liveness(m, r.graph, "tiny")}
    bad = results["EventuallySystemQuiescent"]
    assert not bad.holds and bad.lasso is not None
    states, _ = replay(m, bad.lasso)
    cycle = states[bad.lasso["cycle_start"] :]
    assert not any(m.SystemQuiescent(s) for s in states)
    # The loop closes: the last state's successor is the first state of the cycle.
    succ = {t for _, t in m.Next(states[-1])} | {states[-1]}
    assert cycle[0] in succ
    assert any(s.attemptState[0] == AttemptExecuting for s in cycle)


def test_unmutated_spec_passes_the_mutation_configs() -> None:
    for config in ("tiny", "retry"):
        r = explore(model(config), config)
        assert r.violation is None, r.violation


def test_spec_finding_permit_limits_above_one_allow_two_live_leases() -> None:
    """Reported, not fixed: with GlobalLimit = LocalLimit = 2 the *faithful* spec lets a retry
    activate while the failed attempt's lease is still live (ReleaseLease has not run yet)."""
    m = model("retry", GlobalLimit=2, LocalLimit=2)
    r = explore(m, "retry-permits-2")
    assert r.violation is not None
    assert r.violation.name == "LiveProgressCompatibleWithLiveLease"
    last = r.violation.states[-1]
    assert not m.AtMostOneLiveLeasePerJob(last)
    assert [st.name for st in r.violation.steps][-1] == "ActivateAttempt"
