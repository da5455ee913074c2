"""The production worker loop (threads, real clock) on SQLite + in-process coordination:
succeeding, resuming, retrying, permanently failing and cancelled jobs; the recorded run
validates against the spec by trace validation, and a tampered record does not."""

from __future__ import annotations

import threading
import time
from typing import Any

import attrs
import pytest

from remora.context import Context
from remora.jobs.handlers import REGISTRY
from remora.jobs.io import Actor, MemoryRecorder
from remora.jobs.model import JobsConfig, Phase
from remora.jobs.reconciler import Reconciler
from remora.jobs.worker import Worker
from remora.sim.jobs.refinement import (
    RefinementViolation,
    constants_of_run,
    merge_records,
    validate_run,
)
from tests.jobs.operate import memory_stores

HANDLERS = ["greet", "count", "flaky", "doomed", "slow", "greet", "count", "flaky"]


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    import examples.jobs.app  # noqa: F401  (registers the example handlers)

    cfg = JobsConfig(tick_ms=50, lease_ticks=200, reservation_ticks=200, max_progress=10)
    stores = memory_stores(cfg)
    clock = stores.clock
    rec = MemoryRecorder()
    client = Actor("client", Context(clock), recorder=rec)
    jobs = []
    for i, h in enumerate(HANDLERS):
        jobs.append(f"j{i}")
        stores.submit(client, f"j{i}", h, {"name": "x", "to": 3, "seconds": 30})
    workers = [
        Worker(stores, f"w{k}", concurrency=2, recorder=rec, registry=REGISTRY) for k in range(2)
    ]
    stop = threading.Event()
    threads = []
    for w in workers:
        w.start()
        t = threading.Thread(
            target=w.run, kwargs={"stop": stop, "poll": 0.01, "reconcile_every": 0.05}
        )
        t.start()
        threads.append(t)
    while stores.durable.job("j4").phase is not Phase.RUNNING:
        time.sleep(0.01)
    stores.request_cancel(client, "j4")
    deadline = time.monotonic() + 60
    while stores.durable.jobs(active_only=True) and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    Reconciler(stores, "final", recorder=rec).reconcile_once()
    records = merge_records(rec.steps, stores.durable.log())
    raw = list(rec.steps)
    constants = constants_of_run(records, jobs, [w.id for w in workers], cfg, local_limit=2)
    return {
        "stores": stores,
        "records": records,
        "constants": constants,
        "config": cfg,
        "raw": raw,
    }


def test_every_job_ends_as_its_handler_says(run: dict[str, Any]) -> None:
    stores = run["stores"]
    phases = {j.id: j.phase for j in stores.durable.jobs()}
    assert phases == {
        "j0": Phase.SUCCEEDED,
        "j1": Phase.SUCCEEDED,
        "j2": Phase.SUCCEEDED,
        "j3": Phase.FAILED,
        "j4": Phase.CANCELLED,
        "j5": Phase.SUCCEEDED,
        "j6": Phase.SUCCEEDED,
        "j7": Phase.SUCCEEDED,
    }
    assert stores.result("j0") == b"hello, x"
    assert stores.result("j2") == b"ok on attempt 2"


def test_the_recorded_run_validates(run: dict[str, Any]) -> None:
    report = validate_run(run["records"], run["constants"], run["config"])
    assert report.actions["AcceptSuccess"] == 6
    assert report.actions["AcceptRetryableFailureWithBudget"] == 2
    assert report.actions["AcceptPermanentFailure"] == 1
    assert report.actions["FinalizeCancel"] == 1


def test_a_tampered_record_does_not_validate(run: dict[str, Any]) -> None:
    """The validator is not vacuous: drop one job's first Reserve, or reorder a commit."""
    records = run["records"]
    first = next(i for i, r in enumerate(records) if r.action == "Reserve")
    with pytest.raises(RefinementViolation):
        validate_run(records[:first] + records[first + 1 :], run["constants"], run["config"])
    accept = next(r for r in records if r.action == "AcceptSuccess")
    sent = next(
        r for r in records if r.action == "SendOutcome" and r.params["a"] == accept.params["a"]
    )
    swapped = [
        attrs.evolve(r, version=accept.version)
        if r is sent
        else attrs.evolve(r, version=sent.version)
        if r is accept
        else r
        for r in records
    ]
    with pytest.raises(RefinementViolation):
        validate_run(swapped, run["constants"], run["config"])


def test_a_step_missing_from_the_records_is_taken_from_the_store_logs(
    run: dict[str, Any],
) -> None:
    """A worker killed between its coordination script and its record: the coordination
    log completes the run (and the durable log does for durable steps)."""
    stores, raw = run["stores"], run["raw"]
    reserve = next(i for i, r in enumerate(raw) if r.action == "Reserve")
    authorize = next(i for i, r in enumerate(raw) if r.action == "AuthorizeAttempt")
    lost = raw[:reserve] + raw[reserve + 1 : authorize] + raw[authorize + 1 :]
    merged = merge_records(lost, stores.durable.log(), stores.coordination.log())
    assert len(merged) == len(run["records"])
    validate_run(merged, run["constants"], run["config"])


def test_an_unreachable_store_in_the_idle_check_does_not_end_the_worker() -> None:
    """Regression (found by ``test_real_faults.py::test_links_cut_and_restored``): the
    idle callback of ``remora jobs worker --until-idle`` reads the durable store; with the
    PostgreSQL link cut it raised ``Unavailable`` out of ``Worker.run`` and the worker
    process exited 1.  A link down is a pause: the loop keeps going and asks again."""
    from remora.errors import Unavailable

    stores = memory_stores(JobsConfig(tick_ms=50))
    worker = Worker(stores, "w1", registry=REGISTRY)
    worker.start()
    stop = threading.Event()
    calls = []

    def idle() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise Unavailable("postgres: connection refused (link cut)")
        stop.set()

    worker.run(stop=stop, poll=0.001, reconcile_every=10.0, on_idle=idle)
    assert len(calls) == 3
