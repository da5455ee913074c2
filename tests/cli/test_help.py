"""Every subcommand's ``--help``: each argument explained, the exit codes listed, and no raw
reStructuredText (``double backquotes``, ``:class:`` roles) leaking from docstrings."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from remora.cli import build_parser

RST = re.compile(r"``|:(class|meth|func|mod|attr|data|exc):`|\.\. \w+::")


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("remora",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


ALL = list(commands(build_parser()))
LEAVES = [
    (path, p)
    for path, p in ALL
    if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)
]


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(path) for path, _ in LEAVES}
    assert {"remora run", "remora sim-worker", "remora reduce", "remora jobs submit"} <= names


@pytest.mark.parametrize(("path", "parser"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_argument_has_help(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    missing = [
        "/".join(a.option_strings) or a.dest
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction)
        and a.help != argparse.SUPPRESS
        and not (a.help or "").strip()
    ]
    assert missing == [], f"{' '.join(path)}: no help for {missing}"


TOP = [(path, p) for path, p in ALL if path == ("remora",)]


@pytest.mark.parametrize(
    ("path", "parser"), TOP + LEAVES, ids=[" ".join(p) for p, _ in TOP + LEAVES]
)
def test_every_command_lists_its_exit_codes(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    text = parser.format_help()
    assert "exit status" in text.lower(), f"{' '.join(path)} --help lists no exit codes"
    for code in ("0", "1", "2"):
        assert re.search(rf"\b{code}\b", text.lower().split("exit status", 1)[1]), (path, code)


@pytest.mark.parametrize(("path", "parser"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_no_raw_rst_in_help(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert not RST.search(text), f"{' '.join(path)} --help: {RST.search(text)}"
