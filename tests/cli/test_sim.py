"""``remora sim-worker``, ``corpus``, ``evidence`` and ``reduce`` on the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from remora.cli import main
from remora.sim.generate import generate
from remora.sim.report import run_trace
from remora.sim.trace import loads


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_worker_seed_prints_report_and_saves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved, report = tmp_path / "t.json", tmp_path / "r.json"
    code, out, _ = run(
        ["sim-worker", "--seed", "17", "--save", str(saved), "--report", str(report)], capsys
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["status"] == "PASS" and doc["label"].startswith("production-worker-lifecycle")
    assert report.read_text() == out
    code, again, _ = run(["sim-worker", "--replay", str(saved)], capsys)
    assert code == 0 and again == out


def test_sim_worker_non_pass_exits_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["sim-worker", "--seed", "1", "--class", "conflict"], capsys)
    assert code == 1 and json.loads(out)["status"] in ("BLOCKED", "PASS_WITH_EXCLUSIONS")
    assert "status" in err


def test_sim_worker_no_drain_is_never_strict_pass(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["sim-worker", "--seed", "3", "--no-drain"], capsys)
    assert code == 1 and json.loads(out)["status"] == "INCOMPLETE"
    assert json.loads(out)["diagnostics"]


@pytest.mark.parametrize(
    "args",
    [
        ["sim-worker"],
        ["sim-worker", "--seed", "1", "--replay", "x"],
        ["sim-worker", "--seed", "-3"],
        ["sim-worker", "--seed", "1", "--class", "weird"],
        ["sim-worker", "--seed", "1", "--steps", "2"],
    ],
)
def test_sim_worker_usage_errors_exit_two(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_rejected_trace_file_exits_two_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(generate(2, "valid").dumps())
    doc["steps"][1]["faults"] = [
        {"operation": "observe", "call": 1, "outcome": "unknown-committed"}
    ]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, out, err = run(["sim-worker", "--replay", str(bad)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "trace.steps[1].faults[0]" in err
    code, _, err = run(["sim-worker", "--replay", str(tmp_path / "missing.json")], capsys)
    assert code == 2 and "cannot read" in err


def test_corpus_and_evidence_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.json"
    code, out, _ = run(["corpus", "--out", str(manifest)], capsys)
    assert code == 0 and out.count("\nok ") + out.startswith("ok ") == 16
    assert json.loads(manifest.read_text())["ok"]
    code, _, _ = run(["evidence", "--dir", str(tmp_path / "ev")], capsys)
    assert code == 0
    names = sorted(p.name for p in (tmp_path / "ev").iterdir())
    assert names == ["worker-corpus.json", "worker-seed-17-report.json", "worker-seed-17.json"]
    assert json.loads((tmp_path / "ev" / "worker-corpus.json").read_text()) == json.loads(
        manifest.read_text()
    )


def test_reduce_refuses_a_passing_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    path.write_text(generate(17, "valid").dumps())
    code, _, err = run(["reduce", str(path)], capsys)
    assert code == 1 and "does not fail" in err


def test_reduce_command_saves_both_and_prints_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path / "art"))
    path = tmp_path / "blocked.json"
    path.write_text(generate(1, "conflict", drain=False).dumps())
    code, out, _ = run(["reduce", str(path)], capsys)
    assert code == 0
    original = tmp_path / "art" / "blocked.json"
    reduced = tmp_path / "art" / "blocked-reduced.json"
    assert f"remora sim-worker --replay {original}" in out
    assert f"remora sim-worker --replay {reduced}" in out
    assert loads(original.read_text()) == loads(path.read_text())
    small = loads(reduced.read_text())
    assert len(small.steps) < len(loads(path.read_text()).steps)
    assert run_trace(small).failure == run_trace(loads(path.read_text())).failure
    assert not [p for p in os.listdir(tmp_path / "art") if p.endswith(".tmp")]
