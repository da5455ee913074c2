"""The fair-SCC search on hand-made graphs (WF/SF semantics, SF refinement, stuttering)."""

from __future__ import annotations

from remora.protocol.explore import StateGraph
from remora.protocol.liveness import _Annotated, _fair_set

A, B = 1, 2  # fairness conjunct bits


def ann(edges: dict[int, dict[int, int]], en: list[int], wf: int = 0, sf: int = 0) -> _Annotated:
    n = len(en)
    taken = [edges.get(u, {}) for u in range(n)]
    return _Annotated(StateGraph(steps=()), [], en, taken, wf, sf, [True] * n)


def test_wf_satisfied_when_disabled_somewhere_in_the_cycle() -> None:
    g = ann({0: {1: 0}, 1: {0: 0}}, en=[A, 0], wf=A)
    assert _fair_set(g, {0, 1}) == {0, 1}


def test_wf_violated_when_enabled_everywhere_and_never_taken() -> None:
    g = ann({0: {1: 0}, 1: {0: 0}}, en=[A, A], wf=A)
    assert _fair_set(g, {0, 1}) is None


def test_wf_satisfied_when_taken_inside() -> None:
    g = ann({0: {1: A}, 1: {0: 0}}, en=[A, A], wf=A)
    assert _fair_set(g, {0, 1}) == {0, 1}


def test_taking_the_action_out_of_the_set_does_not_count() -> None:
    g = ann({0: {1: 0, 2: A}, 1: {0: 0}}, en=[A, A, 0], wf=A)
    assert _fair_set(g, {0, 1}) is None


def test_sf_refinement_drops_states_where_the_action_is_enabled() -> None:
    # A is enabled only in 0 and never taken: {0, 1} is unfair under SF, but stuttering in 1
    # forever is fair (A is disabled there).
    g = ann({0: {1: 0}, 1: {0: 0}}, en=[A, 0], sf=A)
    assert _fair_set(g, {0, 1}) == {1}


def test_sf_violated_everywhere() -> None:
    g = ann({0: {1: 0}, 1: {0: 0}}, en=[A, A], sf=A)
    assert _fair_set(g, {0, 1}) is None


def test_stuttering_singleton_is_fair_only_without_enabled_fair_actions() -> None:
    assert _fair_set(ann({}, en=[0]), {0}) == {0}
    assert _fair_set(ann({}, en=[B], wf=B), {0}) is None
    assert _fair_set(ann({}, en=[B], sf=B), {0}) is None


def test_mixed_wf_and_sf() -> None:
    # 0 -> 1 takes A (WF), 1 -> 0 takes nothing; B (SF) is enabled in 1 and never taken.
    g = ann({0: {1: A}, 1: {0: 0}}, en=[A, A | B], wf=A, sf=B)
    # Removing 1 (B enabled) leaves {0} where A is enabled and not taken: unfair.
    assert _fair_set(g, {0, 1}) is None
