"""The example project (``examples/ledger``) used the way a user's project uses Remora: copied
outside the repository, its own tests run Remora's machines over its own lifecycle and
processing through the plugin and find its planted bug; the exported trace then replays
with ``remora sim-worker --replay … --lifecycle …`` to the same failure string — and never
silently with Remora's own lifecycle or fold."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.docs_lines import assert_documented
from tests.testing.user_project import run_pytest
from tests.testing.user_project import run_remora as remora

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ledger"
HASTY = "ledger.worker:HastyLedgerLifecycle"


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """(project, failure string, exported trace) after the project's own test run."""
    project = tmp_path_factory.mktemp("user") / "ledger"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "found.json"))
    artifacts = project / "artifacts" / "failures"
    done = run_pytest(project, "-rs", env={"REMORA_ARTIFACT_DIR": str(artifacts)})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 passed, 1 skipped" in done.stdout  # postgres: no server configured for it
    result = json.loads((project / "found.json").read_text())
    return project, result["failure"], Path(result["trace"])


def test_the_exported_trace_names_the_projects_worker_processing_and_model(
    found: tuple[Path, str, Path],
) -> None:
    _, failure, trace = found
    assert failure == "ERROR postcondition-epoch-race"  # the per-attempt rule sees it first
    config = json.loads(trace.read_text())["config"]
    assert config["lifecycle"] == HASTY
    assert config["processing"] == "ledger.processing:LEDGER"
    assert config["model"] == "ledger.model:ledger_model"
    assert config["class"] == "custom"


def test_replay_with_the_lifecycle_gives_the_same_failure(found: tuple[Path, str, Path]) -> None:
    project, failure, trace = found
    done = remora(project, "sim-worker", "--replay", str(trace), "--lifecycle", HASTY)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["failure"] == failure
    plain = remora(project, "sim-worker", "--replay", str(trace))  # the recorded lifecycle
    assert json.loads(plain.stdout)["failure"] == failure


def test_the_fixed_lifecycle_passes_the_same_schedule(found: tuple[Path, str, Path]) -> None:
    project, _, trace = found
    done = remora(
        project,
        "sim-worker",
        "--replay",
        str(trace),
        "--lifecycle",
        "ledger.worker:LedgerLifecycle",
    )
    report = json.loads(done.stdout)
    assert report["status"] in ("PASS", "PASS_WITH_EXCLUSIONS", "BLOCKED"), report["violations"]
    assert f"running ledger.worker:LedgerLifecycle; the trace records {HASTY}" in done.stderr


def test_reduce_and_show_run_the_projects_code(found: tuple[Path, str, Path]) -> None:
    project, failure, trace = found
    reduced = remora(project, "reduce", str(trace))
    assert reduced.returncode == 0 and f"failure: {failure}" in reduced.stdout, reduced.stderr
    shown = remora(project, "show", str(trace), "--out", str(project / "run.html"))
    assert shown.returncode == 0 and (project / "run.html").exists(), shown.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--lifecycle", "nosuch.module:Worker"],
            "--lifecycle: cannot import nosuch.module:Worker",
        ),
        (["--lifecycle", "ledger.worker"], "--lifecycle: 'ledger.worker' is not module:qualname"),
        (["--lifecycle", "ledger.processing:LEDGER"], "is not a subclass of remora.worker"),
    ],
)
def test_an_unusable_lifecycle_is_refused_in_one_line(
    found: tuple[Path, str, Path], args: list[str], message: str
) -> None:
    project, _, trace = found
    done = remora(project, "sim-worker", "--replay", str(trace), *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout


def test_away_from_the_project_the_replay_refuses_instead_of_running_remoras_own(
    found: tuple[Path, str, Path], tmp_path: Path
) -> None:
    _, _, trace = found
    done = remora(tmp_path, "sim-worker", "--replay", str(trace))
    assert done.returncode == 2 and not done.stdout
    assert "trace.config.processing: cannot import ledger.processing:LEDGER" in done.stderr
    # The line docs/custom.md shows is the one printed (issue 25: it differed).
    assert_documented("custom.md", "remora sim-worker:", done.stderr.strip())
