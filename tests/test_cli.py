from __future__ import annotations

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
