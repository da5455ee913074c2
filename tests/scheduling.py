"""The order the suite's tests are handed to pytest-xdist's workers in: the long ones
spread over the workers' first batches (:func:`spread_the_long_tests`).

Why: ``pytest -n auto`` (``--dist load``) gives each worker a first batch of consecutive
tests — a quarter of its share — and then the rest in collection order to whichever worker
asks.  Where the long tests fell in the collection decided the run's length: a job machine
of three minutes collected near the end, or four long hunts in one worker's first batch,
left the other worker idle for minutes (CI's pytest took 1,135 s and 1,630 s on nearly the
same code at stop 46, 1,808 s at stop 47).  Placed greedily — the longest first, each into
the batch with the least expected time — the long tests run while the short ones fill in
around them.  Nothing about a test changes but its place; a test renamed away from
:data:`EXPECTED_S` only stays where it is."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

EXPECTED_S: dict[str, float] = {
    # seconds, quiet machine, ci profile (stop 47's full run --durations, scaled)
    "tests/jobs/test_job_machines.py::test_job_machines": 175,
    "tests/jobs/test_job_machines_services.py::test_the_cut_machine_on_postgres_and_redis": 75,
    "tests/jobs/test_job_loop_planted.py::test_the_loop_machine_kills_a_planted_loop_bug"
    "[forgets-refused-activations]": 60,
    "tests/jobs/test_job_failure_loop.py::"
    "test_planted_bug_is_found_shrunk_exported_replayed_and_reduced": 52,
    "tests/jobs/test_job_machines_services.py::test_job_machine_on_postgres_and_redis[race]": 45,
    "tests/jobs/test_job_machines_services.py::test_job_machine_on_postgres_and_redis[loop]": 40,
    "tests/stateful/test_failure_loop.py::"
    "test_planted_bug_is_found_shrunk_exported_and_replayed": 36,
    "tests/jobs/test_job_machines_services.py::"
    "test_job_machine_on_postgres_and_redis[loop-at-the-limit]": 30,
    "tests/jobs/test_job_failure_loop.py::test_the_shrink_budget_does_not_depend_on_the_clock": 30,
    "tests/jobs/test_job_benchmark_smoke.py::test_jobs_peers_remora_json_shape_and_validation": 30,
    "tests/jobs/test_coordination_twin.py::test_a_planted_script_bug_is_killed_by_the_twin"
    "[expiry-keeps-the-live-index]": 25,
    "tests/jobs/test_batch_planted.py::"
    "test_a_batch_whose_later_rows_skip_their_token_compare_is_killed": 24,
    "tests/jobs/test_cut_machine_planted.py::"
    "test_a_zombie_stage_write_is_refused_by_the_target_fence": 24,
    "tests/stateful/test_protocol_walk.py::TestProtocolWalk::runTest": 24,
    "tests/jobs/test_job_machines.py::test_the_embedded_mode": 20,
    "tests/postgres/test_parallel_pg.py::test_parallel_machine_on_postgres[PgStoreInParallel]": 20,
    "tests/postgres/test_run_outage.py::"
    "test_a_cut_within_the_budget_waits_resumes_and_finishes[15s-of-60s]": 18,
    "tests/jobs/test_job_kinds_services.py::"
    "test_planted_an_enqueue_that_ignores_the_priority_is_killed": 17,
    "tests/jobs/test_job_loop_planted.py::test_the_loop_machine_kills_a_planted_loop_bug"
    "[keeps-refused-reservations]": 16,
    "tests/protocol/test_counts.py::test_counts_equal_tlc[credentials]": 15,
    "tests/jobs/test_fused_planted.py::"
    "test_a_fused_accept_that_skips_its_token_compare_is_killed": 15,
    "tests/jobs/test_end_to_end.py::test_worker_processes_on_postgres_and_redis": 15,
    "tests/protocol/test_counts.py::test_counts_equal_tlc[retry]": 14,
    "tests/jobs/test_cut_machine_planted.py::"
    "test_a_planted_ordering_bug_is_killed_by_the_cut_machines_search[fence-kept]": 8,
}


def spread_the_long_tests(items: Sequence[T], nodeid: dict[int, str], workers: int) -> list[T]:
    """``items`` reordered for ``workers`` xdist workers (``nodeid``: each item's id by
    ``id(item)``): the first ``workers`` batches of the size xdist's load scheduling gives
    (a quarter of each worker's share, at least 2) each open with long tests, assigned
    longest first to the batch whose expected time is least; the rest keep their order.
    One worker or none: ``items`` as they are."""
    if workers < 2:
        return list(items)
    long = sorted(
        (it for it in items if nodeid[id(it)] in EXPECTED_S),
        key=lambda it: -EXPECTED_S[nodeid[id(it)]],
    )
    if not long:
        return list(items)
    chunk = max(len(items) // workers // 4, 2)
    batches: list[list[T]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for it in long:
        i = min(range(workers), key=lambda k: (load[k], len(batches[k])))
        batches[i].append(it)
        load[i] += EXPECTED_S[nodeid[id(it)]]
    chosen = {id(it) for it in long}
    rest = [it for it in items if id(it) not in chosen]
    out: list[T] = []
    for batch in batches:
        need = max(chunk - len(batch), 0)
        out += batch + rest[:need]
        rest = rest[need:]
    return out + rest


def xdist_workers() -> int:
    """How many xdist workers this run has (1 when not under xdist)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
