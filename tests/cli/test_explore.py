"""``remora explore``: exit codes, one-line errors, summaries and counterexamples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import main
from remora.protocol.config import NAMED_CONFIGS, load_config
from remora.protocol.errors import ConfigError


@pytest.mark.parametrize(
    "body",
    [
        '{"Jobs": ["j1"]}',
        '{"Jobs": ["j1"], "Workers": ["w1"], "InitialWorkers": ["w2"], "MaxAttempts": 1, '
        '"MaxProgress": 1}',
        '{"Jobs": ["j1"], "Workers": ["w1"], "InitialWorkers": ["w1"], "MaxAttempts": 0, '
        '"MaxProgress": 1}',
        '{"Jobs": ["j1"], "Workers": ["w1"], "InitialWorkers": ["w1"], "MaxAttempts": 1, '
        '"MaxProgress": 1, "Bogus": 1}',
        '{"Jobs": ["j1"], "Workers": ["w1"], "InitialWorkers": ["w1"], "MaxAttempts": true, '
        '"MaxProgress": 1}',
        '{"Jobs": ["j1"], "Workers": ["w1"], "InitialWorkers": ["w1"], "MaxAttempts": 1, '
        '"MaxProgress": 1, "FaultServices": ["Disk"]}',
        "[1, 2]",
        "{not json",
    ],
)
def test_rejected_files_exit_2_with_one_line(
    tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "bad.json"
    f.write_text(body)
    with pytest.raises(ConfigError):
        load_config(str(f))
    assert main(["explore", "--config", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unknown_name_and_missing_flag_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--config", "no-such-config"]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["explore"])
    assert exc.value.code == 2


def test_explore_tiny_with_liveness_and_drain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "summary.json"
    code = main(
        ["explore", "--config", "tiny", "--liveness", "--drain", "--quiet", "--json", str(out)]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "9164 states generated, 1435 distinct states found" in text
    assert "The depth of the complete state graph search is 16." in text
    summary = json.loads(out.read_text())
    assert summary["distinct_states"] == 1435
    assert all(summary["liveness"].values())
    assert summary["drain"]["failures"] == 0


def test_explore_credentials_liveness_violation_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cex = tmp_path / "cex.json"
    code = main(
        [
            "explore",
            "--config",
            "credentials",
            "--liveness",
            "--quiet",
            "--counterexample",
            str(cex),
        ]
    )
    text = capsys.readouterr().out
    assert code == 1
    assert "EventuallySystemQuiescent: VIOLATED" in text
    doc = json.loads(cex.read_text())
    assert doc["violation"]["kind"] == "liveness"
    assert doc["violation"]["name"] == "EventuallySystemQuiescent"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_explore_safety_violation_writes_counterexample(
    tmp_path: Path,
    workers: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import remora.cli.explore as cli
    from remora.protocol.trace import replay
    from tests.protocol.spec_mutants import CancelForgetsRequest

    monkeypatch.setattr(cli, "Remora", CancelForgetsRequest)
    cex = tmp_path / "cex.json"
    code = main(
        [
            "explore",
            "--config",
            "tiny",
            "--workers",
            workers,
            "--quiet",
            "--counterexample",
            str(cex),
        ]
    )
    text = capsys.readouterr().out
    assert code == 1
    assert "Error: Invariant StateConsistency is violated." in text
    doc = json.loads(cex.read_text())
    assert doc["violation"] == {
        "kind": "invariant",
        "name": "StateConsistency",
        "detail": "StateConsistency is FALSE",
    }
    assert [s["action"] for s in doc["steps"]] == ["Init", "RequestCancel"]
    states, _ = replay(CancelForgetsRequest(NAMED_CONFIGS["tiny"]), doc)
    assert len(states) == 2


def test_liveness_needs_one_worker(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--config", "tiny", "--liveness", "--workers", "2"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
