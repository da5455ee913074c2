"""End to end on PostgreSQL + Redis: worker *processes* (``remora jobs worker``) run a mix
of succeeding, resuming, retrying, permanently failing and cancelled jobs.  Every job ends
terminal exactly once, each committed result is the winning attempt's staged output, the
non-winners' staging is cleaned, and the recorded run (every process's records, the
durable log, the Redis stream order) validates against the spec."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL job tests need psycopg")

from remora.jobs.durable import open_postgres
from remora.jobs.io import StepRecord
from remora.jobs.model import AttemptId, DurableSnapshot, JobsConfig, LogEntry, Phase
from remora.jobs.postgres import PostgresTarget
from remora.sim.jobs.refinement import constants_of_run, merge_records, validate_run
from tests.common.services import require_redis

pytestmark = pytest.mark.services

REPO = Path(__file__).resolve().parents[2]
BOUND = 120.0
CONFIG = {"tick_ms": 100, "lease_ticks": 100, "reservation_ticks": 100, "max_progress": 10}
JOBS = {
    "greet-1": ("greet", {"name": "Ada"}, Phase.SUCCEEDED, b"hello, Ada"),
    "greet-2": ("greet", {"name": "Bo"}, Phase.SUCCEEDED, b"hello, Bo"),
    "count-1": ("count", {"to": 4}, Phase.SUCCEEDED, b'{"counted": 4, "resumed": false}'),
    "flaky-1": ("flaky", None, Phase.SUCCEEDED, b"ok on attempt 2"),
    "flaky-2": ("flaky", None, Phase.SUCCEEDED, b"ok on attempt 2"),
    "resumable-1": (
        "resumable",
        None,
        Phase.SUCCEEDED,
        b"resumed=True from [first half] on attempt 2",
    ),
    "doomed-1": ("doomed", None, Phase.FAILED, None),
    "slow-1": ("slow", {"seconds": 60}, Phase.CANCELLED, None),
}
TERMINAL_ACTIONS = {
    "AcceptSuccess",
    "AcceptPermanentFailure",
    "AcceptRetryableFailureExhausted",
    "FinalizeCancel",
}


def remora(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "remora", "jobs", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> str:
    try:
        out, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"process did not end: {out}{err}") from None
    assert proc.returncode == 0, f"exit {proc.returncode}: {out}{err}"
    return out


def job_evidence(dsn: str, job_id: str, snap: DurableSnapshot, log: list[LogEntry]) -> str:
    """Everything the stores hold about one job (its row, attempts, every stage row with its
    bytes, its log entries in order): printed when a committed result is wrong, so a rare
    failure under load can be diagnosed from the report alone."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        stage_rows = conn.execute(
            "SELECT token, progress, cleaned, data FROM remora_jobs_stage WHERE job = %s "
            "ORDER BY token, progress",
            (job_id,),
        ).fetchall()
    return json.dumps(
        {
            "job": [attrs.asdict(j) for j in snap.jobs if j.id == job_id],
            "attempts": [attrs.asdict(a) for a in snap.attempts if a.job == job_id],
            "stage": [
                [t, p, c, None if d is None else bytes(d).decode(errors="replace")]
                for t, p, c, d in stage_rows
            ],
            "log": [attrs.asdict(e) for e in log if e.key == job_id],
        },
        indent=1,
        default=str,
    )


def test_worker_processes_on_postgres_and_redis(
    remora_scratch_database: str, tmp_path: Path
) -> None:
    url = require_redis()
    ns = f"remora-e2e:{secrets.token_hex(6)}"
    record = tmp_path / "record"
    stores = [
        "--dsn",
        remora_scratch_database,
        "--redis",
        url,
        "--namespace",
        ns,
        "--record",
        str(record),
    ]
    first = True
    for job_id, (handler, payload, _, _) in JOBS.items():
        extra = ["--config", json.dumps(CONFIG)] if first else []
        first = False
        finish(
            remora(
                "submit", handler, "--id", job_id, "--payload", json.dumps(payload), *stores, *extra
            )
        )
    workers = [
        remora(
            "worker",
            "--app",
            "examples.jobs.app",
            "--concurrency",
            "2",
            "--until-idle",
            "--poll",
            "0.02",
            "--reconcile-every",
            "0.2",
            *stores,
        )
        for _ in range(3)
    ]
    durable = open_postgres(remora_scratch_database)
    target = PostgresTarget(remora_scratch_database)
    try:
        give_up = time.monotonic() + BOUND
        while durable.job("slow-1").phase is not Phase.RUNNING:
            assert time.monotonic() < give_up, "the slow job never started"
            time.sleep(0.02)
        finish(remora("cancel", "slow-1", *stores))
        for w in workers:
            finish(w)
        jobs = {j.id: j for j in durable.jobs()}
        snap = durable.snapshot()
        log = durable.log()
        stage = target.snapshot()
        # Every job terminal, as its handler says, exactly once.
        for job_id, (_, _, phase, result) in JOBS.items():
            job = jobs[job_id]
            assert job.phase is phase, (job_id, job)
            terminal = [e for e in log if e.key == job_id and e.action in TERMINAL_ACTIONS]
            assert len(terminal) == 1, (job_id, terminal)
            if result is not None:
                winner = AttemptId(job_id, job.committed)
                got = target.data(winner, job.max_progress)
                if got != result or stage[winner].progress != job.max_progress:
                    evidence = job_evidence(remora_scratch_database, job_id, snap, log)
                    (tmp_path / f"evidence-{job_id}.json").write_text(evidence)
                    raise AssertionError(
                        f"{job_id}: committed {got!r}, expected {result!r}\n{evidence}"
                    )
        # Non-winners' staging is cleaned (a winner's resumed-from predecessor handed its
        # staging over: it is part of the winner's).
        rows = {(r.job, r.token): r for r in snap.attempts}
        kept = set()
        for job in jobs.values():
            token = job.committed
            while token:
                kept.add(AttemptId(job.id, token))
                token = rows[(job.id, token)].adopted_from
        for a, info in stage.items():
            if a not in kept:
                assert info.cleaned, (a, info)
        assert any(info.cleaned for info in stage.values())
        # The recorded run validates.
        records: list[StepRecord] = []
        for path in sorted(record.glob("*.jsonl")):
            for line in path.read_text().splitlines():
                records.append(StepRecord(**json.loads(line)))
        from remora.jobs.redis_coordination import RedisCoordination

        stream = RedisCoordination(url, durable.config() or JobsConfig(), namespace=ns)
        merged = merge_records(records, log, stream.log())
        stream.close()
        assert len(merged) == len(
            {(r.actor, r.seq) for r in records} | {(e.actor, e.actor_seq) for e in log}
        )  # nothing is missing from the records
        config = durable.config()
        assert config is not None
        constants = constants_of_run(
            merged, sorted(jobs), [w.id for w in snap.workers], config, local_limit=2
        )
        report = validate_run(merged, constants, config)
        assert report.actions["AcceptSuccess"] == 6
        assert report.actions["CleanupStage"] >= 2
        assert report.actions["FinalizeCancel"] == 1
        (tmp_path / "validation.json").write_text(
            json.dumps(
                {
                    "steps": report.steps,
                    "actions": report.actions,
                    "seconds": report.seconds,
                    "explored": report.explored,
                    "ticks_inserted": report.ticks_inserted,
                }
            )
        )
        print(f"validated {report.steps} steps in {report.seconds:.3f}s: {report.actions}")
    finally:
        target.close()
        durable.close()
        import redis

        client = redis.Redis.from_url(url)
        keys = list(client.scan_iter(match=f"{{{ns}}}:*"))
        if keys:
            client.delete(*keys)
