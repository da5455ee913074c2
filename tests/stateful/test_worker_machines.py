"""The stateful suite: both machines run under the loaded Hypothesis profile; under a
full-budget profile (ci, nightly) each must also show its reach."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from remora.testing.machines import WorkerScheduleMachine
from remora.testing.profiles import full_budget
from remora.testing.strategies import COMBINATIONS
from tests.stateful.machines import MACHINES, CombinationSweep

ACTORS = {"start", "assign", "seek", "process", "revoke", "stop"}
FAULTS = {
    ("validate", "commit"),
    ("validate", "abort"),
    ("observe", "commit"),
    ("observe", "abort"),
    *{
        (op, o)
        for op in ("claim", "process")
        for o in ("commit", "abort", "unknown-committed", "unknown-aborted")
    },
}
INTERLEAVES = {
    (at, k) for at in ("before", "after") for k in ("stop", "replacement", "stop+replacement")
}
FINAL_STATUSES = {"PASS", "PASS_WITH_EXCLUSIONS", "BLOCKED"}
COMBOS = {c.key for c in COMBINATIONS if c.key[0] != "pattern"}
"""Every (operation, outcome, boundary, stop/replacement) the seed allows: 88 minus the
patterns, e.g. ("process", "unknown-committed", "after", "replacement")."""
PATTERNS = {
    "exhausted",  # every call of a retry loop unavailable
    "unresolved",  # a recovery read that never completes
    "cancel-after-wakeup",  # a stop seen when the retry wait wakes up
    "late-assign",  # callbacks reaching a stopped or retired lifetime
    "late-seek",
    "late-process",
}
CONTENDED = {("past budget", "deadline"), ("within budget", "ok"), ("within budget", "deadline")}
"""The contended-mutex rule: a mutex held past the budget gives up; one held within it lets
the callback through, or its retry wait crosses what remains of the budget."""
EPOCH_RACES = 24
"""The seed's epoch race (unknown-committed process, replacement after the effect) must be
*applied* — the replacement started and the call resumed — at least this often per machine."""


def missing_reach(machine: type[WorkerScheduleMachine]) -> dict[str, set[object]]:
    reach = machine.reach
    gaps: dict[str, set[object]] = {
        "actors": ACTORS - {r[1] for r in reach if r[0] == "actor"},
        "faults": FAULTS - {(r[1], r[2]) for r in reach if r[0] == "fault"},
        "interleaves": INTERLEAVES - {(r[1], r[2]) for r in reach if r[0] == "interleave"},
        "final statuses": FINAL_STATUSES
        - {r[2] for r in reach if r[0] == "status" and r[1] == "final"},
        "before-drain statuses": {"INCOMPLETE"}
        - {r[2] for r in reach if r[0] == "status" and r[1] == "before-drain"},
        "contended mutex": CONTENDED - {(r[1], r[2]) for r in reach if r[0] == "mutex"},
    }
    if machine.applied.get("epoch-race", 0) < EPOCH_RACES:
        gaps["epoch races applied"] = {machine.applied.get("epoch-race", 0)}
    if machine is CombinationSweep:  # the sweep answers for every combination and pattern
        gaps["combinations"] = COMBOS - {r[1:] for r in reach if r[0] == "combo"}
        gaps["patterns"] = PATTERNS - {r[1] for r in reach if r[0] == "pattern"}
    return {k: v for k, v in gaps.items() if v}


def test_missing_reach_names_what_was_not_applied() -> None:
    """Planted: a sweep that reached nothing is reported, combination by combination."""
    CombinationSweep.reach.clear()
    CombinationSweep.applied.clear()
    gaps = missing_reach(CombinationSweep)
    assert gaps["combinations"] == COMBOS and gaps["patterns"] == PATTERNS
    assert gaps["epoch races applied"] == {0}
    assert ("process", "unknown-committed", "after", "replacement") in COMBOS
    assert len(COMBOS) == 84


def swarm_shortfalls(machine: type[WorkerScheduleMachine]) -> list[str]:
    """Rule swarming must stay effective: among runs of 10+ steps, destructive rules and
    each fault family are absent from a good share of runs (and present in some)."""
    if machine.sweep_width > 1:
        return []  # the sweep's own rule makes faulted steps on purpose in most runs
    runs = [kinds for steps, kinds in machine.kinds_per_run if steps >= 10]
    problems = []
    for kind in ("stop", "revoke", "assign with faults", "seek with faults", "process with faults"):
        absent = sum(kind not in k for k in runs) / max(len(runs), 1)
        if not 0.2 <= absent <= 0.9:
            problems.append(f"{kind!r} absent from {absent:.0%} of runs")
    return problems


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.__name__)
def test_machine(machine: type[WorkerScheduleMachine]) -> None:
    machine.reach.clear()
    machine.applied.clear()
    machine.kinds_per_run.clear()
    run_state_machine_as_test(machine)
    if full_budget():
        assert missing_reach(machine) == {}
        assert swarm_shortfalls(machine) == []
