"""Distinct states, states generated and depth equal TLC's for the named configurations."""

from __future__ import annotations

import pytest

from remora.protocol.config import NAMED_CONFIGS
from remora.protocol.explore import ExploreOptions, explore
from remora.protocol.parallel import explore_parallel
from remora.protocol.spec import INVARIANTS, Remora

from .helpers import SLOW, TLC_COUNTS


@pytest.mark.parametrize("name", ["tiny", "retry", "credentials"])
def test_counts_equal_tlc(name: str) -> None:
    r = explore(Remora(NAMED_CONFIGS[name]), name)
    assert r.violation is None and r.complete
    assert (r.distinct, r.generated, r.depth) == TLC_COUNTS[name]
    assert sum(a.distinct for a in r.per_action.values()) + 1 == r.distinct
    assert sum(a.generated for a in r.per_action.values()) + 1 == r.generated


@SLOW
@pytest.mark.slow
@pytest.mark.parametrize("name", ["crash", "two-jobs", "faults-1w"])
def test_counts_equal_tlc_large(name: str) -> None:
    r = explore(Remora(NAMED_CONFIGS[name]), name)
    assert r.violation is None and r.complete
    assert (r.distinct, r.generated, r.depth) == TLC_COUNTS[name]


def test_counts_equal_tlc_when_tick_branches_twice() -> None:
    m = Remora(NAMED_CONFIGS["retry"]._replace(MaxProgress=1, GlobalLimit=2))
    skip = ("LiveProgressCompatibleWithLiveLease", "AtMostOneLiveLeasePerJob")
    r = explore(
        m, "retry-g2", ExploreOptions(invariants=tuple(i for i in INVARIANTS if i not in skip))
    )
    assert r.violation is None and r.complete
    assert (r.distinct, r.generated, r.depth) == TLC_COUNTS["retry-g2"]


@SLOW
@pytest.mark.slow
def test_counts_equal_tlc_with_three_workers() -> None:
    k = NAMED_CONFIGS["crash"]._replace(
        Workers=("w1", "w2", "w3"), FaultServices=frozenset(), MaxCoordLosses=0
    )
    r, _ = explore_parallel(Remora(k), "crash3", workers=2)
    assert r.violation is None and r.complete
    assert (r.distinct, r.generated, r.depth) == TLC_COUNTS["crash3"]


def test_dfs_reachability_agrees_with_bfs() -> None:
    """An independent traversal (DFS over ``Next``, states as keys) finds the same set."""
    m = Remora(NAMED_CONFIGS["tiny"])
    seen = set(m.Init())
    stack = list(seen)
    while stack:
        s = stack.pop()
        for _step, t in m.Next(s):
            if t not in seen:
                seen.add(t)
                stack.append(t)
    r = explore(m, "tiny", ExploreOptions(keep_graph=True))
    assert r.graph is not None
    assert set(r.graph.states) == seen
    assert len(seen) == TLC_COUNTS["tiny"][0]


def test_max_states_stops_early() -> None:
    r = explore(Remora(NAMED_CONFIGS["retry"]), "retry", ExploreOptions(max_states=500))
    assert not r.complete and r.violation is None
    assert 500 < r.distinct < 600


def test_every_state_satisfies_every_invariant_and_typeok_rejects_garbage() -> None:
    m = Remora(NAMED_CONFIGS["tiny"])
    s = m.Init()[0]
    assert m.TypeOK(s)
    assert not m.TypeOK(s._replace(phase=(True,)))  # a BOOLEAN is not a phase
    assert not m.TypeOK(s._replace(currentToken=(2,)))
    assert not m.TypeOK(s._replace(links=((0, 0),)))
    assert not m.TypeOK(s._replace(links=((0, 0, 3),)))
    assert not m.TypeOK(s._replace(cancelRequested=(1,)))  # a number is not a BOOLEAN
    assert m.TypeOK(s._replace(currentToken=(1,)))
    assert not m.TypeOK(s._replace(currentToken=(True,)))  # memo must not conflate 1/TRUE
    assert not m.TypeOK(s._replace(coordLossCount=1))  # MaxCoordLosses = 0
    assert not m.TypeOK(s._replace(authority=(-2,)))
