"""Cost of trace validation on a real run: N jobs through worker processes on PostgreSQL +
Redis (``remora jobs worker --record``), then the merged run is validated against the spec.

    python benchmarks/jobs_validation.py --jobs 200 --workers 3

Prints the run's size (spec steps), the validation time and the search's candidates.  Needs
PostgreSQL (REMORA_PG_DSN, default postgres@127.0.0.1) and Redis (REMORA_REDIS_URL)."""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from remora.jobs.durable import open_postgres  # noqa: E402
from remora.jobs.io import StepRecord  # noqa: E402
from remora.sim.jobs.refinement import (  # noqa: E402
    ValidationReport,
    constants_of_run,
    merge_records,
    validate_run,
)
from remora.sim.scratch import scratch_database  # noqa: E402


def validate_recording(dsn: str, record: Path, local_limit: int) -> ValidationReport:
    """Validate the run recorded in ``record`` (``--record``'s ``*.jsonl``) on the durable
    store at ``dsn`` against the spec; raises ``RefinementViolation`` when it does not
    refine it (``benchmarks/jobs_peers.py`` validates every Remora measurement this way)."""
    durable = open_postgres(dsn)
    try:
        records = [
            StepRecord(**json.loads(line))
            for path in sorted(record.glob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]
        merged = merge_records(records, durable.log())
        snap = durable.snapshot()
        config = durable.config()
        assert config is not None
        constants = constants_of_run(
            merged,
            [j.id for j in snap.jobs],
            [w.id for w in snap.workers],
            config,
            local_limit=local_limit,
        )
        return validate_run(merged, constants, config)
    finally:
        durable.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = p.parse_args()
    cfg = {"tick_ms": 100, "lease_ticks": 30, "reservation_ticks": 30, "max_progress": 10}
    with scratch_database(args.pg, "remora_bench") as dsn, tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "record"
        ns = f"remora-bench:{secrets.token_hex(4)}"
        stores = ["--dsn", dsn, "--redis", args.redis, "--namespace", ns, "--record", str(record)]
        cli = [sys.executable, "-m", "remora", "jobs"]
        handlers = ["greet", "count", "flaky", "resumable", "doomed"]
        for i, h in enumerate(handlers):
            n = args.jobs // len(handlers) + (1 if i < args.jobs % len(handlers) else 0)
            extra = ["--config", json.dumps(cfg)] if i == 0 else []
            subprocess.run(
                [
                    *cli,
                    "submit",
                    h,
                    "--id",
                    h,
                    "--count",
                    str(n),
                    "--payload",
                    '{"name": "x", "to": 3}',
                    *stores,
                    *extra,
                ],
                cwd=REPO,
                check=True,
                capture_output=True,
            )
        started = time.perf_counter()
        procs = [
            subprocess.Popen(
                [
                    *cli,
                    "worker",
                    "--app",
                    "examples.jobs.app",
                    "--until-idle",
                    "--concurrency",
                    str(args.concurrency),
                    *stores,
                ],
                cwd=REPO,
            )
            for _ in range(args.workers)
        ]
        for proc in procs:
            proc.wait()
        ran = time.perf_counter() - started
        report = validate_recording(dsn, record, args.concurrency)
        import redis

        client = redis.Redis.from_url(args.redis)
        keys = list(client.scan_iter(match=f"{{{ns}}}:*"))
        if keys:
            client.delete(*keys)
    print(
        f"jobs {args.jobs}, workers {args.workers}x{args.concurrency}: run {ran:.1f}s; "
        f"{report.steps} spec steps ({len(report.actions)} actions) validated in "
        f"{report.seconds:.2f}s, {report.explored} candidates, {report.ticks_inserted} ticks"
    )


if __name__ == "__main__":
    main()
