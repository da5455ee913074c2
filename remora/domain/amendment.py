"""Parsing a record value into an amendment.

A value is JSON ``{"subject": str, "op": "submit"|"correct"|"withdraw", "revision": int,
"body": {...}}`` and nothing else.  Anything that does not parse to exactly that shape is
*malformed*.  The subject is still extracted when it can be, because a malformed record
with a parseable subject blocks that subject.  A value holding text no store can hold (a
lone surrogate or NUL, spelled as a JSON escape) is malformed too
(:mod:`remora.domain.storable`); its subject counts only when it is storable itself.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from remora.domain.records import OPS, Op
from remora.domain.storable import UNSTORABLE, storable_text, unstorable_in

_FIELDS = frozenset({"subject", "op", "revision", "body"})


@attrs.frozen
class Amendment:
    subject: str
    op: Op
    revision: int
    body: str  # canonical JSON text


@attrs.frozen
class Malformed:
    """Why a value is not an amendment, plus its subject if one could be read."""

    subject: str | None
    detail: str


def canonical_json(value: Any) -> str:
    """The one JSON spelling used for bodies everywhere (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
"""What ``json.loads(text, parse_constant=...)`` builds on every call, built once."""


def _may_hold_unstorable(text: str) -> bool:
    """Whether a string parsed from the JSON ``text`` can hold NUL or a lone surrogate.  A
    decoded ``str`` has no surrogates and the parser refuses raw control characters in
    strings, so such text can only come from a ``\\u`` escape: without one (and without a
    raw NUL) the walk of :func:`unstorable_in` cannot find anything."""
    return "\\u" in text or "\x00" in text


def parse_amendment(value: bytes) -> Amendment | Malformed:
    try:
        text = value.decode("utf-8")
        doc = _DECODER.decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return Malformed(None, f"value is not JSON: {type(exc).__name__}")
    if not isinstance(doc, dict):
        return Malformed(None, "value is not a JSON object")
    raw_subject = doc.get("subject")
    subject = raw_subject if isinstance(raw_subject, str) and raw_subject else None
    if subject is not None and not storable_text(subject):
        return Malformed(None, f"subject holds {UNSTORABLE}")
    if subject is None:
        return Malformed(None, "subject is missing or not a non-empty string")
    if _may_hold_unstorable(text) and unstorable_in(doc):
        return Malformed(subject, f"value holds {UNSTORABLE}")
    extra = sorted(set(doc) - _FIELDS)
    if extra:
        return Malformed(subject, f"unknown fields: {', '.join(extra)}")
    missing = sorted(_FIELDS - set(doc))
    if missing:
        return Malformed(subject, f"missing fields: {', '.join(missing)}")
    op = doc["op"]
    if op not in OPS:
        return Malformed(subject, f"unknown op: {op!r}")
    revision = doc["revision"]
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        return Malformed(subject, "revision is not a positive integer")
    body = doc["body"]
    if not isinstance(body, dict):
        return Malformed(subject, "body is not a JSON object")
    try:
        text = canonical_json(body)
    except RecursionError:
        return Malformed(subject, "body is nested too deeply to store")
    return Amendment(subject=subject, op=op, revision=revision, body=text)


__all__ = [
    "Amendment",
    "Malformed",
    "canonical_json",
    "parse_amendment",
]
