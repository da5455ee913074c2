"""Documented error lines, for tests that compare them with the printed ones: the lines of
the fenced ``text`` blocks of a docs page, matched with ``…`` standing for any text."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def documented(page: str, start: str) -> list[str]:
    """Every line of a fenced block of ``docs/PAGE`` that starts with ``start``."""
    lines: list[str] = []
    inside = False
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if inside and line.startswith(start):
            lines.append(line)
    assert lines, f"docs/{page} documents no line starting {start!r}"
    return lines


def matches(doc: str, real: str) -> bool:
    """``real`` is ``doc`` with each ``…`` standing for any text."""
    pattern = ".*".join(re.escape(piece) for piece in doc.split("…"))
    return re.fullmatch(pattern, real) is not None


def assert_documented(page: str, start: str, real: str) -> None:
    docs = documented(page, start)
    assert any(matches(d, real) for d in docs), f"docs/{page} has\n{docs}\nprinted:\n{real}"
