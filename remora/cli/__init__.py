"""The ``remora`` command.

Exit codes (documented in ``docs/cli.md``):

* ``0`` — strict success (``PASS`` for simulations, a completed run for ``remora run``);
* ``1`` — any other result (a qualified, incomplete, blocked or erroneous outcome);
* ``2`` — bad usage or a rejected input file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from remora import __version__
from remora.protocol.cli import register as register_explore

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="remora", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"remora {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_explore(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    func = getattr(args, "func", None)
    if func is not None:
        code: int = func(args)
        return code
    return EXIT_OK  # pragma: no cover - every subcommand returns its own code
