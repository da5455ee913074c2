"""What every store can hold: the rule that turns an unstorable value into a quarantine.

A value can parse and still be impossible to store: JSON escapes can spell a lone surrogate
(``"\\ud800"``), which is not text and cannot be encoded as UTF-8 (SQLite and PostgreSQL
refuse it), or NUL (``"\\u0000"``), which PostgreSQL's ``text`` refuses; and PostgreSQL keeps
versions and revisions in 32-bit ``integer`` columns.  Left to the store, such a record fails
its write on every attempt — the partition stops there for good, and only on some stores.

So the rule lives in the domain, ahead of every store: the amendment fold quarantines such a
value as ``malformed`` (:func:`remora.domain.parse_amendment`), and any other processing's
decision that holds such text is replaced by a ``malformed`` quarantine
(:func:`remora.domain.processing.storable_decision`) — the same result on memory, SQLite
and PostgreSQL.
"""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

MAX_VERSION = 2**31 - 1
"""The largest version/revision every store holds (PostgreSQL ``integer``)."""

UNSTORABLE = "text no store can hold (a lone surrogate or NUL)"


def storable_text(text: str) -> bool:
    """Whether every store can hold ``text``: no lone surrogate, no NUL."""
    return _UNSTORABLE.search(text) is None


def unstorable_in(doc: Any) -> bool:
    """Whether any string or key anywhere in the parsed JSON ``doc`` is not storable text
    (one iterative pass: a deeply nested document cannot overflow the stack here)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if not storable_text(node):
                return True
        elif isinstance(node, dict):
            for key, value in node.items():
                if not storable_text(key):
                    return True
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return False


__all__ = [
    "MAX_VERSION",
    "UNSTORABLE",
    "storable_text",
    "unstorable_in",
]
