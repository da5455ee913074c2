"""The failure loop end to end: a planted bug is found and shrunk by Hypothesis, its trace is
exported atomically, replays through the CLI to the same failure string, and the printed
@reproduce_failure blob reproduces it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import reproduce_failure, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.cli import main
from remora.sim.report import run_trace
from remora.sim.trace import loads
from remora.testing.machines import ScheduleFailure
from remora.testing.profiles import register_profiles
from remora.worker import Lifecycle
from tests.common.planted import SkipsCancelAfterWakeup
from tests.stateful.machines import SinglePartitionHeavyFaults

SHRUNK_BOUND = 8  # steps in the exported trace of the shrunk example (start included)


def ci() -> settings:
    """The ci profile, with shorter runs (20 steps) so the shrink in this test stays quick."""
    register_profiles()
    return settings(settings.get_profile("ci"), report_multiple_bugs=False, stateful_step_count=20)


class Planted(SinglePartitionHeavyFaults):
    """The suite's heavy-fault machine over short sources; the bug is planted by patching
    (test-only)."""

    min_records = 1
    max_records = 4

    exported: ClassVar[list[str]] = []

    def export(self) -> str:
        path = super().export()
        Planted.exported.append(self.trace().dumps())
        return path


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    # The planted bug: the retry call is made without re-checking cancellation after the
    # wait.  Patched onto Lifecycle itself so the CLI replay below runs the same bug.
    monkeypatch.setattr(Lifecycle, "_before_call", SkipsCancelAfterWakeup._before_call)
    Planted.exported.clear()
    return tmp_path


def test_planted_bug_is_found_shrunk_exported_and_replayed(
    planted: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ScheduleFailure) as exc:
        run_state_machine_as_test(Planted, settings=ci())
    failure = exc.value.failure
    path = planted / "hypothesis-Planted.json"
    assert exc.value.trace_path == str(path)
    assert f"remora sim-worker --replay {path}" in str(exc.value)
    assert f"remora show {path}" in str(exc.value)
    assert path.read_text() == Planted.exported[-1]  # the final, shrunk example remains
    assert not list(planted.glob("*.tmp"))
    trace = loads(path.read_text())
    assert len(trace.steps) <= SHRUNK_BOUND
    assert trace.toolchain.generator == "hypothesis:Planted"

    code = main(["sim-worker", "--replay", str(path)])
    report = json.loads(capsys.readouterr().out)
    # a stop seen after the wakeup, or the budget's deadline (a cancellation too) passed
    # during the wait of a contended call: the same missing check
    assert code == 1 and report["failure"] == failure
    assert failure in ("ERROR io-after-stop", "ERROR postcondition-budget")

    blob = re.search(r"@reproduce_failure\('([^']+)', (b'[^']+')\)", "\n".join(exc.value.__notes__))
    assert blob is not None, "print_blob is on in the ci profile"
    version, data = blob.group(1), eval(blob.group(2))  # a bytes literal printed by Hypothesis

    @reproduce_failure(version, data)
    class Reproduced(Planted):
        pass

    with pytest.raises(ScheduleFailure) as again:
        run_state_machine_as_test(Reproduced, settings=ci())
    assert again.value.failure == failure

    # Without the planted bug the same trace does not fail: the failure was the bug's.
    monkeypatch.undo()
    assert run_trace(trace).status != "ERROR"
