"""The reducer, against transparent synthetic failure predicates (not broken production
code), plus one real planted failure."""

from __future__ import annotations

import pytest

from remora.errors import InvalidInput
from remora.faults import Outcome
from remora.sim.generate import generate
from remora.sim.reduce import Reducer, reduce_trace
from remora.sim.report import run_trace
from remora.sim.trace import Trace, validate
from tests.common import planted as bug


def unknown_process_by_started_lifetime(trace: Trace) -> str | None:
    """Fails iff some lifetime that the trace starts makes a process step with an
    unknown-committed selector."""
    started = {s.worker for s in trace.steps if s.actor == "start"}
    for s in trace.steps:
        unknown = any(f.outcome is Outcome.UNKNOWN_COMMITTED for f in s.faults)
        if s.actor == "process" and s.worker in started and unknown:
            return "SYNTHETIC unknown-committed process"
    return None


def find_seed(predicate: object) -> Trace:
    for seed in range(1, 200):
        trace = generate(seed, "valid")
        if predicate(trace):  # type: ignore[operator]
            return trace
    raise AssertionError("no seed matches")  # pragma: no cover


def test_reducer_keeps_only_what_the_failure_needs() -> None:
    original = find_seed(unknown_process_by_started_lifetime)
    reduced = reduce_trace(original, unknown_process_by_started_lifetime)
    assert unknown_process_by_started_lifetime(reduced) is not None
    assert [s.actor for s in reduced.steps] == ["start", "process"]
    assert reduced.steps[0].worker == reduced.steps[1].worker  # the dependency is kept
    assert [f.outcome for f in reduced.steps[1].faults] == [Outcome.UNKNOWN_COMMITTED]
    assert reduced.steps[1].faults[0].interleave is None
    assert reduced.steps[1].faults[0].delay_ms == 0
    assert reduced.source == original.source and reduced.config == original.config
    assert validate(reduced) == reduced


def needs_replacement_activity(trace: Trace) -> str | None:
    """Fails iff a replacement lifetime reserved by an interleave later gets a step."""
    reserved = trace.reserved_replacements()
    if any(s.worker in reserved for s in trace.steps):
        return "SYNTHETIC replacement used"
    return None


def test_reducer_respects_replacement_dependencies() -> None:
    original = find_seed(needs_replacement_activity)
    reduced = reduce_trace(original, needs_replacement_activity)
    assert needs_replacement_activity(reduced) is not None
    reserving = [f for s in reduced.steps for f in s.faults if f.interleave is not None]
    assert len(reserving) == 1 and reserving[0].interleave is not None
    rid = reserving[0].interleave.replacement
    assert [s.worker for s in reduced.steps if s.worker == rid]
    assert len(reduced.steps) <= 3  # start, the reserving step, one step of the replacement


def test_reducer_refuses_a_non_failing_trace() -> None:
    with pytest.raises(InvalidInput, match="does not fail"):
        Reducer(generate(1, "valid"), lambda t: None)


def test_reducer_on_a_real_planted_failure() -> None:
    trace = bug.trace(*bug.OWN, *generate(5, "valid", partitions=1).steps[1:20])
    failing = bug.trace(*trace.steps, bug.Step("stop", 0), bug.Step("assign", 0, 0))

    def failure_of(t: Trace) -> str | None:
        return run_trace(t, lifecycle_factory=bug.NeverRetires).failure

    assert failure_of(failing) == "ERROR io-after-stop"
    reduced = reduce_trace(failing, failure_of)
    assert failure_of(reduced) == "ERROR io-after-stop"
    assert len(reduced.steps) <= 3
