"""The fixed corpus (seeds 1-8 x classes valid/conflict, 64 steps, fair recovery) and the
evidence bundle built from it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from remora.outputs import write_new, write_output
from remora.sim.artifacts import failures_dir, replay_command, show_command
from remora.sim.generate import DEFAULT_STEPS, GENERATED_CLASSES, generate
from remora.sim.reduce import reduce_trace
from remora.sim.report import run_trace
from remora.sim.scheduler import LifecycleFactory
from remora.sim.trace import Trace
from remora.worker import Lifecycle

CORPUS_SEEDS = tuple(range(1, 9))
EVIDENCE_SEED = 17


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def save_failure(
    trace: Trace,
    name: str,
    directory: Path | None = None,
    lifecycle_factory: LifecycleFactory = Lifecycle,
) -> tuple[Path, Path]:
    """Save the original failing trace first, then reduce it and save the reduced one."""
    where = directory or failures_dir()
    original = write_new(where / f"{name}.json", trace.dumps())

    def failure_of(t: Trace) -> str | None:
        return run_trace(t, lifecycle_factory=lifecycle_factory).failure

    reduced = write_new(where / f"{name}-reduced.json", reduce_trace(trace, failure_of).dumps())
    return original, reduced


def run_corpus(
    seeds: Iterable[int] = CORPUS_SEEDS,
    classes: Iterable[str] = GENERATED_CLASSES,
    steps: int = DEFAULT_STEPS,
    *,
    progress: Callable[[str], None] | None = None,
    on_failure: Callable[[str], None] | None = None,
    lifecycle_factory: LifecycleFactory = Lifecycle,
) -> dict[str, Any]:
    """Run every (seed, class) with fair recovery; returns the manifest.

    A run passes when it ends with no violation in exactly the status the oracle predicts
    from its source alone.  A failing run's trace is saved (original before reduction) and
    the replay commands are reported through ``on_failure``.  A run that raises instead of
    reporting is a failing entry (``ERROR exception``), so the manifest is always complete."""
    seeds, classes = tuple(seeds), tuple(classes)
    runs = []
    combos = [(s, c) for c in classes for s in seeds]
    for i, (seed, trace_class) in enumerate(combos, start=1):
        if progress is not None:
            progress(f"corpus {i}/{len(combos)}: seed {seed} {trace_class}")
        trace = generate(seed, trace_class, steps)
        text = trace.dumps()
        entry: dict[str, Any] = {"seed": seed, "class": trace_class, "steps": len(trace.steps)}
        failure: str | None
        try:
            report = run_trace(trace, lifecycle_factory=lifecycle_factory)
        except Exception as exc:  # the run itself broke: a failing entry, never an abort
            entry.update(
                status="ERROR",
                predicted=None,
                ok=False,
                failure="ERROR exception",
                error=f"{type(exc).__name__}: {exc}",
                trace_sha256=_sha(text),
            )
            status, failure = "ERROR", "ERROR exception"
        else:
            ok = report.status == report.document["predicted"] and report.status != "ERROR"
            entry.update(
                status=report.status,
                predicted=report.document["predicted"],
                ok=ok,
                failure=report.failure if not ok else None,
                selected_faults=report.document["counts"]["selected_faults"],
                interleaves=report.document["counts"]["interleaves"],
                attempts=len(report.document["attempts"]),
                trace_sha256=_sha(text),
                report_sha256=_sha(report.dumps()),
            )
            status, failure = report.status, report.failure
        if not entry["ok"]:
            name = f"corpus-seed-{seed}-{trace_class}"
            try:
                original, reduced = save_failure(trace, name, lifecycle_factory=lifecycle_factory)
            except Exception:  # reduction needs replays that work: keep the original only
                original = reduced = write_new(failures_dir() / f"{name}.json", text)
            entry["saved"] = {"original": str(original), "reduced": str(reduced)}
            if on_failure is not None:
                on_failure(
                    f"seed {seed} {trace_class}: {status} ({failure}); replay:\n"
                    f"  {replay_command(original)}\n  {replay_command(reduced)}\nsee it:\n"
                    f"  {show_command(reduced)}"
                )
        runs.append(entry)
    return {
        "corpus": "worker-schedule-v1",
        "seeds": list(seeds),
        "classes": list(classes),
        "steps": steps,
        "runs": runs,
        "ok": all(r["ok"] for r in runs),
    }


def manifest_text(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def write_evidence(
    directory: Path,
    *,
    progress: Callable[[str], None] | None = None,
    on_failure: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``worker-corpus.json``, ``worker-seed-17.json`` and ``worker-seed-17-report.json``."""
    manifest = run_corpus(progress=progress, on_failure=on_failure)
    write_output(directory / "worker-corpus.json", manifest_text(manifest), parents=True)
    trace = generate(EVIDENCE_SEED, "valid")
    write_output(directory / f"worker-seed-{EVIDENCE_SEED}.json", trace.dumps(), parents=True)
    report = run_trace(trace)
    write_output(
        directory / f"worker-seed-{EVIDENCE_SEED}-report.json", report.dumps(), parents=True
    )
    return {"corpus_ok": manifest["ok"], "seed_status": report.status}


__all__ = [
    "CORPUS_SEEDS",
    "EVIDENCE_SEED",
    "save_failure",
    "run_corpus",
    "manifest_text",
    "write_evidence",
]
