"""``remora sim-worker``, ``remora corpus``, ``remora evidence`` and ``remora reduce``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import attrs

from remora.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Progress, int_at_least
from remora.errors import InvalidInput
from remora.sim.artifacts import atomic_write, failures_dir, replay_command, show_command
from remora.sim.corpus import manifest_text, run_corpus, write_evidence
from remora.sim.generate import DEFAULT_STEPS, GENERATED_CLASSES, generate
from remora.sim.reduce import Reducer
from remora.sim.report import Report, run_trace
from remora.sim.trace import Trace, loads
from remora.testing.mutations import NAMES as MUTATION_NAMES
from remora.testing.mutations import mutation
from remora.testing.runs import lifecycle_of, prepared
from remora.testing.stores import STORES, store_factory

MUTATION_SEEDS = 100
"""``--mutation`` without ``--seed`` tries seeds 1..100 and keeps the first failing one."""


def read_trace(path: str) -> Trace:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read ({exc})") from None
    try:
        return loads(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc}") from None


_non_negative = int_at_least(0)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sim-worker",
        help="run (or replay) a deterministic worker schedule and print its report",
        description="Drive the production lifecycle through a generated or saved schedule on "
        "memory I/O and logical time; print the JSON report. Exit 0 on strict PASS, 1 "
        "otherwise, 2 for bad usage or a rejected trace.",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seed", type=_non_negative, help="generate the schedule from this seed")
    which.add_argument("--replay", metavar="FILE", help="replay a saved trace (never regenerates)")
    p.add_argument(
        "--mutation",
        metavar="NAME",
        help="run against a named planted bug (" + ", ".join(MUTATION_NAMES) + "); without "
        f"--seed, seeds 1..{MUTATION_SEEDS} are tried and the first failing run is kept",
    )
    p.add_argument("--class", dest="trace_class", choices=GENERATED_CLASSES, default="valid")
    p.add_argument("--steps", type=_non_negative, default=DEFAULT_STEPS)
    p.add_argument("--partitions", type=_non_negative, default=None)
    p.add_argument("--no-drain", action="store_true", help="skip fair recovery at the end")
    p.add_argument("--save", metavar="FILE", help="save the generated trace")
    p.add_argument("--report", metavar="FILE", help="also write the report to FILE")
    p.add_argument(
        "--store",
        choices=STORES,
        default="memory",
        help="run on a fresh store of this kind (default memory; postgres needs --dsn, whose "
        "user may create a scratch database)",
    )
    p.add_argument("--dsn", help="PostgreSQL server for --store postgres (libpq DSN or URI)")
    p.add_argument(
        "--lifecycle",
        metavar="MODULE:CLASS",
        help="run this Lifecycle subclass (recorded in a generated trace; replaces the one a "
        "replayed trace records)",
    )
    p.set_defaults(func=sim_worker)

    c = sub.add_parser("corpus", help="run the fixed corpus (seeds 1-8 x valid/conflict)")
    c.add_argument("--out", default="artifacts/corpus/manifest.json", help="manifest path")
    c.set_defaults(func=corpus)

    e = sub.add_parser("evidence", help="write the worker evidence bundle")
    e.add_argument("--dir", default="artifacts/evidence")
    e.set_defaults(func=evidence)

    r = sub.add_parser(
        "reduce",
        help="shrink a failing trace while its failure string stays the same",
        description="Delete steps and fault choices while the trace stays valid and fails "
        "the same way; save original and reduced traces under artifacts/failures/ (or "
        "$REMORA_ARTIFACT_DIR) and print the replay commands.",
    )
    r.add_argument("file", metavar="FILE")
    r.add_argument(
        "--lifecycle",
        metavar="MODULE:CLASS",
        help="reduce against this Lifecycle subclass instead of the one the trace records",
    )
    r.set_defaults(func=reduce)


def _generated(args: argparse.Namespace, seed: int) -> Trace:
    trace = generate(seed, args.trace_class, args.steps, args.partitions, drain=not args.no_drain)
    named = {"mutation": args.mutation, "lifecycle": args.lifecycle}
    return attrs.evolve(trace, config=attrs.evolve(trace.config, **named))


def _run(trace: Trace, args: argparse.Namespace) -> Report:
    with (
        prepared(trace.config, args.lifecycle) as setup,
        store_factory(args.store, args.dsn, setup.processing) as factory,
    ):
        return run_trace(trace, store_factory=factory, **setup.run_kwargs())


def _overridden(trace: Trace, lifecycle: str | None, command: str) -> Trace:
    """``trace`` recording ``lifecycle`` (``--lifecycle`` on a replay), with a note on
    stderr when it replaces a different recorded one."""
    if lifecycle is None or lifecycle == trace.config.lifecycle:
        return trace
    lifecycle_of(lifecycle, "--lifecycle")  # importable, before anything is said or run
    recorded = trace.config.lifecycle or "remora.worker:Lifecycle (built in)"
    print(f"remora {command}: running {lifecycle}; the trace records {recorded}", file=sys.stderr)
    return attrs.evolve(trace, config=attrs.evolve(trace.config, lifecycle=lifecycle))


def sim_worker(args: argparse.Namespace) -> int:
    if args.replay is not None:
        for flag in ("save", "mutation"):
            if getattr(args, flag):
                raise InvalidInput(
                    f"--{flag} only applies to a generated schedule (a replay runs what its "
                    "trace records)"
                )
        trace = _overridden(read_trace(args.replay), args.lifecycle, "sim-worker")
        report = _run(trace, args)
    else:
        if args.seed is None and args.mutation is None:
            raise InvalidInput("one of --seed, --replay or --mutation is required")
        if args.steps < 3:
            raise InvalidInput("--steps must be at least 3")
        if args.mutation is not None:
            mutation(args.mutation)  # an unknown name is bad usage
            if args.lifecycle is not None:
                raise InvalidInput("--mutation runs its own lifecycle: drop --lifecycle")
        seeds = [args.seed] if args.seed is not None else range(1, MUTATION_SEEDS + 1)
        for seed in seeds:
            trace = _generated(args, seed)
            report = _run(trace, args)
            if report.status == "ERROR":
                break
        if args.save:
            atomic_write(args.save, trace.dumps())
    text = report.dumps()
    if args.report:
        atomic_write(args.report, text)
    sys.stdout.write(text)
    if report.status == "ERROR" and args.replay is None:
        planted = f"{trace.config.mutation}-" if trace.config.mutation else ""
        saved = atomic_write(
            failures_dir() / f"sim-worker-{planted}seed-{trace.seed}.json", trace.dumps()
        )
        print(
            f"remora sim-worker: {report.failure} (seed {trace.seed}); trace saved; replay "
            f"with:\n  {replay_command(saved)}\nsee it with:\n  {show_command(saved)}",
            file=sys.stderr,
        )
    elif report.status != "PASS":
        print(f"remora sim-worker: status {report.status}", file=sys.stderr)
    return EXIT_OK if report.status == "PASS" else EXIT_FAILED


def corpus(args: argparse.Namespace) -> int:
    progress = Progress()

    def failed(message: str) -> None:
        print(f"remora corpus: FAILED {message}", file=sys.stderr)

    manifest = run_corpus(progress=progress.update, on_failure=failed)
    progress.done()
    atomic_write(args.out, manifest_text(manifest))
    for run in manifest["runs"]:
        mark = "ok " if run["ok"] else "BAD"
        print(
            f"{mark} seed {run['seed']:>2} {run['class']:<8} {run['status']:<21} "
            f"faults {run['selected_faults']:>2} interleaves {run['interleaves']:>2}"
        )
    print(f"manifest: {args.out}")
    return EXIT_OK if manifest["ok"] else EXIT_FAILED


def evidence(args: argparse.Namespace) -> int:
    progress = Progress()
    result = write_evidence(
        Path(args.dir),
        progress=progress.update,
        on_failure=lambda m: print(f"remora evidence: FAILED {m}", file=sys.stderr),
    )
    progress.done()
    print(
        f"evidence written to {args.dir}: corpus ok={result['corpus_ok']}, "
        f"seed 17 {result['seed_status']}"
    )
    return EXIT_OK if result["corpus_ok"] and result["seed_status"] == "PASS" else EXIT_FAILED


def reduce(args: argparse.Namespace) -> int:
    from remora.cli import sim_jobs

    if sim_jobs.is_job_trace_file(args.file):  # a job-schedule-v1 trace
        return sim_jobs.reduce_jobs(args.file)
    trace = _overridden(read_trace(args.file), args.lifecycle, "reduce")
    with prepared(trace.config) as setup:

        def failure_of(candidate: Trace) -> str | None:
            return run_trace(candidate, **setup.run_kwargs()).failure

        try:
            reducer = Reducer(trace, failure_of)
        except InvalidInput as exc:
            print(f"remora reduce: {args.file}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        where = failures_dir()
        stem = Path(args.file).stem.removesuffix("-reduced")
        original = atomic_write(where / f"{stem}.json", trace.dumps())
        best = reducer.run()
    reduced = atomic_write(where / f"{stem}-reduced.json", best.dumps())
    print(f"failure: {reducer.failure}")
    print(f"steps: {len(trace.steps)} -> {len(best.steps)} ({reducer.tries} replays)")
    print(f"original: {replay_command(original)}")
    print(f"reduced:  {replay_command(reduced)}")
    print(f"see it:   {show_command(reduced)}")
    return EXIT_OK


__all__ = ["EXIT_USAGE", "register"]
