"""Progress on stderr: drawn only on a terminal (a real pty here), never on stdout, never
when stderr is piped, and off with ``--quiet``; the helper's line (count, share, rate,
ETA) on its own; and ``--replay`` explaining a failure on stderr."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from remora.cli import main
from remora.progress import CLEAR, Progress, duration
from remora.sim.generate import generate
from tests.common.workload import generate as records
from tests.common.workload import write_source_dir

REPO = Path(__file__).resolve().parents[2]


# -- the helper ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_line_carries_count_share_rate_and_eta() -> None:
    clock, out = Clock(), io.StringIO()
    line = Progress(out, enabled=True, interval=0.5, clock=clock)
    clock.now += 10
    line.update("replay: drain", done=250, total=1000, unit="records")
    assert out.getvalue() == CLEAR + "replay: drain 250/1000 records (25%), 25/s, ETA 30s"
    line.update("replay: drain", done=260, total=1000)  # throttled: too soon
    assert out.getvalue().count(CLEAR) == 1
    clock.now += 1
    line.update("reduce;", done=7)  # no total: count and rate only
    assert out.getvalue().endswith(CLEAR + "reduce; 7, 1/s")
    line.done()
    assert out.getvalue().endswith(CLEAR)
    assert [duration(s) for s in (42, 185, 3720)] == ["42s", "3m05s", "1h02m"]


def test_not_a_terminal_or_quiet_draws_nothing() -> None:
    piped = io.StringIO()  # isatty() is False
    Progress(piped).update("x", done=1, total=2, force=True)
    quiet = io.StringIO()
    Progress(quiet, quiet=True, enabled=True).update("x", force=True)
    assert piped.getvalue() == quiet.getvalue() == ""


# -- commands on a real terminal -------------------------------------------------------------


def on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run ``remora ARGS`` with stderr on a pty (stdout piped); returns code, stdout and
    what the terminal received."""
    master, slave = pty.openpty()
    stdout = cwd / "stdout.txt"
    with stdout.open("w") as sink:  # a file, not a pipe: a full pipe would block the child
        proc = subprocess.Popen(
            [sys.executable, "-m", "remora", *args],
            cwd=cwd,
            stdout=sink,
            stderr=slave,
            # every update drawn: what the terminal receives does not depend on how fast
            # this machine replays (the default throttle is two redraws a second)
            env={**os.environ, "PYTHONPATH": str(REPO), "REMORA_PROGRESS_INTERVAL": "0"},
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, stdout.read_text(), b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = generate(3, "valid", 30, 2)
    source = tuple(r for r in records(7, 2, 1500, faulty=False))
    path = tmp_path_factory.mktemp("trace") / "big.json"
    path.write_text(attrs.evolve(base, source=source).dumps())
    return path


def test_replay_draws_progress_on_a_terminal_only(big_trace: Path, tmp_path: Path) -> None:
    code, out, tty = on_a_terminal(["sim-worker", "--replay", str(big_trace)], tmp_path)
    assert code in (0, 1) and json.loads(out)["status"]
    assert "replay: drain" in tty and "records (" in tty and "\x1b[K" in tty
    assert "\x1b[K" not in out  # stdout stays clean JSON

    code, out, tty = on_a_terminal(["sim-worker", "--replay", str(big_trace), "-q"], tmp_path)
    assert "replay:" not in tty and "\x1b[K" not in tty

    piped = subprocess.run(
        [sys.executable, "-m", "remora", "sim-worker", "--replay", str(big_trace)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert "\x1b[K" not in piped.stderr and "replay:" not in piped.stderr


def test_run_draws_total_and_eta_on_a_terminal(tmp_path: Path) -> None:
    src = write_source_dir(tmp_path / "src", records(3, 2, 4000, faulty=False), 2)
    args = ["run", str(src), "--db", str(tmp_path / "s.db")]
    code, _, tty = on_a_terminal(args, tmp_path)
    assert code == 0, tty
    assert re.search(r"run: \d+ records; source offsets \d+/\d+ \(\d+%\), \d+/s, ETA", tty), tty
    code, _out, tty = on_a_terminal(
        [*args[:-2], "--db", str(tmp_path / "t.db"), "--quiet"], tmp_path
    )
    assert code == 0 and "\x1b[K" not in tty


# -- --replay explains a failure ---------------------------------------------------------------


def test_replay_prints_the_failure_and_the_first_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    assert main(["sim-worker", "--mutation", "skip-fence-check", "--seed", "2", "-q"]) == 1
    failure = json.loads(capsys.readouterr().out)["failure"]
    [saved] = tmp_path.glob("sim-worker-skip-fence-check-*seed-*.json")
    assert main(["sim-worker", "--replay", str(saved)]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    first = doc["violations"][0]
    assert f"failure: {failure}" in err
    assert (
        f"first violation: {first['kind']} at attempt {first['attempt']} ({first['where']}): "
        f"{first['message']}" in err
    )
