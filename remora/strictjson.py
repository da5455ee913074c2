"""The one strict JSON reading of every Remora input file (traces, source lines, reports).

Python's :func:`json.loads` accepts things a file handed to Remora must not contain, and
fails on others with exceptions that are not :class:`ValueError`.  :func:`loads` accepts
exactly one JSON document and rejects, with :class:`~remora.errors.InvalidInput` and a short
reason (never an exception of another type, whatever the bytes):

* a duplicate key in an object (which value would count is a guess);
* ``NaN``, ``Infinity``, ``-Infinity``, and numbers that overflow to infinity (``1e400``);
* an integer of more than :data:`MAX_INT_DIGITS` digits (Python refuses 4,300 digits with a
  ``ValueError`` that names ``sys.set_int_max_str_digits``, not the input);
* nesting deeper than :data:`MAX_DEPTH` (the C scanner would raise ``RecursionError``);
* a lone surrogate (``"\\ud800"``) in any string or key: it is not text, cannot be written
  back as UTF-8, and no store can hold it;
* trailing content after the document.

The checks cost one pass over the parsed document.  Booleans are never integers here either:
``isinstance(True, int)`` is true in Python, so the callers' field checks use
:func:`is_int`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from remora.errors import InvalidInput

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects accepted (a trace needs 6)."""

MAX_INT_DIGITS = 1000
"""The longest integer literal accepted, in digits."""

_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonRejected(InvalidInput):
    """A document :func:`loads` refuses; the message is the reason, one line.  ``syntax``:
    the text is not JSON at all (rather than JSON this reading refuses)."""

    def __init__(self, reason: str, *, syntax: bool = False) -> None:
        super().__init__(reason)
        self.syntax = syntax


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JsonRejected(f"duplicate key {short(key)}")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise JsonRejected(f"{name} is not valid JSON")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise JsonRejected(f"number {short(text)} is out of range")
    return value


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise JsonRejected(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int
)


def loads(text: str) -> Any:
    """Parse ``text`` as exactly one strict JSON document (module docstring)."""
    start = len(text) - len(text.lstrip())
    try:
        doc, end = _DECODER.raw_decode(text, start)
    except JsonRejected:
        raise
    except RecursionError:
        raise JsonRejected(f"nested more than {MAX_DEPTH} levels deep") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise JsonRejected(f"{exc.msg} at {where}", syntax=True) from None
    except ValueError as exc:  # e.g. an integer Python refuses to convert
        raise JsonRejected(" ".join(str(exc).split())[:200]) from None
    if text[end:].strip():
        raise JsonRejected("trailing content after the JSON document", syntax=True)
    check_document(doc)
    return doc


def check_document(doc: Any) -> None:
    """Reject nesting deeper than :data:`MAX_DEPTH` and lone surrogates, in one iterative
    pass (no recursion, so no depth can overflow the stack here)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise JsonRejected(f"a lone surrogate in the string {short(node)}")
        elif isinstance(node, dict | list):
            if depth > MAX_DEPTH:
                raise JsonRejected(f"nested more than {MAX_DEPTH} levels deep")
            if isinstance(node, dict):
                for key, value in node.items():
                    if _SURROGATE.search(key):
                        raise JsonRejected(f"a lone surrogate in the key {short(key)}")
                    stack.append((value, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in node)


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (it cannot be encoded as UTF-8)."""
    return _SURROGATE.search(text) is not None


def is_int(value: Any) -> bool:
    """A JSON integer: an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, safe for any value (a huge integer's
    ``str`` raises; a surrogate is escaped by ``repr``)."""
    if is_int(value) and value.bit_length() > 200:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decode_base64(text: str, what: str) -> bytes:
    """Strict base64 (the standard alphabet, padded), refused with one line naming ``what``
    whatever the text holds (``b64decode`` raises ``ValueError``, not ``binascii.Error``, on
    non-ASCII text)."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise InvalidInput(f"{what} is not valid base64") from None


__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "JsonRejected",
    "loads",
    "check_document",
    "has_surrogate",
    "is_int",
    "short",
    "decode_base64",
]
