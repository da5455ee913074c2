"""``remora show FILE``: one self-contained HTML page picturing a run.

FILE is a ``worker-schedule-v1`` trace (replayed first, exactly as ``sim-worker --replay``
would), a report, or an explorer counterexample (``remora-protocol-trace-v1``).  Exit 0 when
the page is written (whatever the run's status); 2 for bad usage or a rejected file (one
line on stderr, nothing written).
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
    p.add_argument("file", metavar="FILE", help="a trace, a report or a counterexample (JSON)")
    p.add_argument("--out", metavar="HTML", help="where to write the page (default FILE.html)")
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


def show(args: argparse.Namespace) -> int:
    source = Path(args.file)
    out = Path(args.out) if args.out else source.with_suffix(".html")
    if out.resolve() == source.resolve():
        raise InvalidInput(f"{source}: the page would overwrite its input; pass --out")
    page = render(timeline_of(source))
    write_output(out, page)
    print(out)
    return EXIT_OK


__all__ = ["register", "show", "timeline_of"]
