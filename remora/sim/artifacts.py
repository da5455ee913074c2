"""Where failing traces and evidence go, and the commands that replay or show them (they
are written by :mod:`remora.outputs`)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

ARTIFACT_ENV = "REMORA_ARTIFACT_DIR"


def failures_dir() -> Path:
    """``$REMORA_ARTIFACT_DIR`` if set, else ``artifacts/failures``."""
    return Path(os.environ.get(ARTIFACT_ENV) or Path("artifacts") / "failures")


def replay_command(path: str | Path) -> str:
    """The command that replays a worker trace."""
    return f"remora sim-worker --replay {shlex.quote(str(path))}"


def job_replay_command(path: str | Path) -> str:
    """The command that replays a job trace."""
    return f"remora sim-jobs --replay {shlex.quote(str(path))}"


def show_command(path: str | Path) -> str:
    """The command that draws the run of a trace (or report) as one HTML page."""
    return f"remora show {shlex.quote(str(path))}"


__all__ = [
    "ARTIFACT_ENV",
    "failures_dir",
    "replay_command",
    "job_replay_command",
    "show_command",
]
