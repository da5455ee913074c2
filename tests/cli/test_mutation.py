"""``remora sim-worker --mutation NAME``: a newcomer reaches a failure without editing the
library, and the trace it saves replays and reduces against the same planted bug."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from remora.cli import main
from remora.sim.mutations import MUTATIONS, NAMES, Mutation, mutation
from remora.sim.trace import loads


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("planted", MUTATIONS, ids=lambda m: m.name)
def test_every_mutation_fails_a_schedule_that_replays_against_it(
    planted: Mutation,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    code, out, err = run(["sim-worker", "--mutation", planted.name], capsys)
    failure = json.loads(out)["failure"]
    assert code == 1 and failure.startswith("ERROR "), err
    [saved] = tmp_path.glob(f"sim-worker-{planted.name}-valid-seed-*.json")
    assert f"remora sim-worker --replay {saved}" in err and f"remora show {saved}" in err
    trace = loads(saved.read_text())
    assert trace.config.mutation == planted.name

    code, again, _ = run(["sim-worker", "--replay", str(saved)], capsys)
    assert code == 1 and json.loads(again)["failure"] == failure

    # The recorded name is what makes the replay fail: without it the same schedule runs
    # the real lifecycle and ends as the oracle predicts.
    real = attrs.evolve(trace, config=attrs.evolve(trace.config, mutation=None))
    plain = tmp_path / "real.json"
    plain.write_text(real.dumps())
    _, healthy, _ = run(["sim-worker", "--replay", str(plain)], capsys)
    assert json.loads(healthy)["status"] != "ERROR"


def test_reduce_keeps_the_mutation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    name = "skip-cancel-check-after-wakeup"
    code, out, _ = run(["sim-worker", "--mutation", name, "--seed", "4"], capsys)
    assert code == 1
    saved = tmp_path / f"sim-worker-{name}-valid-seed-4.json"
    code, out, _ = run(["reduce", str(saved)], capsys)
    assert code == 0 and "failure: ERROR io-after-stop" in out
    reduced = tmp_path / f"sim-worker-{name}-valid-seed-4-reduced.json"
    assert f"remora show {reduced}" in out
    trace = loads(reduced.read_text())
    assert trace.config.mutation == name and len(trace.steps) < len(loads(saved.read_text()).steps)
    code, again, _ = run(["sim-worker", "--replay", str(reduced)], capsys)
    assert json.loads(again)["failure"] == "ERROR io-after-stop"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sim-worker", "--mutation", "nope"], "unknown mutation 'nope' (one of skip-fence"),
        (["sim-worker", "--replay", "x.json", "--mutation", NAMES[0]], "--mutation only applies"),
        (["sim-worker"], "one of --seed, --replay or --mutation is required"),
    ],
)
def test_bad_usage_exits_two(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(args, capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_trace_naming_an_unknown_mutation_is_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run(["sim-worker", "--seed", "1", "--save", str(tmp_path / "t.json")], capsys)
    doc = json.loads((tmp_path / "t.json").read_text())
    trace = loads(json.dumps(doc))
    bad = attrs.evolve(trace, config=attrs.evolve(trace.config, mutation="no-such-bug"))
    (tmp_path / "bad.json").write_text(bad.dumps())
    code, _, err = run(["sim-worker", "--replay", str(tmp_path / "bad.json")], capsys)
    assert code == 2 and "trace.config.mutation: unknown mutation 'no-such-bug'" in err


def test_lookup() -> None:
    assert mutation("skip-fence-check").patch is not None
    assert len(set(NAMES)) == len(NAMES) == len(MUTATIONS)
