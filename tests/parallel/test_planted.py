"""Every planted concurrency bug of tests/parallel/planted.py is killed by the parallel
machines within their budget (the PostgreSQL ones: tests/postgres/test_parallel_pg.py); its
exported example replays through ``remora sim-worker --replay`` to the same failure, and
the same commands pass on the real code.  That the sequential machines do *not* kill them
in the same budget is the campaign's (``python -m tests.parallel.campaign``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from remora.sim.parallel import replay
from tests.parallel import planted
from tests.parallel.hunt import Planted, hunt
from tests.parallel.machines import BUDGET, PLANTED_CASES

REPO = Path(__file__).resolve().parents[2]


def test_every_planted_bug_has_a_case() -> None:
    assert sorted(p.name for p in PLANTED_CASES) == sorted(planted.PLANTED)


def replay_cli(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remora", "sim-worker", "--replay", path, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("case", PLANTED_CASES, ids=lambda p: p.name)
def test_the_parallel_machines_kill_it(case: Planted, tmp_path: Path) -> None:
    found = hunt(case, BUDGET[case.machine.__name__], tmp_path)
    assert found.killed, f"{case.name} survived {found.examples} examples"
    example = found.example()
    assert example.found is not None and example.found.failure == found.failure
    assert found.reproduced >= 1  # its recorded schedule failed again
    # the exported example names the planted code, and the command line runs it again
    named = example.target.backend or example.target.lifecycle
    assert named == f"tests.parallel.planted:{case.name}"
    done = replay_cli(str(found.path), "--runs", "3")
    assert done.returncode == 1, done.stderr
    assert f"{found.failure}: reproduced in" in done.stderr
    # the same commands on the real code pass, whatever schedule they get
    real = attrs.evolve(example.target, backend=None, lifecycle=None)
    assert replay(attrs.evolve(example, target=real), runs=3).failed == 0
