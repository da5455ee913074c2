"""Expected outputs of every source prefix, computed from the raw records alone."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, NamedTuple


class RawRecord(NamedTuple):
    partition: int
    offset: int
    visible: bool
    key: str | None
    value: bytes


class OutboxRow(NamedTuple):
    partition: int
    seq: int
    subject: str
    version: int
    op: str
    body: Any  # parsed JSON
    offset: int


class QuarantineRow(NamedTuple):
    partition: int
    offset: int
    subject: str | None
    reason: str


class IntentRow(NamedTuple):
    partition: int
    subject: str
    version: int
    body: Any


class ViewRow(NamedTuple):
    partition: int
    subject: str
    version: int
    status: str  # "live" | "withdrawn"
    body: Any


class Violation(NamedTuple):
    """A broken safety property.  ``kind`` is stable (it names the property); ``message``
    carries the details."""

    kind: str
    partition: int | None
    message: str


class Expectation(NamedTuple):
    outbox: tuple[OutboxRow, ...]
    quarantine: tuple[QuarantineRow, ...]
    intents: tuple[IntentRow, ...]


_KEYS = {"subject", "op", "revision", "body"}
_NEXT_STATE = {
    ("absent", "submit"): "live",
    ("live", "correct"): "live",
    ("live", "withdraw"): "withdrawn",
}


def _no_constants(name: str) -> Any:
    raise ValueError(name)


_DECODER = json.JSONDecoder(parse_constant=_no_constants)
"""What ``json.loads(text, parse_constant=...)`` would build on every call, built once."""

_NOT_STORABLE = re.compile("[\x00\ud800-\udfff]")
"""Text no store can hold: NUL (PostgreSQL ``text``) or a lone surrogate (not UTF-8)."""


def _holds_unstorable_text(doc: object) -> bool:
    """Whether any string or key anywhere in ``doc`` is text no store can hold (walked
    iteratively, so a deeply nested value cannot overflow the stack)."""
    pending = [doc]
    while pending:
        node = pending.pop()
        if type(node) is str:
            if _NOT_STORABLE.search(node):
                return True
        elif type(node) is dict:
            for key, item in node.items():
                if _NOT_STORABLE.search(key):
                    return True
                pending.append(item)
        elif type(node) is list:
            pending.extend(node)
    return False


def read_value(value: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """(subject, amendment) — amendment None when the value is not a well-formed one.

    A value holding text no store can hold is not a well-formed amendment (and its subject
    counts only when it is storable text itself): the spec of the fold quarantines it as
    malformed so that every store gives the same result."""
    try:
        text = value.decode("utf-8")
        doc = _DECODER.decode(text)
    except (ValueError, RecursionError):  # includes UnicodeDecodeError and JSONDecodeError
        return None, None
    if type(doc) is not dict:
        return None, None
    subject = doc.get("subject")
    if type(subject) is not str or subject == "" or _NOT_STORABLE.search(subject):
        return None, None
    # A parsed string can hold NUL or a lone surrogate only through a \u escape (decoded
    # text has no surrogates; the parser refuses raw control characters in strings).
    if ("\\u" in text or "\x00" in text) and _holds_unstorable_text(doc):
        return subject, None
    if set(doc) != _KEYS:
        return subject, None
    revision = doc["revision"]
    if doc["op"] not in ("submit", "correct", "withdraw") or type(doc["op"]) is not str:
        return subject, None
    if type(revision) is not int or revision < 1 or type(doc["body"]) is not dict:
        return subject, None
    return subject, doc


class _PartitionHistory:
    """The whole partition folded once; any prefix is a slice of it."""

    def __init__(self, partition: int, records: Sequence[RawRecord]) -> None:
        self.partition = partition
        visible = sorted((r for r in records if r.visible), key=lambda r: r.offset)
        self.visible_offsets = [r.offset for r in visible]
        self.valid_frontiers = {0} | {o + 1 for o in self.visible_offsets}
        self.outbox: list[OutboxRow] = []
        self.quarantine: list[QuarantineRow] = []
        self.intents: list[IntentRow] = []
        # counts[k]: (outbox, quarantine, intents) lengths after the first k visible records
        self.counts: list[tuple[int, int, int]] = [(0, 0, 0)]
        revision: dict[str, int] = {}
        state: dict[str, str] = {}
        blocked: set[str] = set()
        for r in visible:
            subject, doc = read_value(r.value)
            reason = None
            if subject is not None and subject in blocked:
                reason = "blocked"
            elif doc is None:
                reason = "malformed"
            else:
                assert subject is not None
                current = state.get(subject, "absent")
                nxt = _NEXT_STATE.get((current, doc["op"]))
                if nxt is None:
                    reason = "rejected"
                elif doc["revision"] != revision.get(subject, 0) + 1:
                    reason = "conflict"
                else:
                    revision[subject] = doc["revision"]
                    state[subject] = nxt
                    seq = len(self.outbox) + 1
                    self.outbox.append(
                        OutboxRow(
                            partition,
                            seq,
                            subject,
                            doc["revision"],
                            doc["op"],
                            doc["body"],
                            r.offset,
                        )
                    )
                    if doc["op"] != "withdraw":
                        self.intents.append(
                            IntentRow(partition, subject, doc["revision"], doc["body"])
                        )
            if reason is not None:
                self.quarantine.append(QuarantineRow(partition, r.offset, subject, reason))
                if subject is not None:
                    blocked.add(subject)
            self.counts.append((len(self.outbox), len(self.quarantine), len(self.intents)))

    def processed(self, frontier: int) -> int:
        """How many visible records lie below ``frontier``."""
        return bisect.bisect_left(self.visible_offsets, frontier)

    def at(self, frontier: int) -> Expectation:
        n_out, n_q, n_i = self.counts[self.processed(frontier)]
        return Expectation(
            tuple(self.outbox[:n_out]), tuple(self.quarantine[:n_q]), tuple(self.intents[:n_i])
        )

    def between(self, start: tuple[int, int, int], end: tuple[int, int, int]) -> Expectation:
        """The expected rows at positions ``start`` up to ``end`` (what a growing partition
        appended between two looks)."""
        return Expectation(
            tuple(self.outbox[start[0] : end[0]]),
            tuple(self.quarantine[start[1] : end[1]]),
            tuple(self.intents[start[2] : end[2]]),
        )


# -- a user's reference model, or none -------------------------------------------------


class ModelError(ValueError):
    """A reference model said something impossible."""


class ModelOutput(NamedTuple):
    """What one visible record does, according to a reference model: applied (``reason``
    None: one outbox entry ``subject``/``version``/``op``/``body``, and a committed intent
    when ``intent``) or quarantined (``reason``: ``malformed``, ``conflict``, ``rejected`` or
    ``blocked``)."""

    subject: str | None
    reason: str | None = None
    version: int = 0
    op: str = ""
    body: Any = None  # parsed JSON
    intent: bool = False


PartitionModel = Callable[[RawRecord], ModelOutput]
ReferenceModel = Callable[[int], PartitionModel]
"""A reference model of a custom processing: called with a partition number, it returns a
fresh function that is given that partition's visible records in offset order, once each,
and says what each does.  It must be written independently of the processing it checks."""

AMENDMENT_RULES: Literal["amendment rules"] = "amendment rules"
"""The oracle's own model of Remora's amendment fold (the default)."""

Model = ReferenceModel | Literal["amendment rules"] | None
"""What an :class:`Oracle` checks outputs against: the amendment rules, a user's reference
model, or nothing (None: only the generic properties — every visible offset accounted for
exactly once, frontier and epoch rules, outbox seq — are checked)."""


class _ModelHistory(_PartitionHistory):
    """A partition folded once by a user's reference model."""

    def __init__(self, partition: int, records: Sequence[RawRecord], model: ReferenceModel) -> None:
        self.partition = partition
        visible = sorted((r for r in records if r.visible), key=lambda r: r.offset)
        self.visible_offsets = [r.offset for r in visible]
        self.valid_frontiers = {0} | {o + 1 for o in self.visible_offsets}
        self.outbox, self.quarantine, self.intents = [], [], []
        self.counts = [(0, 0, 0)]
        step = model(partition)
        for r in visible:
            out = step(r)
            if out.reason is None:
                if out.subject is None:
                    raise ModelError(f"reference model applied offset {r.offset} to no subject")
                seq = len(self.outbox) + 1
                self.outbox.append(
                    OutboxRow(partition, seq, out.subject, out.version, out.op, out.body, r.offset)
                )
                if out.intent:
                    self.intents.append(IntentRow(partition, out.subject, out.version, out.body))
            else:
                self.quarantine.append(QuarantineRow(partition, r.offset, out.subject, out.reason))
            self.counts.append((len(self.outbox), len(self.quarantine), len(self.intents)))


class _GenericHistory(_PartitionHistory):
    """No model: the visible offsets only (no expected outputs)."""

    def __init__(self, partition: int, records: Sequence[RawRecord]) -> None:
        self.partition = partition
        self.visible_offsets = sorted(r.offset for r in records if r.visible)
        self.valid_frontiers = {0} | {o + 1 for o in self.visible_offsets}
        self.outbox, self.quarantine, self.intents = [], [], []
        self.counts = [(0, 0, 0)] * (len(self.visible_offsets) + 1)


class Oracle:
    """Expected durable outputs of a source, for any frontier of any partition."""

    def __init__(
        self,
        records: Iterable[RawRecord],
        partitions: Iterable[int] = (),
        model: Model = AMENDMENT_RULES,
    ) -> None:
        self.model = model
        by_partition: dict[int, list[RawRecord]] = {p: [] for p in partitions}
        for r in records:
            by_partition.setdefault(r.partition, []).append(r)
        self._history = {p: self._fold(p, rs) for p, rs in by_partition.items()}

    def _fold(self, partition: int, records: Sequence[RawRecord]) -> _PartitionHistory:
        if self.model == AMENDMENT_RULES:
            return _PartitionHistory(partition, records)
        if self.model is None:
            return _GenericHistory(partition, records)
        assert not isinstance(self.model, str)
        return _ModelHistory(partition, records, self.model)

    @property
    def checks_outputs(self) -> bool:
        """Whether outputs are checked against a model (False: generic properties only)."""
        return self.model is not None

    @property
    def amendment_rules(self) -> bool:
        return self.model == AMENDMENT_RULES

    def visible_below(self, partition: int, frontier: int) -> list[int]:
        """The visible offsets below ``frontier`` (each must be accounted for once)."""
        h = self._h(partition)
        return h.visible_offsets[: h.processed(frontier)]

    @property
    def partitions(self) -> tuple[int, ...]:
        return tuple(sorted(self._history))

    def _h(self, partition: int) -> _PartitionHistory:
        h = self._history.get(partition)
        if h is None:
            h = self._history[partition] = self._fold(partition, [])
        return h

    def expected(self, partition: int, frontier: int) -> Expectation:
        return self._h(partition).at(frontier)

    def expected_counts(self, partition: int, frontier: int) -> tuple[int, int, int]:
        """How many outbox entries, quarantine rows and intents ``frontier`` implies
        (meaningful with a model only: without one, nothing is expected)."""
        h = self._h(partition)
        return h.counts[h.processed(frontier)]

    def expected_between(
        self, partition: int, start: tuple[int, int, int], end: tuple[int, int, int]
    ) -> Expectation:
        """The expected rows from positions ``start`` up to ``end``: what a partition that
        matched the oracle up to ``start`` must have appended to hold ``end`` rows."""
        return self._h(partition).between(start, end)

    def is_visible(self, partition: int, offset: int) -> bool:
        """Whether ``offset`` is a visible record of ``partition``."""
        return offset >= 0 and offset + 1 in self._h(partition).valid_frontiers

    def end_frontier(self, partition: int) -> int:
        """The frontier after every visible record is processed."""
        offsets = self._h(partition).visible_offsets
        return offsets[-1] + 1 if offsets else 0

    def visible_count(self, partition: int) -> int:
        return len(self._h(partition).visible_offsets)

    def processed_count(self, partition: int, frontier: int) -> int:
        return self._h(partition).processed(frontier)

    def is_valid_frontier(self, partition: int, frontier: int) -> bool:
        return frontier in self._h(partition).valid_frontiers

    def view(self, frontiers: dict[int, int] | None = None) -> tuple[ViewRow, ...]:
        """The view after delivering every outbox entry below the given frontiers (the end
        of the source by default), keyed by (partition, subject)."""
        rows: dict[tuple[int, str], ViewRow] = {}
        for p in self.partitions:
            f = self.end_frontier(p) if frontiers is None else frontiers.get(p, 0)
            for e in self.expected(p, f).outbox:
                status = "withdrawn" if e.op == "withdraw" else "live"
                rows[(p, e.subject)] = ViewRow(p, e.subject, e.version, status, e.body)
        return tuple(rows[k] for k in sorted(rows))

    def predicted_status(self) -> str | None:
        """What a complete, fault-free run of this source must end as (None without a
        model: then any complete status is possible)."""
        if not self.checks_outputs:
            return None
        reasons = {q.reason for p in self.partitions for q in self._h(p).quarantine}
        if "blocked" in reasons:
            return "BLOCKED"
        if reasons:
            return "PASS_WITH_EXCLUSIONS"
        return "PASS"


__all__ = [
    "RawRecord",
    "OutboxRow",
    "QuarantineRow",
    "IntentRow",
    "ViewRow",
    "Violation",
    "Expectation",
    "read_value",
    "ModelError",
    "ModelOutput",
    "PartitionModel",
    "ReferenceModel",
    "AMENDMENT_RULES",
    "Model",
    "Oracle",
]
