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

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="remora", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"remora {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return EXIT_OK  # pragma: no cover - every subcommand returns its own code
