"""``remora sim-worker``, ``remora corpus``, ``remora evidence`` and ``remora reduce``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import attrs

from remora.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Progress,
    add_quiet,
    exit_codes,
    int_in,
    read_input,
)
from remora.cli.sim_parallel import is_parallel_file, replay_parallel
from remora.errors import InvalidInput
from remora.limits import MAX_ID, MAX_STEPS, MAX_TRACE_PARTITIONS
from remora.outputs import check_output, write_new, write_output
from remora.sim.artifacts import failures_dir, replay_command, show_command
from remora.sim.corpus import manifest_text, run_corpus, write_evidence
from remora.sim.generate import DEFAULT_STEPS, GENERATED_CLASSES, generate
from remora.sim.mutations import NAMES as MUTATION_NAMES
from remora.sim.mutations import mutation
from remora.sim.parallel import DEFAULT_RUNS
from remora.sim.reduce import Reducer
from remora.sim.report import Report, run_trace
from remora.sim.runs import lifecycle_of, prepared
from remora.sim.scheduler import OnProgress
from remora.sim.stores import STORES, store_factory
from remora.sim.trace import Trace, loads

DEFAULT_MANIFEST = "artifacts/corpus/manifest.json"

MUTATION_SEEDS = 100
"""``--mutation`` without ``--seed`` tries seeds 1..100 and keeps the first failing one."""


def read_trace(path: str) -> Trace:
    return read_input(path, loads)


_seed = int_in(0, MAX_ID)
_steps = int_in(0, MAX_STEPS)  # the trace parser's bound: a saved trace always reads back
_partitions = int_in(1, MAX_TRACE_PARTITIONS)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sim-worker",
        help="run (or replay) a deterministic worker schedule and print its report",
        description="Drive the production lifecycle through a generated or saved schedule on "
        "memory I/O and logical time; print the JSON report on stdout.  A status other than "
        "PASS is explained on stderr (the failure string and the first violation).",
        epilog=exit_codes(
            "strict PASS",
            "any other status (PASS_WITH_EXCLUSIONS, INCOMPLETE, BLOCKED, ERROR)",
            "bad usage or a rejected trace",
        ),
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seed", type=_seed, help="generate the schedule from this seed")
    which.add_argument("--replay", metavar="FILE", help="replay a saved trace (never regenerates)")
    p.add_argument(
        "--mutation",
        metavar="NAME",
        help="run against a named planted bug (" + ", ".join(MUTATION_NAMES) + "); without "
        f"--seed, seeds 1..{MUTATION_SEEDS} are tried and the first failing run is kept",
    )
    p.add_argument(
        "--class",
        dest="trace_class",
        choices=GENERATED_CLASSES,
        default="valid",
        help="the generated source: valid amendments only, or with conflicts, rejections and "
        "malformed values (default valid)",
    )
    p.add_argument(
        "--steps",
        type=_steps,
        default=DEFAULT_STEPS,
        help=f"steps of the generated schedule (default {DEFAULT_STEPS})",
    )
    p.add_argument(
        "--partitions",
        type=_partitions,
        default=None,
        help="partitions of the generated source, 1..64 (default: chosen by the seed)",
    )
    p.add_argument("--no-drain", action="store_true", help="skip fair recovery at the end")
    p.add_argument("--save", metavar="FILE", help="save the generated trace")
    p.add_argument("--report", metavar="FILE", help="also write the report to FILE")
    p.add_argument(
        "--store",
        choices=STORES,
        default=None,
        help="run on a fresh store of this kind (default memory; postgres needs --dsn, whose "
        "user may create a scratch database)",
    )
    p.add_argument("--dsn", help="PostgreSQL server for --store postgres (libpq DSN or URI)")
    p.add_argument(
        "--runs",
        type=int_in(1, 1000),
        default=None,
        help="a parallel example (worker-parallel-v1): how often to re-run its recorded "
        f"schedule (default {DEFAULT_RUNS})",
    )
    p.add_argument(
        "--lifecycle",
        metavar="MODULE:CLASS",
        help="run this Lifecycle subclass (recorded in a generated trace; replaces the one a "
        "replayed trace records)",
    )
    add_quiet(p)
    p.set_defaults(func=sim_worker)

    c = sub.add_parser(
        "corpus",
        help="run the fixed corpus (seeds 1-8 x valid/conflict)",
        description="Run the 16 corpus schedules and write their manifest; each run must end "
        "with the status its source predicts.",
        epilog=exit_codes("every run as predicted", "a run that is not", "bad usage"),
    )
    c.add_argument(
        "--out",
        default=DEFAULT_MANIFEST,
        help=f"manifest path (default {DEFAULT_MANIFEST})",
    )
    add_quiet(c)
    c.set_defaults(func=corpus)

    e = sub.add_parser(
        "evidence",
        help="write the worker evidence bundle",
        description="Write the corpus manifest, seed 17's trace and its report into one directory.",
        epilog=exit_codes(
            "the corpus is as predicted and seed 17 passes", "otherwise", "bad usage"
        ),
    )
    e.add_argument(
        "--dir",
        default="artifacts/evidence",
        help="the bundle's directory (default artifacts/evidence)",
    )
    add_quiet(e)
    e.set_defaults(func=evidence)

    r = sub.add_parser(
        "reduce",
        help="shrink a failing trace while its failure string stays the same",
        description="Delete steps and fault choices while the trace stays valid and fails "
        "the same way; save original and reduced traces under artifacts/failures/ (or "
        "$REMORA_ARTIFACT_DIR) and print the replay commands.",
        epilog=exit_codes(
            "reduced (or nothing could go)",
            "the trace does not fail, so there is nothing to reduce",
            "bad usage or a rejected trace",
        ),
    )
    r.add_argument("file", metavar="FILE", help="a failing worker-schedule-v1 trace")
    r.add_argument(
        "--lifecycle",
        metavar="MODULE:CLASS",
        help="reduce against this Lifecycle subclass instead of the one the trace records",
    )
    add_quiet(r)
    r.set_defaults(func=reduce)


def _generated(args: argparse.Namespace, seed: int) -> Trace:
    trace = generate(seed, args.trace_class, args.steps, args.partitions, drain=not args.no_drain)
    named = {"mutation": args.mutation, "lifecycle": args.lifecycle}
    return attrs.evolve(trace, config=attrs.evolve(trace.config, **named))


def _run(trace: Trace, args: argparse.Namespace, progress: OnProgress | None = None) -> Report:
    with (
        prepared(trace.config, args.lifecycle) as setup,
        store_factory(args.store, args.dsn, setup.processing) as factory,
    ):
        return run_trace(trace, store_factory=factory, progress=progress, **setup.run_kwargs())


def _shown(line: Progress, what: str) -> OnProgress | None:
    """A replay's progress drawn on ``line`` (None when nothing is drawn: no cost)."""
    if not line.enabled:
        return None

    def show(phase: str, done: int, total: int) -> None:
        if line.due():
            unit = "steps" if phase == "steps" else "records"
            line.update(f"{what}: {phase}", done=done, total=total, unit=unit)

    return show


def explain(report: Report) -> list[str]:
    """Why a run is not PASS, for stderr: its failure string, the first violation (kind,
    attempt, where, message) and the first diagnostics."""
    doc = report.document
    lines = [f"status {report.status}; failure: {report.failure}"]
    violations = doc.get("violations") or []
    if violations:
        v = violations[0]
        lines.append(
            f"first violation: {v['kind']} at attempt {v['attempt']} ({v['where']}): {v['message']}"
        )
    lines += [f"diagnostic: {d}" for d in (doc.get("diagnostics") or [])[:3]]
    return lines


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
    for output in (args.save, args.report):
        if output is not None:
            check_output(output)  # a directory or a missing folder: refused before the run
    if args.replay is not None and is_parallel_file(args.replay):
        return replay_parallel(args)
    if args.runs is not None:
        raise InvalidInput("--runs only applies to a parallel example's replay")
    args.store = args.store or "memory"
    if args.replay is not None:
        for flag in ("save", "mutation"):
            if getattr(args, flag):
                raise InvalidInput(
                    f"--{flag} only applies to a generated schedule (a replay runs what its "
                    "trace records)"
                )
        trace = _overridden(read_trace(args.replay), args.lifecycle, "sim-worker")
        line = Progress(quiet=args.quiet)
        report = _run(trace, args, _shown(line, "replay"))
        line.done()
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
        line = Progress(quiet=args.quiet)
        for n, seed in enumerate(seeds, start=1):
            trace = _generated(args, seed)
            if len(seeds) > 1:
                line.update(f"sim-worker: seed {seed}", done=n, total=len(seeds), unit="seeds")
            report = _run(trace, args, _shown(line, f"seed {seed}"))
            if report.status == "ERROR":
                break
        line.done()
        if args.save:
            write_output(args.save, trace.dumps())
    text = report.dumps()
    if args.report:
        write_output(args.report, text)
    sys.stdout.write(text)
    if report.status == "ERROR" and args.replay is None:
        planted = f"{trace.config.mutation}-" if trace.config.mutation else ""
        name = f"sim-worker-{planted}{trace.config.trace_class}-seed-{trace.seed}.json"
        saved = write_new(failures_dir() / name, trace.dumps())
        print(
            f"remora sim-worker: {report.failure} (seed {trace.seed}); trace saved; replay "
            f"with:\n  {replay_command(saved)}\nsee it with:\n  {show_command(saved)}",
            file=sys.stderr,
        )
        for text in explain(report)[1:]:
            print(f"remora sim-worker: {text}", file=sys.stderr)
    elif report.status != "PASS":
        for text in explain(report):
            print(f"remora sim-worker: {text}", file=sys.stderr)
    return EXIT_OK if report.status == "PASS" else EXIT_FAILED


def corpus(args: argparse.Namespace) -> int:
    own_folder = args.out == DEFAULT_MANIFEST  # Remora's own artifacts folder: created
    check_output(args.out, parents=own_folder)
    progress = Progress(quiet=args.quiet)

    def failed(message: str) -> None:
        print(f"remora corpus: FAILED {message}", file=sys.stderr)

    manifest = run_corpus(progress=progress.update, on_failure=failed)
    progress.done()
    write_output(args.out, manifest_text(manifest), parents=own_folder)
    for run in manifest["runs"]:
        mark = "ok " if run["ok"] else "BAD"
        print(
            f"{mark} seed {run['seed']:>2} {run['class']:<8} {run['status']:<21} "
            f"faults {run['selected_faults']:>2} interleaves {run['interleaves']:>2}"
        )
    print(f"manifest: {args.out}")
    return EXIT_OK if manifest["ok"] else EXIT_FAILED


def evidence(args: argparse.Namespace) -> int:
    progress = Progress(quiet=args.quiet)
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
    line = Progress(quiet=args.quiet)
    replays = [0]
    with prepared(trace.config) as setup:

        def failure_of(candidate: Trace) -> str | None:
            replays[0] += 1
            line.update(
                f"reduce: trying {len(candidate.steps)} of {len(trace.steps)} steps;",
                done=replays[0],
                unit="replays",
            )
            return run_trace(
                candidate, progress=_shown(line, "reduce"), **setup.run_kwargs()
            ).failure

        try:
            reducer = Reducer(trace, failure_of)
        except InvalidInput as exc:
            line.done()
            print(f"remora reduce: {args.file}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        where = failures_dir()
        stem = Path(args.file).stem.removesuffix("-reduced")
        original = write_new(where / f"{stem}.json", trace.dumps())
        best = reducer.run()
    line.done()
    reduced = write_new(where / f"{stem}-reduced.json", best.dumps())
    print(f"failure: {reducer.failure}")
    print(f"steps: {len(trace.steps)} -> {len(best.steps)} ({reducer.tries} replays)")
    print(f"original: {replay_command(original)}")
    print(f"reduced:  {replay_command(reduced)}")
    print(f"see it:   {show_command(reduced)}")
    return EXIT_OK


__all__ = ["EXIT_USAGE", "register"]
