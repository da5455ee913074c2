"""The parallel machines over PostgreSQL (a connection per thread, a scratch database per
test): they pass on the real store, and kill the planted PostgreSQL bugs of
tests/postgres/parallel_planted.py — a row lock dropped from the locked read, the fence and
the writes in two transactions — whose exported examples replay through the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from remora.sim.parallel import replay
from remora.testing.parallel import ParallelMachine
from remora.testing.profiles import full_budget
from tests.parallel.hunt import Planted, hunt, run_share
from tests.postgres import parallel_planted
from tests.postgres.parallel_machines import PG_BUDGET, PG_MACHINES, PG_PLANTED_CASES
from tests.postgres.services import require_postgres

pytestmark = pytest.mark.services

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def server(monkeypatch: pytest.MonkeyPatch) -> str:
    dsn = require_postgres()
    monkeypatch.setenv("REMORA_PG_DSN", dsn)
    return dsn


@pytest.mark.parametrize("machine", PG_MACHINES, ids=lambda m: m.__name__)
def test_parallel_machine_on_postgres(machine: type[ParallelMachine]) -> None:
    stats = run_share(machine, PG_BUDGET[machine.__name__])
    assert stats["operations"] > stats["runs"]
    if full_budget():
        assert {"result ok", "result fenced", "result unknown"} <= set(stats), sorted(stats)


def test_every_planted_postgres_bug_has_a_case() -> None:
    assert sorted(p.name for p in PG_PLANTED_CASES) == sorted(parallel_planted.PG_PLANTED)


@pytest.mark.parametrize("case", PG_PLANTED_CASES, ids=lambda p: p.name)
def test_the_parallel_machines_kill_it(case: Planted, tmp_path: Path, server: str) -> None:
    found = hunt(case, PG_BUDGET[case.machine.__name__], tmp_path)
    assert found.killed, f"{case.name} survived {found.examples} examples"
    example = found.example()
    assert example.target.backend == f"tests.postgres.parallel_planted:{case.name}"
    assert example.found is not None and example.found.runs == case.machine.reproduce
    command = [sys.executable, "-m", "remora", "sim-worker", "--replay", str(found.path)]
    done = subprocess.run(
        [*command, "--runs", "3", "--dsn", server],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # PostgreSQL's lock waits are not forced: the report says how often it came back
    assert done.returncode in (0, 1), done.stderr
    assert '"runs": 3' in done.stdout
    if done.returncode == 1:
        assert f"{found.failure}: reproduced in" in done.stderr
    real = attrs.evolve(example.target, backend=None)
    assert replay(attrs.evolve(example, target=real), runs=2, dsn=server).failed == 0
