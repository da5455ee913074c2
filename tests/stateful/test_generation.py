"""The machines' cheap generation.  The rule choice (:class:`remora.testing.machines.SwarmRules`)
never runs a rule whose precondition is false or whose bundle is empty, keeps swarm testing
(a run may switch rules off), and costs one choice a step; the fault-selector lists are
constructive (no rejected draws) and still unique per (operation, call)."""

from __future__ import annotations

from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidDefinition
from hypothesis.stateful import Bundle, precondition, rule, run_state_machine_as_test

from remora.domain import SourceRecord
from remora.faults import OUTCOMES_FOR, Operation, Outcome
from remora.oracle import AMENDMENT_RULES, Oracle
from remora.sim.checker import raw_records
from remora.sim.trace import OPERATIONS_OF
from remora.testing.machines import SwarmRuleMachine
from remora.testing.strategies import decode_selectors, selector_drafts, source_histories

SETTINGS = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    stateful_step_count=30,
    suppress_health_check=list(HealthCheck),
)


class Toy(SwarmRuleMachine):
    """Three plain rules, one behind a false precondition, one on a bundle nothing fills."""

    never: Bundle[int] = Bundle("never")
    runs: ClassVar[list[tuple[int, frozenset[str], int]]] = []  # (steps, rules run, choices)

    def __init__(self) -> None:
        super().__init__()
        self.ran: list[str] = []

    @rule()
    def a(self) -> None:
        self.ran.append("a")

    @rule()
    def b(self) -> None:
        self.ran.append("b")

    @rule()
    def c(self) -> None:
        self.ran.append("c")

    @precondition(lambda self: False)
    @rule()
    def gated(self) -> None:
        raise AssertionError("a rule with a false precondition ran")

    @rule(x=never)
    def from_empty(self, x: int) -> None:
        raise AssertionError("a rule drew from an empty bundle")

    def teardown(self) -> None:
        choices = len(current_build_context().data.choices)
        type(self).runs.append((len(self.ran), frozenset(self.ran), choices))


def test_only_valid_rules_run_and_the_swarm_switches_rules_off() -> None:
    Toy.runs.clear()
    run_state_machine_as_test(Toy, settings=SETTINGS)
    assert set().union(*(r for _, r, _ in Toy.runs)) == {"a", "b", "c"}
    # swarm testing: many long runs never choose one of the three always-valid rules (with
    # every rule enabled in every run only the simplest few do: 4 of 57 when measured)
    long = [ran for steps, ran, _ in Toy.runs if steps >= 20]
    assert sum(len(ran) < 3 for ran in long) >= len(long) // 4


def test_a_steps_rule_costs_one_choice() -> None:
    """Per run: the swarm (a probability and a flag per rule) once, then per step the
    stop decision and the rule's index, and the final stop decision (no argument here)."""
    Toy.runs.clear()
    run_state_machine_as_test(Toy, settings=SETTINGS)
    rules = 5
    for steps, _, choices in Toy.runs:
        assert choices <= 1 + rules + 2 * steps + 1


class Items(SwarmRuleMachine):
    """A bundle filled by one rule and drawn by another (SwarmRules draws plain bundle
    arguments itself, as Bundle.do_draw would: newest first)."""

    items: Bundle[int] = Bundle("items")
    drawn: ClassVar[list[tuple[int, int]]] = []  # (value, how many items were newer)

    def __init__(self) -> None:
        super().__init__()
        self.added: list[int] = []

    @rule(target=items)
    def put(self) -> int:
        self.added.append(len(self.added))
        return self.added[-1]

    @rule(x=items)
    def take(self, x: int) -> None:
        assert x in self.added
        type(self).drawn.append((x, len(self.added) - 1 - x))


def test_bundle_arguments_are_the_bundles_values() -> None:
    Items.drawn.clear()
    run_state_machine_as_test(Items, settings=SETTINGS)
    newer = [n for _, n in Items.drawn]
    assert 0 in newer and max(newer) > 0  # the newest and older items are both drawn


class Stuck(SwarmRuleMachine):
    @precondition(lambda self: False)
    @rule()
    def gated(self) -> None:
        raise AssertionError("unreachable")


def test_no_valid_rule_is_a_definition_error() -> None:
    with pytest.raises(InvalidDefinition, match="no rule has a true precondition"):
        run_state_machine_as_test(Stuck, settings=SETTINGS)


# -- the fault-selector lists ----------------------------------------------------------------


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(
    actor=st.sampled_from(["assign", "seek", "process"]),
    sizes=st.sampled_from([(0, 2), (1, 2), (2, 3), (1, 3)]),
    data=st.data(),
)
def test_selector_lists_are_unique_sized_and_allowed(
    actor: str, sizes: tuple[int, int], data: st.DataObject
) -> None:
    """Every list ``selector_drafts`` draws has its size in range, at most one selector per
    (operation, call) — duplicates move to a free (operation, call) instead of being
    rejected — and only outcomes the operation accepts."""
    min_size, max_size = sizes
    drafts = data.draw(selector_drafts(actor, min_size, max_size))
    assert min_size <= len(drafts) <= max_size
    slots = [(d.operation, d.call) for d in drafts]
    assert len(set(slots)) == len(slots)
    assert all(d.outcome in OUTCOMES_FOR[d.operation] for d in drafts)
    assert all(d.operation in OPERATIONS_OF[actor] for d in drafts)


def test_colliding_selector_codes_move_to_the_next_free_call() -> None:
    """All-zero codes: the simplest selector, then the same one moved to the next call."""
    drafts = decode_selectors("process", [0, 0, 0], min_size=2, max_size=3)
    assert [(d.operation, d.call) for d in drafts] == [
        (Operation.PROCESS, 1),
        (Operation.PROCESS, 2),
    ]
    assert all(d.outcome is Outcome.COMMIT and d.at is None for d in drafts)


def test_sources_share_subject_names_across_partitions_in_some_runs() -> None:
    """About half the multi-partition histories use one subject name on every partition;
    the oracle folds each partition apart (subjects are scoped to their partition), so a
    valid history stays free of quarantine either way."""
    seen: set[bool] = set()

    @SETTINGS
    @given(source_histories("valid", 2, 8, 3))
    def check(records: list[SourceRecord]) -> None:
        names = [{r.key for r in records if r.partition == p} for p in (0, 1)]
        seen.add(bool(names[0] & names[1]))
        oracle = Oracle(raw_records(records), (0, 1), AMENDMENT_RULES)
        for p in (0, 1):
            assert oracle.expected(p, oracle.end_frontier(p)).quarantine == ()

    check()
    assert seen == {True, False}
