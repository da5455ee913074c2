"""Running a whole trace and building its report.

The report is labelled ``production-worker-lifecycle; memory I/O and logical time`` and is
a pure function of the trace: the same trace gives a byte-identical report (no wall-clock
times, no host details beyond the trace's own recorded toolchain).

Statuses, highest precedence first: ``ERROR`` (a safety violation, oracle mismatch,
stale-token commit or internal exception) > ``BLOCKED`` (a record was held behind a blocked
subject) > ``INCOMPLETE`` (visible records unprocessed or outbox undelivered) >
``PASS_WITH_EXCLUSIONS`` (complete, some records quarantined) > ``PASS``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

from remora.domain import AMENDMENTS, Processing
from remora.oracle import AMENDMENT_RULES, Model
from remora.sim.gcpause import collector_paused
from remora.sim.jsontext import dumps_indented
from remora.sim.scheduler import LifecycleFactory, OnProgress, Simulation, StoreFactory
from remora.sim.trace import IMPLEMENTATION, Trace, _selector_json
from remora.worker import Lifecycle

LABEL = Simulation.label
STATUSES = ("PASS", "PASS_WITH_EXCLUSIONS", "INCOMPLETE", "BLOCKED", "ERROR")


@attrs.frozen
class Report:
    status: str
    failure: str | None
    document: dict[str, Any]

    def dumps(self) -> str:
        return dumps_indented(self.document) + "\n"


def replay(
    trace: Trace,
    *,
    store_factory: StoreFactory | None = None,
    lifecycle_factory: LifecycleFactory = Lifecycle,
    processing: Processing = AMENDMENTS,
    model: Model = AMENDMENT_RULES,
    progress: OnProgress | None = None,
) -> Simulation:
    """Execute ``trace`` step by step, stopping at the first safety violation, then drain
    if the trace asks for it; returns the finished simulation.  ``progress(phase, done,
    total)`` hears of every step and every drained record (for a progress line).  Runs with
    the cyclic garbage collector paused (:mod:`remora.sim.gcpause`)."""
    with collector_paused():
        return _replay(trace, store_factory, lifecycle_factory, processing, model, progress)


def _replay(
    trace: Trace,
    store_factory: StoreFactory | None,
    lifecycle_factory: LifecycleFactory,
    processing: Processing,
    model: Model,
    progress: OnProgress | None,
) -> Simulation:
    sim = Simulation(
        trace.config,
        trace.source,
        reserved=trace.reserved_replacements(),
        store_factory=store_factory,
        lifecycle_factory=lifecycle_factory,
        processing=processing,
        model=model,
    )
    sim.progress = progress
    total = len(trace.steps)
    for i, step in enumerate(trace.steps, start=1):
        sim.execute(step)
        if progress is not None:
            progress("steps", i, total)
        if sim.violations:
            break
    if trace.drain and not sim.violations:
        sim.drain()
    elif not sim.violations:
        sim.verify("final")
    return sim


def run_trace(
    trace: Trace,
    *,
    store_factory: StoreFactory | None = None,
    lifecycle_factory: LifecycleFactory = Lifecycle,
    processing: Processing = AMENDMENTS,
    model: Model = AMENDMENT_RULES,
    progress: OnProgress | None = None,
) -> Report:
    """Replay ``trace`` and build its report."""
    sim = replay(
        trace,
        store_factory=store_factory,
        lifecycle_factory=lifecycle_factory,
        processing=processing,
        model=model,
        progress=progress,
    )
    return build_report(sim, trace)


def build_report(sim: Simulation, trace: Trace) -> Report:
    """The report of a finished simulation (built with the cyclic collector paused, as the
    replay was: :mod:`remora.sim.gcpause`)."""
    with collector_paused():
        return _build_report(sim, trace)


def _build_report(sim: Simulation, trace: Trace) -> Report:
    final = sim.summary()
    status = final["status"]
    before = sim.before_drain if sim.before_drain is not None else final
    selected = [e for e in sim.events if e.selected_fault]
    document: dict[str, Any] = {
        "label": LABEL,
        "implementation": IMPLEMENTATION,
        "toolchain": trace.toolchain.to_json(),
        "seed": trace.seed,
        "config_digest": trace.config.digest(),
        "status": status,
        "failure": sim.failure(status),
        "predicted": sim.checker.oracle.predicted_status(),
        "drain": trace.drain,
        "steps": {
            "total": len(trace.steps),
            "executed": sum(not a.fair_recovery for a in sim.attempts),
        },
        "before_drain": before,
        "boundary": final["boundary"],
        "diagnostics": final["diagnostics"],
        "violations": [v.to_json() for v in sim.violations],
        "attempts": [
            {
                "index": a.index,
                "actor": a.step.actor,
                "worker": a.step.worker,
                "partition": a.step.partition,
                "choices": [_selector_json(f) for f in a.step.faults],
                "result": a.result,
                "error": a.error,
                "used_selectors": a.used_selectors,
                "fair_recovery": a.fair_recovery,
                "waits_ms": list(a.waits_ms),
                "interleaves": list(a.interleaves),
                "events": [a.first_event, a.last_event],
            }
            for a in sim.attempts
        ],
        "events": [e.to_json() for e in sim.events],
        "counts": {
            "selected_faults": len(selected),
            "by_outcome": dict(sorted(Counter(e.outcome for e in selected).items())),
            "by_operation": dict(sorted(Counter(e.operation for e in selected).items())),
            "interleaves": sum(len(a.interleaves) for a in sim.attempts),
        },
    }
    return Report(status, document["failure"], document)


__all__ = [
    "LABEL",
    "STATUSES",
    "Report",
    "replay",
    "run_trace",
    "build_report",
]
