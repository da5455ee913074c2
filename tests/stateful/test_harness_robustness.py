"""The harness stays a harness when the system under test misbehaves badly: an exception
from a step or the drain is an ``ERROR`` with its kind and a replayable trace, and the fault
seam reports a foreign exception as such."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

import remora.sim.scheduler
from remora.clock import LogicalClock
from remora.context import Context
from remora.delivery import DeliveryGap, MemoryView
from remora.faults import IOCall, Operation, controlled_call
from remora.sim.report import build_report, replay
from remora.sim.trace import Step
from remora.testing.faults import ScriptedFaults
from remora.testing.machines import ScheduleFailure, WorkerScheduleMachine
from remora.worker import Lifecycle
from tests.common.planted import OWN, trace


class GappyRelay:
    """Planted: the relay delivers seq 2 first, so the view raises :class:`DeliveryGap`."""

    def __init__(self, backend: object, view: MemoryView) -> None:
        self.backend, self.view = backend, view

    def deliver(self, partitions: object) -> None:
        entries = self.backend.outbox_after(0, 0, 10)  # type: ignore[attr-defined]
        for entry in entries[1:]:
            self.view.apply(entry)


def test_delivery_gap_in_the_drain_is_an_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schedule = trace(*OWN, Step("process", 0, 0), Step("process", 0, 0))
    monkeypatch.setattr(remora.sim.scheduler, "Relay", GappyRelay)
    sim = replay(schedule)  # used to raise DeliveryGap out of Simulation.drain
    report = build_report(sim, schedule)
    assert report.status == "ERROR" and report.failure == "ERROR exception"
    assert DeliveryGap.__name__ in sim.violations[0].message


def test_foreign_exception_in_an_effect_is_reported_as_error() -> None:
    hook = ScriptedFaults()

    def boom(commit: bool) -> None:
        raise KeyError("planted")

    with pytest.raises(KeyError):
        controlled_call(hook, IOCall(Operation.CLAIM, 0), Context(LogicalClock()), boom)
    # observation "error" (it used to be "ok"); whether the effect landed is unknown
    assert hook.log == [("claim", 1, "commit", None, "error")]


class CrashingCheckLifecycle(Lifecycle):
    """Planted: ``owned`` itself raises once the lifetime has processed, so the scheduler's
    own end-of-attempt checks (outside the lifecycle's guarded call) hit the exception."""

    def owned(self) -> dict[int, object]:  # type: ignore[override]
        if any(t.frontier > 0 for t in self._owned.values()):
            raise RuntimeError("planted: owned() broke")
        return super().owned()


def test_exception_outside_the_guarded_call_is_an_error() -> None:
    schedule = trace(*OWN, Step("process", 0, 0))
    sim = replay(schedule, lifecycle_factory=CrashingCheckLifecycle)
    assert sim.violations and sim.violations[0].kind == "exception"
    assert build_report(sim, schedule).failure == "ERROR exception"


class DrainCrashMachine(WorkerScheduleMachine):
    """Planted: the drain's delivery breaks (as a DeliveryGap once escaped the drain)."""

    classes = ("valid",)


def test_machine_exports_a_replayable_error_for_a_drain_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    monkeypatch.setattr(remora.sim.scheduler, "Relay", GappyRelay)
    quick = settings(
        max_examples=30,
        database=None,
        derandomize=True,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    with pytest.raises(ScheduleFailure) as info:
        run_state_machine_as_test(DrainCrashMachine, settings=quick)
    assert info.value.failure == "ERROR exception"
    assert "remora sim-worker --replay" in str(info.value)
    assert Path(info.value.trace_path).exists()
