"""``remora show FILE``: one self-contained HTML page picturing a run.

FILE is a ``worker-schedule-v1`` trace (replayed first, exactly as ``sim-worker --replay``
would), a report, an explorer counterexample (``remora-protocol-trace-v1``), or the
directory of a recorded job run (``remora jobs … --record DIR``; with the run's stores —
``--db``, or ``--dsn`` and ``--redis`` — the page carries the refinement checker's
verdict).  Exit 0 when the page is written (whatever the run's status); 2 for bad usage or
a rejected file (one line on stderr, nothing written).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from remora import strictjson
from remora.cli.common import EXIT_OK, exit_codes
from remora.errors import InvalidInput
from remora.outputs import write_output
from remora.sim.report import run_trace
from remora.sim.runs import prepared
from remora.sim.timeline import Timeline, from_protocol, from_report, kind_of, render
from remora.sim.trace import loads


def register(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="draw a trace, report or counterexample as one self-contained HTML page",
        description="Write one self-contained HTML page picturing a run: FILE is a "
        "worker-schedule-v1 trace (replayed first, exactly as sim-worker --replay would), a "
        "report, or an explorer counterexample (remora-protocol-trace-v1).",
        epilog=exit_codes(
            "the page was written (whatever the run's status)",
            "an internal failure",
            "bad usage or a rejected file (nothing written)",
        ),
    )
    p.add_argument(
        "file",
        metavar="FILE",
        help="a trace, a report or a counterexample (JSON), or a --record directory",
    )
    p.add_argument("--out", metavar="HTML", help="where to write the page (default FILE.html)")
    run = p.add_argument_group("a recorded job run's stores (for the spec's verdict)")
    run.add_argument("--db", metavar="FILE", help="the run's SQLite database")
    run.add_argument("--dsn", metavar="DSN", help="the run's PostgreSQL database")
    run.add_argument("--redis", metavar="URL", help="the run's Redis (its coordination log)")
    run.add_argument("--namespace", default="remora", help="the run's Redis namespace")
    p.set_defaults(func=show)


def timeline_of(path: Path) -> Timeline:
    """Read FILE and build its timeline (InvalidInput, with the file name, if it cannot)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read ({exc})") from None
    try:
        doc = strictjson.loads(text)
    except strictjson.JsonRejected as exc:
        raise InvalidInput(f"{path}: not valid JSON ({exc})") from None
    try:
        kind = kind_of(doc)
        if kind == "protocol":
            return from_protocol(doc, str(path))
        if kind == "report":
            return from_report(doc, str(path))
        trace = loads(text)
        with prepared(trace.config) as setup:
            report = run_trace(trace, **setup.run_kwargs())
        return from_report(report.document, str(path))
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc}") from None


def run_staging(durable: Any, args: argparse.Namespace) -> list[Any]:
    """The run's target staging (the SQLite run's ``DB.stage`` directory, or PostgreSQL's
    stage table): what its workers staged, recorded or not."""
    from remora.sim.jobs.refinement import target_staging

    target: Any
    if args.db:
        from remora.jobs.target import DirectoryTarget

        root = Path(args.db).with_name(Path(args.db).name + ".stage")
        if not root.is_dir():
            return []
        target = DirectoryTarget(root)
    else:
        from remora.jobs.postgres import PostgresTarget

        target = PostgresTarget(args.dsn)
    try:
        return target_staging(durable.snapshot(), target.snapshot())
    finally:
        target.close()


def recording_of(directory: Path, args: argparse.Namespace) -> Timeline:
    """The timeline of a ``--record`` directory, with the spec's verdict when the run's
    stores are given."""
    from remora.sim.jobs.picture import from_recording, read_records, verdict_of

    records = read_records(directory)
    verdict = None
    if args.db or args.dsn:
        from remora.jobs.durable import open_postgres, open_sqlite

        if args.db and not Path(args.db).is_file():
            raise InvalidInput(f"{args.db}: no such database (--db names the run's SQLite file)")
        durable = open_sqlite(args.db) if args.db else open_postgres(args.dsn, migrate=False)
        try:
            log: list[Any] = []
            if args.redis:
                from remora.jobs.model import JobsConfig
                from remora.jobs.redis_coordination import RedisCoordination

                stream = RedisCoordination(
                    args.redis, durable.config() or JobsConfig(), namespace=args.namespace
                )
                try:
                    log = list(stream.log())
                finally:
                    stream.close()
            verdict = verdict_of(records, durable, log, staging=run_staging(durable, args))
        finally:
            durable.close()
    return from_recording(directory, records, verdict)


def show(args: argparse.Namespace) -> int:
    source = Path(args.file)
    if source.is_dir():
        out = Path(args.out) if args.out else source.with_name(source.name + ".html")
        page = render(recording_of(source, args))
        write_output(out, page)
        print(out)
        return EXIT_OK
    out = Path(args.out) if args.out else source.with_suffix(".html")
    if out.resolve() == source.resolve():
        raise InvalidInput(f"{source}: the page would overwrite its input; pass --out")
    page = render(timeline_of(source))
    write_output(out, page)
    print(out)
    return EXIT_OK


__all__ = ["recording_of", "register", "run_staging", "show", "timeline_of"]
