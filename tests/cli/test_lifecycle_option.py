"""``--lifecycle MODULE:CLASS`` on ``sim-worker`` and ``reduce``: recorded in a generated
trace, run on replay, never silently replaced by the built-in lifecycle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import main
from remora.errors import InvalidInput
from remora.sim.runs import reference_of
from remora.sim.trace import loads

REVOKE_FORGETS = "remora.sim.mutations:RevokeForgets"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_generated_trace_records_the_lifecycle_and_replays_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    saved = tmp_path / "t.json"
    args = ["sim-worker", "--seed", "1", "--lifecycle", REVOKE_FORGETS, "--save", str(saved)]
    code, out, _ = run(args, capsys)
    failure = json.loads(out)["failure"]
    assert code == 1 and failure == "ERROR ownership-retained"
    assert loads(saved.read_text()).config.lifecycle == REVOKE_FORGETS
    _, again, _ = run(["sim-worker", "--replay", str(saved)], capsys)
    assert json.loads(again)["failure"] == failure  # the recorded lifecycle, not the built-in
    fixed = ["sim-worker", "--replay", str(saved), "--lifecycle", "remora.worker:Lifecycle"]
    code, healthy, err = run(fixed, capsys)
    assert code == 0 and json.loads(healthy)["status"] == "PASS"
    assert f"running remora.worker:Lifecycle; the trace records {REVOKE_FORGETS}" in err
    code, out, _ = run(["reduce", str(saved)], capsys)
    assert code == 0 and "failure: ERROR ownership-retained" in out


def test_mutation_and_lifecycle_together_are_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        ["sim-worker", "--mutation", "skip-fence-check", "--lifecycle", REVOKE_FORGETS], capsys
    )
    assert code == 2 and "--mutation runs its own lifecycle" in err


def test_only_top_level_objects_can_be_named() -> None:
    class Local:
        pass

    assert reference_of(reference_of) == "remora.sim.runs:reference_of"
    with pytest.raises(InvalidInput, match="define it at the top level"):
        reference_of(Local)
