"""The ``remora`` command.

Exit codes (documented in ``docs/cli.md``):

* ``0`` — strict success (``PASS`` for simulations, a completed run for ``remora run``);
* ``1`` — any other result (a qualified, incomplete, blocked or erroneous outcome);
* ``2`` — bad usage or a rejected input file.

Each subcommand lives in its own module exposing ``register(subparsers)``; the function it
registers as ``func`` returns the exit code.  Errors reach the user as one line on stderr,
never as a traceback: :func:`main` is the one final handler of every command (``jobs``
included) — an exception nothing else expected becomes
``remora CMD: internal error: Type: message`` (exit 1), and ``--debug`` (anywhere on the
command line, or ``REMORA_DEBUG=1``) prints its traceback as well.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
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
from remora.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, exit_codes
from remora.errors import InvalidInput, RemoraError, StorageFailed

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), not usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


DEBUG_ENV = "REMORA_DEBUG"
DEBUG_HELP = "on an internal error, print the traceback too (or set REMORA_DEBUG=1)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="remora",
        description="Fenced, exactly-once work ownership: run, simulate and check it.",
        epilog=exit_codes(
            "strict success (a completed run, a passing simulation or check)",
            "any other result (interrupted, a partition stopped, a failed check, the store "
            "unavailable or out of space)",
            "bad usage or a rejected input (a file, a source, a database, a read-only store)",
        )
        + "  Each command's --help details its own.",
    )
    parser.add_argument("--version", action="version", version=f"remora {__version__}")
    parser.add_argument("--debug", action="store_true", default=False, help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run_cmd.register(sub)
    status_cmd.register(sub)
    sim_cmd.register(sub)
    explore_cmd.register(sub)
    show_cmd.register(sub)
    jobs_cmd.register(sub)
    sim_jobs_cmd.register(sub)
    _accept_debug_everywhere(parser)
    return parser


def _accept_debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """Let ``--debug`` follow any (sub)command too: ``remora run --debug …``.  SUPPRESS keeps
    a subcommand that was not given it from resetting the value the top level parsed."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument(
                    "--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP
                )
                _accept_debug_everywhere(child)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    debug = bool(args.debug) or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    name = args.command
    try:
        code: int = args.func(args)
    except InvalidInput as exc:
        print(f"remora {name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StorageFailed as exc:  # the message names the file and the cause
        print(f"remora {name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except RemoraError as exc:
        print(f"remora {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"remora {name}: interrupted", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader went away (e.g. `remora … | head`): stop quietly, and keep Python's
        # final flush of stdout from raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    except Exception as exc:  # the final handler: a bug (or a case not yet named) — one line
        if debug:
            traceback.print_exc(file=sys.stderr)
        print(
            f"remora {name}: internal error: {type(exc).__name__}: {one_line(exc)}"
            + ("" if debug else " (run with --debug for the traceback)"),
            file=sys.stderr,
        )
        return EXIT_FAILED
    return code


MAX_MESSAGE = 500
"""The longest error message printed (a message quoting a huge input is cut)."""


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line, at most :data:`MAX_MESSAGE` characters, printable
    whatever it quotes (a lone surrogate would otherwise fail the write to stderr)."""
    try:
        text = " ".join(str(exc).split())
    except Exception:  # str() itself can fail (e.g. a 5,000-digit integer in the message)
        text = repr(exc.args)[:MAX_MESSAGE]
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"
