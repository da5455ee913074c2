"""The codec every trace format shares (``worker-schedule-v1`` and ``job-schedule-v1``):
the strict document reader, the field readers, the header, the toolchain and the config
digest.

A reader takes a decoded JSON value and the JSON path it came from, and returns the value
typed — or raises :class:`TraceError` with a message that starts with that path, so a
rejected file is reported as one line naming where it is wrong.  Documents are decoded by
:mod:`remora.strictjson` (duplicate keys, ``NaN``, huge integers, deep nesting and lone
surrogates are refused).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import attrs

from remora import strictjson
from remora.errors import InvalidInput
from remora.limits import MAX_ID


class TraceError(InvalidInput):
    """A rejected trace; the message starts with the JSON path of the problem."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@attrs.frozen
class Toolchain:
    python: str
    remora: str
    hypothesis: str | None = None
    generator: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"python": self.python, "remora": self.remora}
        if self.hypothesis is not None:
            out["hypothesis"] = self.hypothesis
        if self.generator is not None:
            out["generator"] = self.generator
        return out


def config_digest(config_json: dict[str, Any]) -> str:
    text = json.dumps(config_json, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=16)
def current_toolchain(generator: str | None = None) -> Toolchain:
    """The running toolchain (cached: looking up package metadata is slow)."""
    import platform
    from importlib import metadata

    from remora import __version__

    try:
        hyp: str | None = metadata.version("hypothesis")
    except metadata.PackageNotFoundError:  # pragma: no cover - a test dependency
        hyp = None
    return Toolchain(platform.python_version(), __version__, hyp, generator)


T = TypeVar("T")


def read_object(
    value: Any, path: str, required: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TraceError(path, f"expected an object, got {kind_of(value)}")
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise TraceError(f"{path}.{unknown[0]}", "unknown field")
    missing = [k for k in required if k not in value]
    if missing:
        raise TraceError(f"{path}.{missing[0]}", "required field is missing")
    return cast(dict[str, Any], value)


def kind_of(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null"
    )


def read_int(value: Any, path: str, minimum: int = 0, maximum: int = MAX_ID) -> int:
    """An integer in ``minimum..maximum`` (every integer of a trace is bounded: by default
    to what a 64-bit store column holds)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TraceError(path, f"expected an integer, got {kind_of(value)}")
    if value < minimum or value > maximum:
        raise TraceError(path, f"{strictjson.short(value)} is not in {minimum}..{maximum}")
    return value


def read_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise TraceError(path, f"expected true or false, got {kind_of(value)}")
    return value


def read_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise TraceError(path, f"expected a string, got {kind_of(value)}")
    return value


def read_list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise TraceError(path, f"expected an array, got {kind_of(value)}")
    return value


def read_choice(value: Any, path: str, make: Callable[[str], T], what: str) -> T:
    text = read_str(value, path)
    try:
        return make(text)
    except ValueError:
        raise TraceError(path, f"{text!r} is not a valid {what}") from None


MAX_NAME = 200
"""The longest name a trace may give (a mutation, a ``module:qualname`` reference)."""


def read_name(value: Any, path: str) -> str:
    text = read_str(value, path)
    if not text or len(text) > MAX_NAME or not text.isprintable():
        raise TraceError(path, f"expected a printable name of 1..{MAX_NAME} characters")
    return text


def read_document(text: str) -> Any:
    """Decode a trace file's text strictly (one line naming the problem otherwise)."""
    try:
        return strictjson.loads(text)
    except strictjson.JsonRejected as exc:
        if str(exc).startswith("trailing content"):
            raise TraceError("trace", str(exc)) from None
        raise TraceError("trace", f"not valid JSON ({exc})") from None


def parse_header(d: dict[str, Any], version: int, implementation: str) -> Toolchain:
    """Check a trace document's ``version`` and ``implementation`` and read its
    ``toolchain`` (the header every trace format shares: worker and job traces)."""
    if d["version"] != version or isinstance(d["version"], bool):
        raise TraceError("trace.version", f"{d['version']!r} is not supported (expected {version})")
    if d["implementation"] != implementation:
        raise TraceError(
            "trace.implementation", f"{d['implementation']!r} is not {implementation!r}"
        )
    t = read_object(
        d["toolchain"], "trace.toolchain", ["python", "remora"], ["hypothesis", "generator"]
    )
    return Toolchain(
        python=read_str(t["python"], "trace.toolchain.python"),
        remora=read_str(t["remora"], "trace.toolchain.remora"),
        hypothesis=None
        if "hypothesis" not in t
        else read_str(t["hypothesis"], "trace.toolchain.hypothesis"),
        generator=None
        if "generator" not in t
        else read_str(t["generator"], "trace.toolchain.generator"),
    )


__all__ = [
    "MAX_NAME",
    "Toolchain",
    "TraceError",
    "config_digest",
    "current_toolchain",
    "kind_of",
    "parse_header",
    "read_bool",
    "read_choice",
    "read_document",
    "read_int",
    "read_list",
    "read_name",
    "read_object",
    "read_str",
]
