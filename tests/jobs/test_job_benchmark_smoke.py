"""The job benchmarks still run (tiny sizes; nothing about speed is asserted): the fair
side-by-side benchmark's JSON and its trace validation of Remora's run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

from remora.sim.jobs.refinement import RefinementViolation
from tests.common.processes import BOUND, REPO
from tests.common.services import unavailable
from tests.jobs.faultrun import private_redis
from tests.postgres.services import fresh_database, require_postgres

pytestmark = pytest.mark.services

PEERS = REPO / "benchmarks" / ".venv-peers"
METRICS = {"jobs_per_s", "cpu_ms_per_job", "commits_per_job", "p50_ms", "p99_ms"}


def peers_bench(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run benchmarks/jobs_peers.py (never installing the peers); its JSON report."""
    if shutil.which("redis-server") is None:
        unavailable("redis-server", "the binary is not installed")
    dsn = require_postgres()
    out = tmp / "peers.json"
    result = subprocess.run(
        [
            *(sys.executable, str(REPO / "benchmarks" / "jobs_peers.py"), "--pg", dsn),
            *("--jobs", "12", "--latency-jobs", "2", "--no-recovery", "--no-install"),
            *("--json", str(out), *args),
        ],
        capture_output=True,
        text=True,
        timeout=6 * BOUND,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    return json.loads(out.read_text())


def test_jobs_peers_remora_json_shape_and_validation(tmp_path: Path) -> None:
    """Remora alone: two worker counts, two repeats — the required JSON shape with
    medians, every measurement's recording validated against the spec.  One body (the
    second, ``sleep10``, only sleeps in the handler: the same code, twice the minute)."""
    report = peers_bench(
        tmp_path,
        "--systems",
        "remora",
        "--workers",
        "1,2",
        "--bodies",
        "noop",
        "--repeat",
        "2",
    )
    assert len(report["load"]) == 2 and all(isinstance(x, float) for x in report["load"])
    assert set(report["systems"]) == {"remora"}
    for per in report["systems"].values():
        assert set(per) == {"1", "2"}
        for row in per.values():
            assert set(row) == METRICS
            assert all(row[m] is not None and row[m] >= 0 for m in METRICS), row
            # Remora's durable steps commit: at least AuthorizeAttempt and AcceptSuccess.
            assert row["commits_per_job"] >= 1, row
    assert len(report["repeats"]) == 2 * 2
    assert report["validation"]["runs"] == 2 * len(report["repeats"])
    assert report["validation"]["valid"] == report["validation"]["runs"]
    # A median of the two repeats, not one of them.
    runs = [r for r in report["repeats"] if r["unit"] == "remora" and r["workers"] == 1]
    rates = sorted(r["throughput"]["jobs_per_s"] for r in runs)
    assert report["systems"]["remora"]["1"]["jobs_per_s"] == pytest.approx(sum(rates) / 2)


def test_jobs_peers_all_four_systems_interleaved(tmp_path: Path) -> None:
    """All four systems, when the benchmark's own peers environment exists (the test never
    creates it): each measured, the order rotated between repeats, guarantees stated."""
    if not (PEERS / "bin" / "python").exists():
        pytest.skip(f"{PEERS} is absent (create it as docs/jobs.md says); peers not measured")
    kinds = ["remora", "procrastinate", "rq", "pgqueuer"]
    report = peers_bench(
        tmp_path,
        "--systems",
        ",".join(kinds),
        "--workers",
        "1",
        "--bodies",
        "noop",
        "--repeat",
        "2",
    )
    assert set(report["systems"]) == set(kinds)
    assert set(report["guarantees"]) == set(kinds)
    for kind in kinds:
        row = report["systems"][kind]["1"]
        assert row["jobs_per_s"] is not None and row["jobs_per_s"] > 0, (kind, row)
        assert row["p50_ms"] is not None, (kind, row)
    assert report["systems"]["rq"]["1"]["commits_per_job"] == 0
    for kind in ("remora", "procrastinate", "pgqueuer"):
        assert report["systems"][kind]["1"]["commits_per_job"] >= 1, kind
    orders = [[r["unit"] for r in report["repeats"] if r["repeat"] == n] for n in (1, 2)]
    assert orders[0] == kinds and orders[1] == kinds[1:] + kinds[:1]


def test_jobs_peers_refuses_to_install_with_no_install(tmp_path: Path) -> None:
    """``--no-install`` with no peers environment: one line and exit 2, nothing created."""
    missing = tmp_path / "no-venv"
    result = subprocess.run(
        [
            *(sys.executable, str(REPO / "benchmarks" / "jobs_peers.py"), "--systems", "rq"),
            *("--no-install", "--jobs", "10"),
        ],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
        env={**os.environ, "REMORA_BENCH_PEERS_VENV": str(missing)},
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "--no-install" in result.stderr
    assert not missing.exists()


def test_the_benchmarks_validation_refuses_a_forged_step(tmp_path: Path) -> None:
    """What jobs_peers.py reports as valid can be invalid: a recorded run of the benchmark's
    app validates, and the same recording with one ``AcceptSuccess`` turned into an
    ``AcceptPermanentFailure`` (an outcome never sent) does not."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from jobs_validation import validate_recording  # benchmarks/ is no package

    record = tmp_path / "record"
    config = '{"tick_ms": 100, "lease_ticks": 30, "reservation_ticks": 30, "max_attempts": 3}'
    with fresh_database() as dsn, private_redis(tmp_path) as url:
        stores = ["--dsn", dsn, "--redis", url, "--record", str(record)]
        env = {**os.environ, "PYTHONPATH": f"{REPO / 'benchmarks'}{os.pathsep}{REPO}"}
        for argv in (
            ["submit", "noop", "--count", "2", "--config", config],
            ["worker", "--app", "jobs_peers_remora_app", "--until-idle", "--log-format", "none"],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "remora", "jobs", *argv, *stores],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=BOUND,
                check=False,
            )
            assert done.returncode == 0, done.stderr
        report = validate_recording(dsn, record, local_limit=1)
        assert report.actions.get("AcceptSuccess") == 2
        forged = False
        for path in record.glob("*.jsonl"):
            lines = path.read_text().splitlines()
            for i, line in enumerate(lines):
                step = json.loads(line)
                if not forged and step["action"] == "AcceptSuccess":
                    lines[i] = json.dumps({**step, "action": "AcceptPermanentFailure"})
                    forged = True
            path.write_text("\n".join(lines) + "\n")
        assert forged
        with pytest.raises(RefinementViolation):
            validate_recording(dsn, record, local_limit=1)
