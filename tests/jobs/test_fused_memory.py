"""The simulation's fused memory stage (:class:`~remora.sim.jobs.simulation.FusedMemoryTarget`):
a completion's stage write inside the durable SQLite transaction, taken back when that
transaction does not commit — what ``PostgresTarget.locked_write`` does on PostgreSQL, so
that the memory + SQLite twin of a machine over PostgreSQL + Redis is parted by a fault the
same way (the nightly finding of stop 46: with a separate stage write there, a failed
completion left the stage written on memory and not on PostgreSQL)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.jobs.durable import open_sqlite
from remora.jobs.model import AttemptId, NotEnabled, StageInfo
from remora.jobs.target import MemoryTarget
from remora.sim.jobs.simulation import FusedMemoryTarget

A1 = AttemptId("j1", 1)
LOCKED: Any = object()  # the locked read passes through unchanged


def staged(commit: bool, fail: bool = False) -> StageInfo | None:
    durable = open_sqlite(":memory:")
    target = FusedMemoryTarget()
    prepare = target.locked_write(durable, A1, 2, b"part", "w1")
    assert prepare is not None

    def body(cur: Any) -> None:
        assert prepare(cur, LOCKED) is LOCKED
        assert target.info(None, A1) == StageInfo(2, False)  # seen inside the transaction
        if fail:
            raise NotEnabled("a later step's guard is false")

    with contextlib.suppress(NotEnabled):
        durable.backend.write(Context(LogicalClock()), commit, "fused", body)
    return target.info(None, A1)


def test_a_committed_fused_write_stays() -> None:
    assert staged(commit=True) == StageInfo(2, False)


def test_a_fused_write_whose_transaction_rolls_back_is_taken_back() -> None:
    assert staged(commit=False) is None


def test_a_fused_write_whose_transaction_fails_after_it_is_taken_back() -> None:
    assert staged(commit=True, fail=True) is None


def test_a_refused_fused_write_raises_inside_the_transaction() -> None:
    durable = open_sqlite(":memory:")
    target = FusedMemoryTarget()
    target._put(A1, 2, b"earlier", "w1")
    prepare = target.locked_write(durable, A1, 2, b"part", "w1")
    assert prepare is not None
    with pytest.raises(NotEnabled, match="not ahead"):
        durable.backend.write(Context(LogicalClock()), True, "fused", lambda c: prepare(c, LOCKED))
    assert target.data(A1) == b"earlier"


def test_the_plain_memory_target_does_not_fuse() -> None:
    assert not hasattr(MemoryTarget(), "locked_write")


def test_on_rollback_outside_a_transaction_is_an_error() -> None:
    durable = open_sqlite(":memory:")
    with pytest.raises(RuntimeError):
        durable.backend.on_rollback(lambda: None)  # type: ignore[attr-defined]


def test_a_run_over_the_services_fuses_its_memory_twin() -> None:
    """The factory of the machines over PostgreSQL + Redis says its target fuses; a run of
    a config with ``fused_stage`` builds the fused memory target, and the trace keeps the
    field (written only when set) so that an exported twin failure replays alike."""
    from remora.jobs.model import Outcome
    from remora.sim.jobs.run import JobRun
    from remora.sim.jobs.trace import JobConfig, _parse_config
    from tests.jobs.job_services import FileBackends, ServiceBackends

    assert ServiceBackends.fuses_stage is True
    assert not getattr(FileBackends, "fuses_stage", False)
    config = JobConfig(jobs=("j1",), workers=("w1",), fused_stage=True)
    run = JobRun(config, {"j1": (Outcome.SUCCESS,)})
    try:
        assert isinstance(run.sim.stores.target, FusedMemoryTarget)
    finally:
        run.close()
    assert config.to_json()["fused_stage"] is True
    assert "fused_stage" not in JobConfig().to_json()
    assert _parse_config(config.to_json(), "config") == config
