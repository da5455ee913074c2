"""Shared pieces of the command line: exit codes, argument types, output files, tables and
progress output — every subcommand uses these, none re-implements them."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from remora.errors import InvalidInput
from remora.outputs import write_output
from remora.progress import Progress

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for integers >= ``minimum`` (a bad value is a usage error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def int_in(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse ``type`` for integers in ``minimum..maximum`` (else a usage error)."""
    at_least = int_at_least(minimum)

    def parse(text: str) -> int:
        if len(text.strip().lstrip("+-")) > 30:
            raise argparse.ArgumentTypeError(f"must be in {minimum}..{maximum}")
        value = at_least(text)
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    return parse


def write_json(path: str | Path, doc: Any, *, parents: bool = False) -> Path:
    """Write ``doc`` as indented JSON through :func:`remora.outputs.write_output` (atomic
    over a missing path or a regular file, written through a symlink or device, refused
    over a directory)."""
    return write_output(path, json.dumps(doc, indent=2) + "\n", parents=parents)


def print_table(rows: Sequence[dict[str, Any]], headers: Sequence[str]) -> None:
    """``rows`` as left-aligned columns under ``headers`` (booleans as true/false)."""
    cells = [
        [str(r[h]).lower() if isinstance(r[h], bool) else str(r[h]) for h in headers] for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())


def exit_codes(ok: str, failed: str, usage: str = "bad usage or a rejected input file") -> str:
    """The ``exit status`` paragraph every command's ``--help`` ends with."""
    return f"exit status: 0 {ok}; 1 {failed}; 2 {usage} (one line on stderr)."


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """The ``--quiet`` flag of every long command (no progress line on stderr)."""
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress line on stderr (it is drawn only when stderr is a terminal)",
    )


def read_input(path: str, parse: Callable[[str], T]) -> T:
    """Read ``path`` as UTF-8 text and ``parse`` it; either failure is one
    ``InvalidInput`` line naming the file (exit 2) — for every file a command reads."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read ({exc})") from None
    try:
        return parse(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc}") from None


__all__ = [
    "read_input",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Progress",
    "add_quiet",
    "exit_codes",
    "int_at_least",
    "print_table",
    "write_json",
]
