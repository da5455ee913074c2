"""The benchmark scripts still run (tiny sizes; nothing about speed is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.common.processes import BOUND, REPO
from tests.postgres.services import require_postgres

pytestmark = pytest.mark.services


def test_benchmark_script_runs() -> None:
    dsn = require_postgres()
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "postgres_bench.py"),
            "--per-partition",
            "10",
            "--latency-records",
            "20",
            "--repeat",
            "1",
            "--dsn",
            dsn,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(r["store"], r["workers"]) for r in report["run"]] == [
        ("sqlite", 1),
        ("sqlite", 4),
        ("postgres", 1),
        ("postgres", 4),
    ]
    assert {t["store"] for t in report["transaction"]} == {"sqlite", "postgres"}
