"""Delayed jobs, named queues and priorities in the simulation and the job machines
(issue 22 item 7): a delayed job's ``Enqueue`` is refused until it is due — a refusal of an
action the spec enables, judged and excused by its documented reason (``REFUSAL_REASONS``)
— and never taken early (``ERROR delayed``: the property delayed jobs add, checked after
every step from the run's own account of each due time); the coordination store offers a
queue's jobs by priority, then in submission order.

Planted, each a :class:`~remora.jobs.guards.Guards` given to the run (nothing patched):
* ``Early`` — ``Enqueue`` ignores the delay: refinement and the drain accept it (the spec's
  ``Enqueue`` has no time), only the delayed check kills it — shown both ways, and by the
  machines, whose generated delayed jobs reach it;
* ``Late`` — the due test a tick late: the judgement of refusals kills it (the documented
  reason no longer holds when the runtime refuses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, run_state_machine_as_test

from remora.clock import LogicalClock
from remora.context import Context
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.guards import Guards
from remora.jobs.io import Actor
from remora.jobs.model import JobRow, JobsConfig, Outcome
from remora.sim.jobs.run import REFUSAL_REASONS, JobRun, JobRunFailure, run_trace
from remora.sim.jobs.trace import JobConfig, JobKind, JobStep, loads, new_trace
from remora.testing.job_machines import JobScheduleFailure
from tests.jobs.job_machines import LargerJobs

CONFIG = JobConfig(jobs=("j1", "j2"), workers=("w1",))
HANDLERS = {"j1": (Outcome.SUCCESS,), "j2": (Outcome.SUCCESS,)}
DELAYED = {"j1": JobKind(delay=2)}


class Early(Guards):
    """Planted: a delayed job is enqueued at once."""

    def is_due(self, job: JobRow, now: float) -> bool:
        return True


class Late(Guards):
    """Planted: the due test a tick (1 s) late."""

    def is_due(self, job: JobRow, now: float) -> bool:
        return job.due + 1.0 <= now


def planted(run: JobRun, guards: Guards) -> JobRun:
    run.sim.stores.guards = guards  # every step of the run evaluates these
    return run


def delayed_steps() -> list[JobStep]:
    return [
        JobStep("start", worker="w1"),
        JobStep("submit", job="j1"),
        JobStep("enqueue", job="j1"),
        JobStep("tick"),
        JobStep("enqueue", job="j1"),
        JobStep("tick"),
        JobStep("enqueue", job="j1"),
    ]


def test_a_delayed_job_is_refused_until_due_then_enqueued() -> None:
    run = JobRun(CONFIG, HANDLERS, kinds=DELAYED)
    kinds = [run.execute(s) for s in delayed_steps()]
    # refused twice (the spec enables Enqueue: excused by "not due"), then taken
    assert [k for s, k in zip(delayed_steps(), kinds, strict=True) if s.op == "enqueue"] == [
        "refused",
        "refused",
        "ok",
    ]
    assert run.sim.stores.durable.job("j1").due == 2.0  # two ticks of 1 s after submission
    assert "not due" in [r.name for r in REFUSAL_REASONS["enqueue"]]
    run.drain()
    run.judge()


def test_a_delayed_jobs_reconcile_pass_waits_for_it() -> None:
    run = JobRun(CONFIG, HANDLERS, kinds=DELAYED)
    for s in (JobStep("start", worker="w1"), JobStep("submit", job="j1"), JobStep("reconcile")):
        run.execute(s)
    assert "j1" not in run.sim.stores.coordination.snapshot().queued
    for s in (JobStep("tick"), JobStep("tick"), JobStep("reconcile")):
        run.execute(s)
    assert "j1" in run.sim.stores.coordination.snapshot().queued


def test_planted_an_enqueue_that_ignores_the_delay_is_killed_by_the_delayed_check() -> None:
    run = planted(JobRun(CONFIG, HANDLERS, kinds=DELAYED), Early())
    with pytest.raises(JobRunFailure) as info:
        for s in delayed_steps():
            run.execute(s)
    assert info.value.failure.startswith("ERROR delayed: j1 was enqueued at 0")


@pytest.mark.control
def test_planted_an_early_enqueue_survives_without_the_delayed_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the check the early Enqueue is a spec step, and the run drains: nothing but
    the delayed check sees it."""
    monkeypatch.setattr(JobRun, "early", lambda self: None)
    run = planted(JobRun(CONFIG, HANDLERS, kinds=DELAYED), Early())
    kinds = [run.execute(s) for s in delayed_steps()]
    assert kinds[2] == "ok"  # enqueued before it was due
    run.drain()
    run.judge()


def test_planted_a_due_test_a_tick_late_is_killed_by_the_refusal_judgement() -> None:
    run = planted(JobRun(CONFIG, HANDLERS, kinds=DELAYED), Late())
    with pytest.raises(JobRunFailure) as info:
        for s in delayed_steps():
            run.execute(s)
    assert info.value.failure == (
        "ERROR refused: enqueue j1 was refused though the spec enables Enqueue(j1)"
    )


def test_kinds_travel_in_the_trace_and_replay() -> None:
    kinds = {"j1": JobKind(delay=2, queue="bulk", priority=3)}
    trace = new_trace(CONFIG, HANDLERS, tuple(delayed_steps()), "test", kinds)
    text = trace.dumps()
    assert '"kinds"' in text and loads(text).kinds == kinds
    assert '"timeout"' not in text  # a kind without a timeout reads as before it existed
    timed = {"j1": JobKind(delay=2, timeout=3)}
    text = new_trace(CONFIG, HANDLERS, tuple(delayed_steps()), "test", timed).dumps()
    assert '"timeout": 3' in text and loads(text).kinds == timed
    assert run_trace(loads(text)).failure is None
    plain = new_trace(CONFIG, HANDLERS, tuple(delayed_steps()), "test")
    assert '"kinds"' not in plain.dumps()  # a plain run's trace is as before


def test_the_handlers_timeout_travels_in_the_trace_and_replays() -> None:
    import json

    from remora.sim.codec import TraceError

    plain = new_trace(CONFIG, HANDLERS, tuple(delayed_steps()), "test").dumps()
    assert '"handler_timeout"' not in plain  # a run without one reads as before it existed
    timed = attrs.evolve(CONFIG, handler_timeout=2)
    text = new_trace(timed, HANDLERS, tuple(delayed_steps()), "test").dumps()
    assert '"handler_timeout": 2' in text and loads(text).config == timed
    assert run_trace(loads(text)).failure is None
    for bad in (-1, 1.5, True):
        doc = json.loads(text)
        doc["config"]["handler_timeout"] = bad
        with pytest.raises(TraceError, match=r"trace\.config\.handler_timeout"):
            loads(json.dumps(doc))


def test_the_embedded_mode_travels_in_the_trace_and_replays() -> None:
    import json

    from remora.sim.codec import TraceError

    plain = new_trace(CONFIG, HANDLERS, tuple(delayed_steps()), "test").dumps()
    assert '"embedded"' not in plain  # a run without it reads as before it existed
    embedded = attrs.evolve(CONFIG, embedded=True)
    text = new_trace(embedded, HANDLERS, tuple(delayed_steps()), "test").dumps()
    assert '"embedded": true' in text and loads(text).config == embedded
    assert run_trace(loads(text)).failure is None
    run = JobRun(embedded, HANDLERS)
    assert all(w.durable_guard for w in run.sim.workers.values())
    assert not any(w.durable_guard for w in JobRun(CONFIG, HANDLERS).sim.workers.values())
    for bad in (1, "yes", None):
        doc = json.loads(text)
        doc["config"]["embedded"] = bad
        with pytest.raises(TraceError, match=r"trace\.config\.embedded"):
            loads(json.dumps(doc))


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ({"delay": -1}, "trace.kinds.j1.delay"),
        ({"queue": "no spaces"}, "trace.kinds.j1.queue"),
        ({"priority": 10**7}, "trace.kinds.j1.priority"),
        ({"timeout": -1}, "trace.kinds.j1.timeout"),
        ({"timeout": 1.5}, "trace.kinds.j1.timeout"),
        ({"speed": 1}, "trace.kinds.j1.speed"),
    ],
)
def test_a_bad_kind_is_rejected(kind: dict[str, Any], message: str) -> None:
    import json

    from remora.sim.codec import TraceError

    doc = json.loads(new_trace(CONFIG, HANDLERS, (), "test", DELAYED).dumps())
    doc["kinds"]["j1"] = kind
    with pytest.raises(TraceError, match=message.replace(".", r"\.")):
        loads(json.dumps(doc))


def test_a_queue_offers_its_jobs_by_priority_then_submission_order() -> None:
    clock = LogicalClock()
    coord = MemoryCoordination(clock, JobsConfig())
    actor = Actor("t", Context(clock))
    for job, queue, priority, order in (
        ("a", "default", 0, 1),
        ("b", "default", 5, 2),
        ("c", "bulk", 9, 3),
        ("d", "default", 5, 4),
    ):
        assert coord.enqueue(actor, job, queue=queue, priority=priority, order=order)
    assert coord.candidates(actor, 8, queues=("default",)) == ["b", "d", "a"]
    assert coord.candidates(actor, 8, queues=("bulk",)) == ["c"]
    assert coord.candidates(actor, 8) == ["c", "b", "d", "a"]
    assert coord.candidates(actor, 2, queues=("default", "bulk")) == ["c", "b"]
    assert coord.candidates(actor, 8, queues=()) == []
    assert coord.reserve(actor, "b", "w1", 0, 4)
    assert coord.candidates(actor, 8, queues=("default",)) == ["d", "a"]


HUNT = settings(
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),  # the first failure is enough
)


def test_planted_the_machines_generate_delayed_jobs_that_kill_an_early_enqueue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))

    class EarlyMachine(LargerJobs):
        @initialize(data=st.data())
        def setup(self, data: st.DataObject) -> None:
            super().setup(data)
            assert self.run is not None
            planted(self.run, Early())

    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(EarlyMachine, settings=HUNT)
    assert info.value.failure.startswith("ERROR delayed:")
