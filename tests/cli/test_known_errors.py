"""Issue 11, item 4: the known ways to crash the CLI are one-line errors with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from remora.cli import main
from remora.limits import MAX_WORKERS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "source"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a flag by exiting
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_absurd_worker_counts_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``--workers 100000000`` failed to start a thread, then hung."""
    for count in ("100000000", str(MAX_WORKERS + 1), "9" * 5000):
        code, err = run(["run", str(EXAMPLES), "--workers", count], capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert f"at most {MAX_WORKERS}" in err or f"must be in 1..{MAX_WORKERS}" in err


@pytest.mark.parametrize("command", ["run", "status"])
def test_db_that_is_a_directory_or_in_a_missing_folder(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``sqlite3.OperationalError: unable to open database file`` as a traceback."""
    source = [str(EXAMPLES)] if command == "run" else []
    code, err = run([command, *source, "--db", str(tmp_path)], capsys)
    assert (
        code == 2
        and err
        == f"remora {command}: {tmp_path}: is a directory; --db names an SQLite database file\n"
    )
    code, err = run([command, *source, "--db", str(tmp_path / "no" / "db")], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("c.json", "[" * 100_000),
        ("c.toml", "a = " + "[" * 100_000),
        ("d.json", '{"a": ' + "9" * 5000 + "}"),
    ],
)
def test_explore_configs_nested_too_deeply_or_too_long(
    tmp_path: Path, name: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a ``RecursionError`` / ``ValueError`` traceback."""
    (tmp_path / name).write_text(text)
    code, err = run(["explore", "--config", str(tmp_path / name), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "invalid" in err


def test_jobs_db_directory_and_deep_payload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: tracebacks (``sqlite3.OperationalError``, ``RecursionError``)."""
    code, err = run(["jobs", "status", "--db", str(tmp_path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "is a directory" in err
    deep = "[" * 100_000
    db = str(tmp_path / "jobs.sqlite3")
    code, err = run(["jobs", "submit", "greet", "--db", db, "--payload", deep], capsys)
    assert code == 2 and err.count("\n") == 1 and "--payload is not JSON" in err
