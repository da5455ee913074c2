"""Where failing traces and evidence go, and how they are written (atomically)."""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

ARTIFACT_ENV = "REMORA_ARTIFACT_DIR"


def failures_dir() -> Path:
    """``$REMORA_ARTIFACT_DIR`` if set, else ``artifacts/failures``."""
    return Path(os.environ.get(ARTIFACT_ENV) or Path("artifacts") / "failures")


def atomic_write(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a
    torn one: write a temporary file in the same directory, fsync, rename over."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def replay_command(path: str | Path) -> str:
    return f"remora sim-worker --replay {shlex.quote(str(path))}"


def show_command(path: str | Path) -> str:
    """The command that draws the run of a trace (or report) as one HTML page."""
    return f"remora show {shlex.quote(str(path))}"
