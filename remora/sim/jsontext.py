"""The report's JSON spelling, written fast: ``json.dumps(value, indent=2, ensure_ascii=False)``.

Why its own module: with ``indent`` set, the standard library falls back from its C encoder
to a pure-Python generator chain (one generator frame per container, one ``yield`` per
token), and for a report of a 100k-record replay that was a fifth of the whole run.  This
writer produces the very same text — the same separators (``","`` between items, ``": "``
after keys), the same string escaping (the standard library's own ``encode_basestring``), the
same spelling of numbers and constants — with plain recursion into one list of pieces.

It handles exactly what a report holds: dicts, lists and tuples, strings, integers, floats,
booleans and ``None``.  Anything else (another type, a key that is not a scalar, a cycle that
recursion cannot finish) is handed to ``json.dumps`` itself, so even the error raised is the
standard library's.  ``tests/sim/test_jsontext.py`` compares the two on arbitrary values.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

_INFINITY = float("inf")


class _Unsupported(Exception):
    """Something this writer leaves to ``json.dumps``."""


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == _INFINITY:
        return "Infinity"
    if o == -_INFINITY:
        return "-Infinity"
    return float.__repr__(o)


def _scalar(o: Any) -> str:
    if isinstance(o, str):
        return str(encode_basestring(o))
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        return _float(o)
    raise _Unsupported


def _key(k: Any) -> str:
    if isinstance(k, str):
        return str(encode_basestring(k))
    if isinstance(k, float):
        return str(encode_basestring(_float(k)))
    if k is True:
        return '"true"'
    if k is False:
        return '"false"'
    if k is None:
        return '"null"'
    if isinstance(k, int):
        return str(encode_basestring(int.__repr__(k)))
    raise _Unsupported


_SCALARS: dict[type, Any] = {
    str: encode_basestring,
    int: int.__repr__,
    bool: lambda o: "true" if o else "false",
    type(None): lambda o: "null",
    float: _float,
}
"""Exact types written directly; subclasses and the rest go through :func:`_scalar`."""


_EMPTY: dict[type, str] = {dict: "{}", list: "[]", tuple: "[]"}
"""An empty container of these exact types, written without a call (most of an attempt's
lists are empty)."""

_FLAT = frozenset(_SCALARS)
"""A container whose members all have one of these exact types holds no container."""


def _refuse(o: Any) -> Any:
    raise _Unsupported


@functools.lru_cache(maxsize=64)
def _flat_encoder(level: int) -> Callable[[Any, int], Any] | None:
    """The standard library's C encoder set to write a container without nested containers
    at nesting ``level``: its item separator carries the newline and indentation, so only the
    opening and closing lines are left to add.  ``None`` where the C encoder is missing."""
    if c_make_encoder is None:
        return None
    inner = "\n" + "  " * (level + 1)
    return c_make_encoder(  # type: ignore[no-any-return]
        None, _refuse, encode_basestring, None, ": ", "," + inner, False, False, True
    )


def _flat(o: dict[Any, Any] | list[Any] | tuple[Any, ...], level: int) -> str | None:
    """``o`` written by the C encoder if it holds no container (and the encoder exists)."""
    members = o.values() if isinstance(o, dict) else o
    if not _FLAT.issuperset(map(type, members)):
        return None
    encode = _flat_encoder(level)
    if encode is None:
        return None
    body = "".join(encode(o, 0))
    inner = "\n" + "  " * (level + 1)
    return body[0] + inner + body[1:-1] + "\n" + "  " * level + body[-1]


def _text(o: Any, level: int, keys: dict[str, str]) -> str:
    """``o`` written at nesting ``level``; ``keys`` caches each string key's ``"key": ``."""
    if isinstance(o, dict):
        if not o:
            return "{}"
        flat = _flat(o, level)
        if flat is not None:
            return flat
        inner = "\n" + "  " * (level + 1)
        parts: list[str] = []
        for k, v in o.items():
            prefix = keys.get(k) if type(k) is str else None
            if prefix is None:
                prefix = _key(k) + ": "
                if type(k) is str:
                    keys[k] = prefix
            write = _SCALARS.get(type(v))
            if write is not None:
                parts.append(prefix + write(v))
            elif not v and type(v) in _EMPTY:
                parts.append(prefix + _EMPTY[type(v)])
            elif isinstance(v, (dict, list, tuple)):
                parts.append(prefix + _text(v, level + 1, keys))
            else:
                parts.append(prefix + _scalar(v))
        return "{" + inner + ("," + inner).join(parts) + "\n" + "  " * level + "}"
    if isinstance(o, (list, tuple)):
        if not o:
            return "[]"
        flat = _flat(o, level)
        if flat is not None:
            return flat
        inner = "\n" + "  " * (level + 1)
        items: list[str] = []
        for v in o:
            write = _SCALARS.get(type(v))
            if write is not None:
                items.append(write(v))
            elif isinstance(v, (dict, list, tuple)):
                items.append(_text(v, level + 1, keys))
            else:
                items.append(_scalar(v))
        return "[" + inner + ("," + inner).join(items) + "\n" + "  " * level + "]"
    return _scalar(o)


def dumps_indented(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, byte for byte (module docstring)."""
    try:
        return _text(value, 0, {})
    except (_Unsupported, RecursionError):
        return json.dumps(value, indent=2, ensure_ascii=False)


__all__ = [
    "dumps_indented",
]
