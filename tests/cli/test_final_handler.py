"""The CLI's final handler: an unexpected exception in any command is one line, exit 1;
``--debug`` (anywhere on the command line, or ``REMORA_DEBUG=1``) adds the traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

import remora.cli.run as run_cmd
import remora.cli.status as status_cmd
from remora.cli import main
from remora.cli.__init__ import one_line

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "source"


def _planted_bug(*args: object, **kwargs: object) -> int:
    raise ZeroDivisionError("planted")


@pytest.fixture
def buggy_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # A planted bug inside a command (after argument parsing and input validation).
    monkeypatch.setattr(run_cmd, "_run", _planted_bug)
    monkeypatch.delenv("REMORA_DEBUG", raising=False)


@pytest.mark.usefixtures("buggy_run")
def test_internal_error_is_one_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(EXAMPLES), "--db", str(tmp_path / "db")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("remora run: internal error: ZeroDivisionError: planted")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.usefixtures("buggy_run")
@pytest.mark.parametrize("where", ["before", "after", "env"])
def test_debug_shows_the_traceback(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["run", str(EXAMPLES), "--db", str(tmp_path / "db")]
    if where == "before":
        argv.insert(0, "--debug")
    elif where == "after":
        argv.append("--debug")
    else:
        monkeypatch.setenv("REMORA_DEBUG", "1")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "_planted_bug" in err
    assert err.rstrip().endswith("remora run: internal error: ZeroDivisionError: planted")


def test_every_command_is_covered_including_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(status_cmd, "partition_rows", _planted_bug)
    db = tmp_path / "db"
    assert main(["run", str(EXAMPLES), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["status", "--db", str(db)]) == 1
    assert capsys.readouterr().err.startswith("remora status: internal error: ZeroDivisionError")
    # `remora jobs …` goes through the same handler (the subcommand's --debug works too).
    assert main(["jobs", "status", "--db", str(tmp_path), "--debug"]) in (1, 2)
    err = capsys.readouterr().err
    assert err.startswith("Traceback") or err.startswith("remora jobs:")
    assert err.rstrip().splitlines()[-1].startswith("remora jobs:")


def test_one_line_survives_any_message() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("Exceeds the limit (4300 digits)")

    assert "\n" not in one_line(ValueError("a\nb\u2028c"))
    assert len(one_line(ValueError("x" * 10_000))) <= 500
    one_line(ValueError("\ud800")).encode("utf-8")  # printable, whatever it quotes
    assert one_line(Unprintable(1))
