"""``remora sim-worker --replay`` of a parallel example (``worker-parallel-v1``).

A parallel machine's failure is exported with its commands and the choices its scheduler
made (:mod:`remora.sim.parallel`); ``sim-worker --replay`` recognizes the document and runs
that schedule again — ``--runs K`` times (default :data:`~remora.sim.parallel.DEFAULT_RUNS`),
each on a fresh store, since an engine that blocks inside a statement cannot be forced
exactly — and prints a JSON report: the status, the failure, how many of the runs failed
(``reproduced``), the first failing run's detail and what its scheduler did.  A PostgreSQL
example needs ``--dsn`` (a server whose user may create a scratch database)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from remora.cli.common import EXIT_FAILED, EXIT_OK, read_input
from remora.errors import InvalidInput
from remora.outputs import write_output
from remora.sim import parallel


def is_parallel_file(path: str) -> bool:
    """Whether ``path`` holds a parallel example (``sim-worker --replay`` dispatches on it)."""
    try:
        with Path(path).open(encoding="utf-8") as f:
            return parallel.is_parallel(f.read(400))
    except (OSError, UnicodeDecodeError):
        return False


def replay_parallel(args: argparse.Namespace) -> int:
    example = read_input(args.replay, parallel.loads)
    for flag in ("save", "mutation", "lifecycle"):
        if getattr(args, flag, None):
            raise InvalidInput(
                f"--{flag} does not apply to a parallel example (it runs what it records)"
            )
    store = example.target.store
    if args.store not in (None, store):
        raise InvalidInput(f"this parallel example runs on its recorded store ({store})")
    if (store == "postgres") != (args.dsn is not None):
        raise InvalidInput("--dsn is required for a postgres example, and only then")
    report = parallel.replay(example, args.runs, args.dsn)
    text = json.dumps(report.document(example), indent=2, ensure_ascii=False) + "\n"
    if args.report:
        write_output(args.report, text)
    sys.stdout.write(text)
    if report.failed:
        first = report.first
        assert first is not None
        print(
            f"remora sim-worker: {first.failure}: reproduced in {report.failed} of "
            f"{report.runs} runs of the recorded schedule",
            file=sys.stderr,
        )
        print(f"remora sim-worker: {first.detail}", file=sys.stderr)
    return EXIT_OK if report.status == "PASS" else EXIT_FAILED


__all__ = ["is_parallel_file", "replay_parallel"]
