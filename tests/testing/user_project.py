"""Running pytest the way a user's project does: in a directory outside this repository,
with Remora's plugin loaded only through its ``pytest11`` entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

KEEP_OUT = ("REMORA_HYPOTHESIS_PROFILE", "REMORA_REQUIRE_SERVICES", "REMORA_PG_DSN", "CI")


def run_pytest(
    project: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``project`` (no repository conftest, no cache)."""
    clean = {k: v for k, v in os.environ.items() if k not in KEEP_OUT and k != "PYTHONPATH"}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args],
        cwd=project,
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_remora(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The installed ``remora ARGS`` in ``cwd`` (a user's project), without this repository
    on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = str(Path(sys.executable).with_name("remora"))
    return subprocess.run(
        [command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
