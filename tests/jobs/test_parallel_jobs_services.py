"""The parallel job machine over PostgreSQL + Redis (a connection per actor to a scratch
database, a Redis namespace per run): the real runtime passes it, and a recorded race
replays through ``remora sim-jobs --replay --dsn``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="the parallel job machine over PostgreSQL needs psycopg")

from remora.sim.jobs.parallel import Services, example_for, explore
from remora.sim.jobs.trace import JobConfig, JobStep
from remora.sim.schedule import PCT
from tests.common.services import require_redis
from tests.jobs.parallel_jobs import PG_BUDGET, JobsInParallel, run_share

pytestmark = pytest.mark.services

REPO = Path(__file__).resolve().parents[2]


def test_the_real_runtime_passes_on_postgres_and_redis(
    remora_scratch_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))

    class JobsOnServices(JobsInParallel):
        store = "postgres"
        services = Services(remora_scratch_database, require_redis())
        runs = 3  # k: a statement may block in the server (stalls), so more schedules

    stats = run_share(JobsOnServices, PG_BUDGET)
    assert stats.get("result ok", 0) > 0
    assert "failures" not in stats


def test_a_recorded_race_replays_on_the_services(
    remora_scratch_database: str, tmp_path: Path
) -> None:
    S = JobStep
    config = JobConfig(jobs=("j1",), workers=("w1", "w2"), max_coord_losses=0, max_partitions=0)
    life = [
        [S("reserve", worker=w, job="j1"), S("authorize", worker=w, job="j1")] for w in ("w1", "w2")
    ]
    example = example_for(
        config,
        [
            S("submit", job="j1"),
            S("start", worker="w1"),
            S("start", worker="w2"),
            S("enqueue", job="j1"),
        ],
        [("w1", life[0]), ("w2", life[1])],
        PCT((1, 0), (3,)),
        store="postgres",
    )
    services = Services(remora_scratch_database, require_redis())
    ran, results = explore(example, 2, 3, services)
    assert [r.failure for r in results] == [None, None]
    path = tmp_path / "race.json"
    path.write_text(ran.dumps())
    command = [sys.executable, "-m", "remora", "sim-jobs", "--replay", str(path), "--runs", "2"]
    done = subprocess.run(
        [*command, "--dsn", remora_scratch_database],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "PASS"
    refused = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "--dsn is required" in refused.stderr
