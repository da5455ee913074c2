"""The parallel-machine example project (``examples/kvstore``) used the way a user's project
uses Remora: copied outside the repository, its own tests run Remora's parallel machines
over its own store backend through the plugin — the right backend passes, the planted one is
caught — and the exported example replays with ``remora sim-worker --replay`` from the
project to the same failure, and is refused (one line, exit 2) away from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.testing.user_project import run_pytest
from tests.testing.user_project import run_remora as remora

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kvstore"


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """(project, failure string, exported example) after the project's own test run."""
    project = tmp_path_factory.mktemp("user") / "kvstore"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "found.json"))
    artifacts = project / "artifacts" / "failures"
    done = run_pytest(project, env={"REMORA_ARTIFACT_DIR": str(artifacts)})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout
    result = json.loads((project / "found.json").read_text())
    return project, result["failure"], Path(result["example"])


def test_the_example_names_the_projects_backend(found: tuple[Path, str, Path]) -> None:
    _, failure, example = found
    assert failure == "ERROR not-linearizable"
    doc = json.loads(example.read_text())
    assert doc["implementation"] == "worker-parallel-v1"
    assert doc["target"]["backend"] == "kvstore.backend:HastyKvBackend"
    assert doc["found"]["reproduced"] == doc["found"]["runs"]  # a shared object: forced
    commands = len(doc["prefix"]) + sum(len(b) for b in doc["branches"])
    assert commands <= 6  # shrunk


def test_the_replay_from_the_project_fails_the_same_way(found: tuple[Path, str, Path]) -> None:
    project, failure, example = found
    done = remora(project, "sim-worker", "--replay", str(example), "--runs", "3")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["failure"] == failure and report["reproduced"] == 3
    assert f"{failure}: reproduced in 3 of 3 runs" in done.stderr


def test_away_from_the_project_the_replay_is_refused(
    found: tuple[Path, str, Path], tmp_path: Path
) -> None:
    _, _, example = found
    done = remora(tmp_path, "sim-worker", "--replay", str(example))
    assert done.returncode == 2 and not done.stdout
    assert "example.target.backend: cannot import kvstore.backend:HastyKvBackend" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
