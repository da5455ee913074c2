"""The mutation harness's bookkeeping: the coverage cache, the journal, the node order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.mutation.__main__ import (
    JOB_FILE_MACHINE_TESTS,
    JOB_SERVICE_MACHINE_TESTS,
    MACHINE_TESTS,
    SIDES,
    Coverage,
    fingerprint,
    mutant_timeout,
    read_journal,
    services_available,
)
from tests.mutation.operators import sites

SOURCE = "def f(x):\n    if x > 1:\n        return x + 1\n    return 0\n"


def test_the_journal_keeps_this_codes_results_and_survives_a_cut_line(tmp_path: Path) -> None:
    journal = tmp_path / "results.jsonl"
    lines = [
        {"key": "a", "status": "survived", "seconds": 1, "detail": "", "fingerprint": "old"},
        {"key": "a", "status": "killed", "seconds": 2, "detail": "x", "fingerprint": "new"},
        {"key": "b", "status": "survived", "seconds": 3, "detail": "", "fingerprint": "new"},
        {"key": "b", "status": "killed", "seconds": 4, "detail": "y", "fingerprint": "new"},
    ]
    journal.write_text("".join(json.dumps(d) + "\n" for d in lines) + '{"key": "c", "sta')
    done = read_journal(journal, "new")
    assert {k: d["status"] for k, d in done.items()} == {"a": "killed", "b": "killed"}
    assert read_journal(journal, "other") == {}
    assert read_journal(tmp_path / "missing.jsonl", "new") == {}


def test_coverage_round_trips_and_orders_nodes_cheapest_first() -> None:
    cheap, dear = MACHINE_TESTS[0], MACHINE_TESTS[1]
    cov = Coverage(
        {"m.py": {2: frozenset({dear, cheap}), 3: frozenset({dear})}}, {cheap: 5.0, dear: 1.0}
    )
    again = Coverage.load(cov.dump())
    assert again == cov
    by_line = {s.line: s for s in sites("m.py", SOURCE)}
    assert again.nodes_for(by_line[2]) == (dear, cheap)  # 1 s before 5 s
    assert again.nodes_for(by_line[4]) == ()  # not reached
    assert mutant_timeout((dear,), again) == 60.0
    assert mutant_timeout((dear, cheap), Coverage({}, {dear: 40.0, cheap: 5.0})) == 90.0


def test_the_fingerprint_is_stable() -> None:
    assert fingerprint() == fingerprint()
    assert len(fingerprint()) == 16


def test_each_side_mutates_its_own_code_and_runs_its_own_machines() -> None:
    worker, jobs = SIDES["worker"], SIDES["jobs"]
    assert worker.machines == MACHINE_TESTS
    assert all("job" not in n for n in worker.machines)
    assert jobs.targets == ("remora/jobs",) and all("job" in n for n in jobs.machines)
    assert not any(t.startswith("remora/jobs") for t in worker.targets)
    assert fingerprint(jobs.machines) != fingerprint(worker.machines)
    listed = subprocess.run(
        [sys.executable, "-m", "tests.mutation", "--side", "jobs", "--list", "--only", "guards"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "remora/jobs/guards.py" in listed.stdout and "remora/worker" not in listed.stdout


def test_the_job_side_names_the_services_twin_by_real_node_ids() -> None:
    """The twin's nodes are the only machines that execute the PostgreSQL and Redis stores;
    a renamed parameter id would turn them into "not found" and every such mutant into a
    kill, so the ids must be ones pytest collects."""
    assert services_available("yes") and not services_available("no")
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:randomly",
            *JOB_SERVICE_MACHINE_TESTS,
            *JOB_FILE_MACHINE_TESTS,
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert collected.returncode == 0, collected.stdout[-400:]
    for node in (*JOB_SERVICE_MACHINE_TESTS, *JOB_FILE_MACHINE_TESTS):
        assert node in collected.stdout
