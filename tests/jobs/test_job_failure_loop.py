"""The job-trace failure loop end to end: a planted runtime bug is found and shrunk by
Hypothesis, its ``job-schedule-v1`` trace is exported atomically, replays through
``remora sim-jobs --replay`` to the same failure string, reduces with ``remora reduce``, and
the printed ``@reproduce_failure`` blob reproduces it; and the trace reader is as strict as
the worker trace reader (exit 2, one line)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import reproduce_failure, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.cli import main
from remora.sim.jobs.run import run_trace
from remora.sim.jobs.trace import loads
from remora.testing.job_machines import JobScheduleFailure
from remora.testing.profiles import register_profiles
from tests.jobs.job_machines import RaceJobs

PLANTED = "release-running-lease"
SHRUNK_BOUND = 12
SHRINK_CALLS = 120
"""Hypothesis's shrinking of a job-machine example is slow (every candidate pays the
refinement check of each step and the fair drain: shrinking this one to the end takes
about 800 calls, two to seven minutes), so this test caps it — by the number of test
calls the shrinker makes, not by time: the run is derandomized, so the same candidates are
tried in the same order and the exported trace is the same on a loaded machine as on a
quiet one (a 30-second cap let it shrink to 10 steps on a quiet machine and only to 103
under load).  Since the fused ``complete`` step and the loop machine joined the rules the
first failing example is longer (25 calls left 83 steps, 60 left 58); 120 calls take it
under 50 (about half a minute); ``remora reduce`` finishes the job on the exported
trace.  (When the
budget is spent Hypothesis reports it as "very slow shrinking", as it did at the time cap:
the same exit of its engine.)"""


CLOCK_TEST_CALLS = 40
"""The clock test's call budget: enough to shrink the first failing example at all (the
comparison is with no shrinking), a third of :data:`SHRINK_CALLS`'s cost."""


def shrink_call_budget(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    """End Hypothesis's shrinking after ``calls`` test calls, as its own time limit ends it
    (``MAX_SHRINKING_SECONDS``: the engine finds its shrink deadline passed and stops with
    the smallest failing example so far) — by a count instead of the clock."""
    import hypothesis.internal.conjecture.engine as engine

    real = engine.ConjectureRunner.test_function
    made: dict[int, int] = {}

    def counted(self: engine.ConjectureRunner, data: Any) -> None:
        if self.finish_shrinking_deadline is not None:  # the shrink phase has begun
            made[id(self)] = made.get(id(self), 0) + 1
            if made[id(self)] > calls:
                self.finish_shrinking_deadline = float("-inf")  # the engine stops shrinking
        real(self, data)

    monkeypatch.setattr(engine.ConjectureRunner, "test_function", counted)
    # the engine's own clock limit stays only as a guard against a hang: far beyond what
    # the budget takes even on a loaded machine, so it never decides the result
    monkeypatch.setattr(engine, "MAX_SHRINKING_SECONDS", 3600)


def ci() -> settings:
    register_profiles()
    return settings(settings.get_profile("ci"), report_multiple_bugs=False)


class Planted(RaceJobs):
    """The race machine: it composes the reconciler-on-a-running-attempt race by
    construction (the general machines found this bug only by the search's luck)."""

    mutation = PLANTED


def test_planted_bug_is_found_shrunk_exported_replayed_and_reduced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder that does not exist yet (a fresh clone has no artifacts/failures): the export
    # creates it, so the failure is reported as itself, not as an OutputError.
    folder = tmp_path / "fresh" / "failures"
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(folder))
    shrink_call_budget(monkeypatch, SHRINK_CALLS)
    with pytest.raises(JobScheduleFailure) as exc:
        run_state_machine_as_test(Planted, settings=ci())
    failure = exc.value.failure
    assert failure.startswith("ERROR ")
    path = folder / "hypothesis-Planted.json"
    assert exc.value.trace_path == str(path)
    assert f"remora sim-jobs --replay {path}" in str(exc.value)
    assert not list(folder.glob("*.tmp"))
    trace = loads(path.read_text())
    assert trace.config.mutation == PLANTED
    assert trace.toolchain.generator == "hypothesis:Planted"
    assert len(trace.steps) <= 50  # shrunk from the first failing example, within the budget
    capsys.readouterr()

    # The CLI replays the file (with the mutation it names) to the same failure string.
    assert main(["sim-jobs", "--replay", str(path)]) == 1
    assert json.loads(capsys.readouterr().out)["failure"] == failure

    # remora reduce accepts job traces and keeps the failure.
    assert main(["reduce", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"failure: {failure}" in out
    reduced = loads((folder / "hypothesis-Planted-reduced.json").read_text())
    assert len(reduced.steps) <= SHRUNK_BOUND
    assert run_trace(reduced).failure == failure

    # The @reproduce_failure blob printed by Hypothesis reproduces it.
    blob = re.search(r"@reproduce_failure\('([^']+)', (b'[^']+')\)", "\n".join(exc.value.__notes__))
    assert blob is not None, "print_blob is on in the ci profile"
    version, data = blob.group(1), eval(blob.group(2))

    @reproduce_failure(version, data)
    class Reproduced(Planted):
        pass

    with pytest.raises(JobScheduleFailure) as again:
        run_state_machine_as_test(Reproduced, settings=ci())
    assert again.value.failure == failure

    # Without the planted bug the same steps pass: the failure was the bug's.
    clean = trace.to_json()
    del clean["config"]["mutation"]
    from remora.sim.trace import config_digest

    clean["config_digest"] = config_digest(clean["config"])
    assert run_trace(loads(json.dumps(clean))).failure is None


def _shrunk_steps(tmp_path: Path) -> int:
    """The planted bug's exported trace length, found and shrunk under the current patches."""
    with pytest.raises(JobScheduleFailure) as exc:
        run_state_machine_as_test(Planted, settings=ci())
    return len(loads(Path(exc.value.trace_path).read_text()).steps)


def test_the_shrink_budget_does_not_depend_on_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine so loaded that every clock read finds a minute gone: the call budget
    shrinks as on a quiet one; the old 30-second cap (planted back) does not shrink at all
    — as when the failure-loop test failed under load with 103 steps against its 50."""
    import types

    import hypothesis.internal.conjecture.engine as engine

    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    ticks = iter(range(0, 10**9, 60))
    slow = types.SimpleNamespace(perf_counter=lambda: float(next(ticks)), monotonic=time.monotonic)
    monkeypatch.setattr(engine, "time", slow)
    shrink_call_budget(monkeypatch, CLOCK_TEST_CALLS)
    budgeted = _shrunk_steps(tmp_path)
    monkeypatch.undo()
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    monkeypatch.setattr(engine, "time", slow)
    monkeypatch.setattr(engine, "MAX_SHRINKING_SECONDS", 30)  # the wall-clock budget
    unshrunk = _shrunk_steps(tmp_path)
    assert budgeted < unshrunk, (budgeted, unshrunk)


# -- strictness ----------------------------------------------------------------------------


def _good() -> dict[str, object]:
    from remora.jobs.model import Outcome
    from remora.sim.jobs.trace import JobConfig, JobStep, new_trace

    t = new_trace(
        JobConfig(jobs=("j1",), workers=("w1",)),
        {"j1": (Outcome.SUCCESS,)},
        (JobStep("start", worker="w1"), JobStep("submit", job="j1")),
    )
    return t.to_json()


def _redigest(doc: dict[str, object]) -> dict[str, object]:
    from remora.sim.trace import config_digest

    doc["config_digest"] = config_digest(doc["config"])  # type: ignore[arg-type]
    return doc


def _bad_docs() -> dict[str, str]:
    def edit(fn: object) -> str:
        doc = _good()
        fn(doc)  # type: ignore[operator]
        return json.dumps(doc)

    good = json.dumps(_good())
    return {
        "unknown field": edit(lambda d: d.update(extra=1)),
        "unknown step field": edit(lambda d: d["steps"][0].update(job="j1")),
        "trailing content": good + " {}",
        "duplicate key": good[:-1] + ', "drain": true}',
        "NaN": good.replace('"drain": true', '"drain": NaN'),
        "wrong version": edit(lambda d: d.update(version=2)),
        "wrong implementation": edit(lambda d: d.update(implementation="worker-schedule-v1")),
        "changed config": edit(lambda d: d["config"].update(max_attempts=5)),
        "unknown op": edit(lambda d: d["steps"][0].update(op="teleport")),
        "unknown worker": edit(lambda d: d["steps"][0].update(worker="w9")),
        "bad outcome for a read": edit(
            lambda d: d["steps"][1].update(
                faults=[{"operation": "durable-read", "call": 1, "outcome": "unknown-committed"}]
            )
        ),
        "call below 1": edit(
            lambda d: d["steps"][1].update(
                faults=[{"operation": "durable-write", "call": 0, "outcome": "abort"}]
            )
        ),
        "reused incarnation": edit(lambda d: d["steps"].append({"op": "start", "worker": "w1"})),
        "missing provenance": edit(lambda d: d["toolchain"].pop("python")),
        "token out of range": edit(
            lambda d: d["steps"].append({"op": "reap", "job": "j1", "token": 9})
        ),
        "crossing beyond the pass's calls": edit(
            lambda d: d["steps"].append(
                {"op": "loop-reconcile-crossed", "worker": "w1", "amount": 6}
            )
        ),
        "unknown mutation": json.dumps(
            _redigest({**_good(), "config": {**_good()["config"], "mutation": "nope"}})
        ),  # type: ignore[dict-item]
    }


@pytest.mark.parametrize("case", sorted(_bad_docs()))
def test_a_bad_trace_is_rejected_in_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(_bad_docs()[case])
    assert main(["sim-jobs", "--replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("remora sim-jobs: "), err


def test_the_good_trace_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(_good()))
    assert main(["sim-jobs", "--replay", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "PASS"
