"""``remora jobs worker --metrics-port``: a real worker process serves Prometheus text over
HTTP, and a scrape after a known run reads its counts — attempts started and ended by
outcome, the timeout, the queue waits, the jobs by phase from the durable store."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.jobs.visibility import APP, FAST, jobs, samples, started, stop


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return samples(text_string_to_metric_families(reply.read().decode()))


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """A worker process serving metrics on a free port, and its database."""
    db = str(tmp_path / "j.sqlite3")
    for handler, job in (
        ("quick", "q1"),
        ("quick", "q2"),
        ("first_hangs", "t"),
        ("doomed", "d"),
        ("flaky", "f"),
    ):
        out = jobs("submit", handler, "--db", db, "--config", FAST, "--id", job)
        assert out.returncode == 0, out.stderr
    proc, url = started(
        ["worker", "--db", db, "--app", APP, "--metrics-port", "0", "--log-format", "none",
         "--grace", "1"],
        r"remora jobs worker: metrics at (http://127\.0\.0\.1:\d+/metrics)\s",
    )  # fmt: skip
    try:
        yield db, url, proc
    finally:
        stop(proc)


def test_a_scrape_reads_the_counts_of_a_known_run(
    worker: tuple[str, str, subprocess.Popen[str]],
) -> None:
    db, url, proc = worker
    deadline = time.monotonic() + 120
    while True:
        rows = json.loads(jobs("status", "--db", db, "--json").stdout)["jobs"]
        if all(r["phase"] in ("Succeeded", "Failed") for r in rows):
            break
        assert time.monotonic() < deadline, rows
        time.sleep(0.2)
    got = scrape(url)
    # quick x2, first_hangs (timed out, then succeeded), doomed, flaky (failed, succeeded)
    assert got["remora_jobs_attempts_started_total{}"] == 7
    assert got["remora_jobs_attempts_ended_total{outcome=succeeded}"] == 4
    assert got["remora_jobs_attempts_ended_total{outcome=timed_out}"] == 1
    assert got["remora_jobs_attempts_ended_total{outcome=retryable}"] == 1
    assert got["remora_jobs_attempts_ended_total{outcome=failed}"] == 1
    assert got["remora_jobs_timeouts_total{}"] == 1
    assert got["remora_jobs_queue_wait_seconds_count{}"] == 7
    assert got["remora_jobs_attempt_duration_seconds_count{outcome=timed_out}"] == 1
    # the timed-out attempt ran at least its 0.3 s timeout
    assert got["remora_jobs_attempt_duration_seconds_sum{outcome=timed_out}"] >= 0.3
    assert got["remora_jobs{phase=Succeeded,queue=default}"] == 4
    assert got["remora_jobs{phase=Failed,queue=default}"] == 1
    assert got["remora_jobs{phase=Queued,queue=default}"] == 0
    assert got["remora_jobs_store_up{}"] == 1
    assert stop(proc) == 0


def test_a_metrics_port_in_use_is_refused_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        db = str(tmp_path / "j.sqlite3")
        assert jobs("submit", "quick", "--db", db).returncode == 0
        out = jobs("worker", "--db", db, "--app", APP, "--until-idle", "--metrics-port", str(port))
    assert out.returncode == 2
    assert out.stderr.startswith(f"remora jobs: --metrics-port {port}: cannot serve on 127.0.0.1")
    assert len(out.stderr.splitlines()) == 1
