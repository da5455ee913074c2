"""Replays run with the cyclic collector paused, and leave it as they found it."""

from __future__ import annotations

import gc

import pytest

from remora.sim.gcpause import collector_paused
from remora.sim.generate import generate
from remora.sim.report import run_trace
from remora.sim.trace import loads


def test_paused_inside_and_restored_after_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: the outer pause is kept
            pass
        assert not gc.isenabled()
        raise RuntimeError
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_replay_runs_paused_and_gives_the_same_report_as_with_the_collector() -> None:
    trace = loads(generate(5, "conflict", 24, 2, drain=True).dumps())
    seen: set[bool] = set()
    report = run_trace(trace, progress=lambda *_: seen.add(gc.isenabled()))
    assert seen == {False}
    assert gc.isenabled()
    # The pause is invisible in the report: the same bytes as a replay whose collector
    # runs all the time (forced to collect at every step).
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        with_gc = run_trace(trace, progress=lambda *_: gc.collect())
    finally:
        gc.set_threshold(*old)
    assert with_gc.dumps() == report.dumps()
