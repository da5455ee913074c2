from __future__ import annotations

from pathlib import Path

import pytest

from remora import __version__
from remora.cli import EXIT_USAGE, main


def test_version_flag_prints_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_no_command_is_usage_error() -> None:
    assert main([]) == EXIT_USAGE


def test_unknown_flag_is_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--no-such-flag"])
    assert exc.value.code == EXIT_USAGE


def test_closed_stdout_is_quiet(tmp_path: Path) -> None:
    """`remora … | head -1` must not end in a BrokenPipeError traceback.  The reader closes
    the pipe before the command (still starting up) writes anything."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "remora", "sim-worker", "--seed", "17"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err
