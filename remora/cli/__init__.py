"""The ``remora`` command.

Exit codes (documented in ``docs/cli.md``):

* ``0`` — strict success (``PASS`` for simulations, a completed run for ``remora run``);
* ``1`` — any other result (a qualified, incomplete, blocked or erroneous outcome);
* ``2`` — bad usage or a rejected input file.

Each subcommand lives in its own module exposing ``register(subparsers)``; the function it
registers as ``func`` returns the exit code.  Errors reach the user as one line on stderr,
never as a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from remora import __version__
from remora.cli import explore as explore_cmd
from remora.cli import jobs as jobs_cmd
from remora.cli import run as run_cmd
from remora.cli import show as show_cmd
from remora.cli import sim as sim_cmd
from remora.cli import sim_jobs as sim_jobs_cmd
from remora.cli import status as status_cmd
from remora.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from remora.errors import InvalidInput, RemoraError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), not usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="remora",
        description="Fenced, exactly-once work ownership: run, simulate and check it.",
    )
    parser.add_argument("--version", action="version", version=f"remora {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run_cmd.register(sub)
    status_cmd.register(sub)
    sim_cmd.register(sub)
    explore_cmd.register(sub)
    show_cmd.register(sub)
    jobs_cmd.register(sub)
    sim_jobs_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.func(args)
    except InvalidInput as exc:
        print(f"remora {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RemoraError as exc:
        print(f"remora {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"remora {args.command}: interrupted", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader went away (e.g. `remora … | head`): stop quietly, and keep Python's
        # final flush of stdout from raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    return code
