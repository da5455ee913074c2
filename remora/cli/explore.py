"""``remora explore``: exhaustive model checking of the executable ``Remora.tla`` port.

Exit codes: 0 no violation; 1 invariant/action-property violation, deadlock, liveness or
drain failure; 2 bad usage or a rejected configuration file (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from remora.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    Progress,
    add_quiet,
    exit_codes,
    int_at_least,
    write_json,
)
from remora.errors import InvalidInput
from remora.outputs import check_output
from remora.protocol.config import NAMED_CONFIGS, load_config
from remora.protocol.errors import ProtocolError
from remora.protocol.explore import ExploreOptions, explore, format_summary, violation_text
from remora.protocol.liveness import LIVENESS_PROPERTIES, DrainChecker, check_liveness
from remora.protocol.parallel import explore_parallel
from remora.protocol.spec import Remora
from remora.protocol.trace import format_trace
from remora.sim.artifacts import ARTIFACT_ENV


def register(subparsers: Any) -> None:
    """Add the ``explore`` subcommand to ``remora``'s subparsers."""
    p = subparsers.add_parser(
        "explore",
        help="exhaustively explore the Remora.tla port (TLC-compatible counts)",
        description="Exhaustive model checking of the executable port of Remora.tla (state "
        "counts comparable with TLC's).",
        epilog=exit_codes(
            "no violation",
            "an invariant or action-property violation, a deadlock, a liveness or drain "
            "failure (a counterexample is written)",
            "bad usage or a rejected configuration file",
        ),
    )
    p.add_argument(
        "--config",
        required=True,
        metavar="NAME|FILE",
        help=f"named configuration ({', '.join(NAMED_CONFIGS)}) or a .toml/.json file",
    )
    p.add_argument(
        "--liveness",
        action="store_true",
        help="keep the state graph and check the liveness properties (fair SCCs)",
    )
    p.add_argument(
        "--drain",
        action="store_true",
        help="from every reachable state, run the fault-free fair drain to SystemQuiescent",
    )
    p.add_argument(
        "--workers",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="worker processes (default: 2, or 1 with --liveness, which keeps the graph)",
    )
    p.add_argument("--no-deadlock", action="store_true", help="do not report deadlocks")
    p.add_argument(
        "--counterexample",
        metavar="PATH",
        default=None,
        help="where to write the counterexample JSON (default: "
        "$REMORA_ARTIFACT_DIR or artifacts/protocol/<config>-counterexample.json)",
    )
    p.add_argument("--json", metavar="PATH", default=None, help="write the run summary as JSON")
    add_quiet(p)
    p.set_defaults(func=run)


def _cex_path(args: argparse.Namespace, name: str) -> Path:
    if args.counterexample:
        return Path(args.counterexample)
    base = Path(os.environ.get(ARTIFACT_ENV) or "artifacts") / "protocol"
    return base / f"{Path(name).name}-counterexample.json"


def run(args: argparse.Namespace) -> int:
    for output in (args.json, args.counterexample):
        if output:
            check_output(output)  # a directory or a missing folder: refused before the run
    try:
        name, constants = load_config(args.config)
        model = Remora(constants)
    except ProtocolError as exc:
        raise InvalidInput(str(exc)) from None
    workers = args.workers if args.workers is not None else (1 if args.liveness else 2)
    if workers > 1 and args.liveness:
        raise InvalidInput("--liveness needs --workers 1 (it keeps the state graph)")
    drain = DrainChecker(model) if args.drain and workers == 1 else None
    line = Progress(quiet=args.quiet)  # drawn by the explorer, on a terminal only
    opts = ExploreOptions(
        check_deadlock=not args.no_deadlock,
        keep_graph=args.liveness,
        progress=line.stream if line.enabled else None,
        on_state=drain,
    )
    drained: tuple[int, int] | None = None
    try:
        if workers == 1:
            result = explore(model, name, opts)
            if drain is not None:
                drained = (drain.max_length, drain.failures)
        else:
            result, drained = explore_parallel(model, name, opts, workers, drain=args.drain)
    except ProtocolError as exc:
        line.clear()
        print(f"remora explore: spec evaluation error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    line.clear()
    print(format_summary(result))
    summary: dict[str, Any] = {
        "config": name,
        "distinct_states": result.distinct,
        "states_generated": result.generated,
        "depth": result.depth,
        "seconds": round(result.elapsed, 3),
        "workers": workers,
        "per_action": {
            k: {"generated": v.generated, "distinct": v.distinct}
            for k, v in result.per_action.items()
        },
        "violation": None,
        "liveness": None,
        "drain": None,
    }
    code = EXIT_OK
    if result.violation is not None:
        v = result.violation
        print(violation_text(v, model, name))
        doc = v.document(model, name)
        path = _cex_path(args, name)
        write_json(path, doc, parents=not args.counterexample)
        print(f"counterexample written to {path}")
        summary["violation"] = {"kind": v.kind, "name": v.name, "file": str(path)}
        code = EXIT_FAILED
    else:
        print("Model checking completed. No error has been found.")
    if drained is not None and result.violation is None:
        longest, failures = drained
        if failures == 0:
            print(
                "fair drain: every reachable state drains to SystemQuiescent within "
                f"{longest} steps"
            )
        else:
            why = f": {drain.first_failure}" if drain is not None else ""
            print(f"fair drain: {failures} state(s) do not drain{why}")
            code = EXIT_FAILED
        summary["drain"] = {"max_steps": longest, "failures": failures}
    if args.liveness and result.violation is None and result.graph is not None:
        live = check_liveness(model, result.graph, name, LIVENESS_PROPERTIES)
        summary["liveness"] = {}
        first_bad = None
        for lr in live:
            status = "holds" if lr.holds else "VIOLATED"
            print(f"liveness: {lr.label}: {status}")
            summary["liveness"][lr.label] = lr.holds
            if not lr.holds and first_bad is None:
                first_bad = lr
        if first_bad is not None and first_bad.lasso is not None:
            print(f"Error: Temporal property {first_bad.label} is violated by this lasso:")
            print(format_trace(first_bad.lasso))
            path = _cex_path(args, name)
            write_json(path, first_bad.lasso, parents=not args.counterexample)
            print(f"counterexample written to {path}")
            code = EXIT_FAILED
    if args.json:
        write_json(args.json, summary)
    return code


__all__ = [
    "register",
    "run",
]
