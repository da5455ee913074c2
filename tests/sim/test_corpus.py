"""The corpus, replay determinism, the generator's stability, and the simulation CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from remora.sim.corpus import run_corpus
from remora.sim.generate import generate
from remora.sim.report import run_trace
from remora.sim.trace import loads


def test_corpus_runs_end_as_the_oracle_predicts() -> None:
    manifest = run_corpus()
    assert len(manifest["runs"]) == 16 and manifest["ok"]
    statuses = {(r["class"], r["status"]) for r in manifest["runs"]}
    assert ("valid", "PASS") in statuses
    assert any(c == "conflict" and s in ("BLOCKED", "PASS_WITH_EXCLUSIONS") for c, s in statuses)
    assert sum(r["selected_faults"] for r in manifest["runs"]) > 0
    assert sum(r["interleaves"] for r in manifest["runs"]) > 0


@pytest.mark.parametrize("seed", range(1, 9))
@pytest.mark.parametrize("trace_class", ["valid", "conflict"])
def test_corpus_trace_replays_to_byte_identical_report(seed: int, trace_class: str) -> None:
    trace = generate(seed, trace_class)
    direct = run_trace(trace).dumps()
    replayed = run_trace(loads(trace.dumps())).dumps()
    assert replayed == direct
    assert run_trace(loads(trace.dumps())).dumps() == direct


def test_generator_is_stable() -> None:
    """A seed names one trace forever: pin the steps and source of seed 17 (the toolchain
    line is provenance and excluded)."""
    doc = json.loads(generate(17, "valid").dumps())
    del doc["toolchain"]
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    assert digest == GOLDEN_SEED_17


GOLDEN_SEED_17 = "a7377372882822e9617efa77132db8df19c3180a6453c887bec0b8a2a51433bc"


def test_corpus_failure_saves_original_before_reducing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import remora.sim.corpus as corpus_mod
    from tests.common.planted import ProcessesNothing

    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    messages: list[str] = []
    manifest = run_corpus(
        [3], ["valid"], lifecycle_factory=ProcessesNothing, on_failure=messages.append
    )
    assert not manifest["ok"] and manifest["runs"][0]["failure"] == "ERROR postcondition-process"
    original = tmp_path / "corpus-seed-3-valid.json"
    reduced = tmp_path / "corpus-seed-3-valid-reduced.json"
    assert loads(original.read_text()) == generate(3, "valid")
    assert len(loads(reduced.read_text()).steps) < 64
    assert f"remora sim-worker --replay {original}" in messages[0]
    assert f"remora show {reduced}" in messages[0]  # the picture beside the replay command

    def boom(*args: object) -> object:
        raise RuntimeError("reducer crashed")

    monkeypatch.setattr(corpus_mod, "reduce_trace", boom)
    original.unlink()
    # a crashing reducer neither aborts the corpus nor loses the original trace
    manifest = run_corpus([3], ["valid"], lifecycle_factory=ProcessesNothing)
    assert not manifest["ok"] and manifest["runs"][0]["saved"]["original"] == str(original)
    assert original.exists()  # saved before the reducer ran


def test_a_run_that_raises_is_a_failing_entry_not_an_abort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted: the replay itself raises (as a DeliveryGap escaping the drain once did)."""
    import remora.sim.corpus as corpus_mod

    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("planted: the run blew up")

    monkeypatch.setattr(corpus_mod, "run_trace", broken)
    manifest = run_corpus([1, 2], ["valid"])
    assert [r["failure"] for r in manifest["runs"]] == ["ERROR exception"] * 2
    assert "planted" in manifest["runs"][0]["error"]
    assert (tmp_path / "corpus-seed-1-valid.json").exists()
