"""Hypothesis strategies for worker schedules.

Everything shrinks toward the simple case: fewer records, visible records without offset
gaps, the natural next amendment of a subject, no faults, the first call, a plain commit, no
delay and no interleave.

* :func:`source_histories` — raw source records for the ``valid`` class (only amendments
  that apply, plus invisible records and offset gaps) or the ``conflict`` class (also
  conflicts, rejections and malformed values); over several partitions, about half the
  histories use the same subject names on every partition.
* :func:`selector_drafts` — fault selectors for one actor (operation x call x allowed outcome,
  ``delay_ms``, interleaves before/after with stop and/or a replacement), one integer each.
* :data:`COMBINATIONS` — every single-selector combination the seed allows and the race
  patterns, for the machines' ``combination`` rule.  A replacement is a
  *draft*: the state machine allocates the fresh lifetime id when it runs the step.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import attrs
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as cu
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.strategies import SearchStrategy

from remora.domain import SourceRecord
from remora.faults import OUTCOMES_FOR, At, Operation, Outcome
from remora.sim.trace import OPERATIONS_OF, Actor, FaultSelector, Interleave

OUTCOME_ORDER = (
    Outcome.COMMIT,
    Outcome.ABORT,
    Outcome.UNKNOWN_COMMITTED,
    Outcome.UNKNOWN_ABORTED,
)
PRIMARY_OPERATION = {
    "assign": Operation.CLAIM,
    "seek": Operation.OBSERVE,
    "process": Operation.PROCESS,
}

# record drafts: (subject index, kind, flags); flags bit 0 = invisible, bits 1-2 = gap before
VALID_KINDS = 2  # 0: the natural next op, 1: withdraw when live
CONFLICT_KINDS = 6  # 2: conflict, 3: rejected op, 4: malformed with subject, 5: garbage
_GARBAGE = (b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe")


def _value(subject: str, op: str, revision: int, body: dict[str, int]) -> bytes:
    doc = {"subject": subject, "op": op, "revision": revision, "body": body}
    return json.dumps(doc, sort_keys=True).encode()


def build_partition(
    partition: int, drafts: Sequence[tuple[int, int, int]], shared: bool = False
) -> list[SourceRecord]:
    """Turn record drafts into raw records, tracking each subject's state so that kind 0
    is always the amendment that applies next.  A valid-kind draft for a subject that is
    withdrawn, or that a conflict-kind record quarantined (which blocks it for good), goes
    to a fresh subject, and so does a conflict-kind draft for a quarantined subject other
    than the first: otherwise nearly every conflict history of a few partitions ends
    ``BLOCKED`` and ``PASS_WITH_EXCLUSIONS`` is reached only by luck.  Conflict kinds still
    hit the first subject once it is quarantined, so ``BLOCKED`` stays reachable.

    Subject names are ``p<partition>-s<i>`` (and ``p<partition>-n<k>`` for fresh ones), or
    with ``shared`` the same names on every partition (``s<i>``, ``n<k>``): subjects are
    scoped to their partition (``docs/fold.md``), so a name on two partitions is two
    subjects, and a store that keys subject state by name alone is caught."""
    prefix = "" if shared else f"p{partition}-"
    revision: dict[str, int] = {}
    state: dict[str, str] = {}
    quarantined: set[str] = set()
    fresh = [0]
    out: list[SourceRecord] = []
    offset = 0
    for subject_index, kind, flags in drafts:
        invisible, gap, n = bool(flags & 1), flags >> 1, offset
        offset += gap
        subject = f"{prefix}s{subject_index}"
        if (state.get(subject) == "withdrawn" and kind <= 1) or (
            subject in quarantined and (kind <= 1 or subject_index > 0)
        ):
            subject = f"{prefix}n{fresh[0]}"
            fresh[0] += 1
        current, rev = state.get(subject, "absent"), revision.get(subject, 0)
        if invisible:
            value = _value(subject, "correct", rev + 5, {"aborted": n})
        elif kind <= 1:
            if current == "absent":
                op = "submit"
            elif kind == 1:
                op = "withdraw"
            else:
                op = "correct"
            revision[subject] = rev + 1
            state[subject] = "withdrawn" if op == "withdraw" else "live"
            value = _value(subject, op, rev + 1, {"n": n} if op != "withdraw" else {})
        elif kind == 2:
            op = "submit" if current == "absent" else "correct"
            value = _value(subject, op, rev + 2 + n % 3, {"n": n})
        elif kind == 3:
            op = {"absent": "correct", "live": "submit", "withdrawn": "correct"}[current]
            value = _value(subject, op, rev + 1, {"n": n})
        elif kind == 4:
            value = json.dumps({"subject": subject, "op": "submit"}).encode()
        else:
            value = _GARBAGE[n % len(_GARBAGE)]
        if not invisible and 2 <= kind <= 4:
            quarantined.add(subject)
        out.append(SourceRecord(partition, offset, not invisible, subject, value))
        offset += 1
    return out


def _kinds(trace_class: str) -> int:
    return VALID_KINDS if trace_class == "valid" else CONFLICT_KINDS


def decode_record(trace_class: str, code: int) -> tuple[int, int, int]:
    """The (subject index, kind, flags) draft a record code stands for (mixed radix:
    subject, kind, flags, least significant first)."""
    kinds = _kinds(trace_class)
    code, subject = divmod(code, 3)
    flags, kind = divmod(code, kinds)
    return subject, kind, flags


def record_codes(trace_class: str) -> st.SearchStrategy[int]:
    """One integer per record draft (:func:`decode_record`); 0 shrinks to subject 0, the
    natural next op, a visible record with no gap before it."""
    return st.integers(0, 3 * _kinds(trace_class) * 8 - 1)


def record_drafts(trace_class: str) -> st.SearchStrategy[tuple[int, int, int]]:
    """(subject index, kind, flags): all shrink to 0 — subject 0, the natural next op, a
    visible record with no gap before it.  Drawn as one integer (mixed radix: subject,
    kind, flags), a third of the draws of three integers."""
    return record_codes(trace_class).map(lambda code: decode_record(trace_class, code))


class _SourceHistories(SearchStrategy[list[SourceRecord]]):
    """Per partition, a list of record codes drawn exactly as ``st.lists(st.integers())``
    draws them (the same continue-decisions and one span per element, so the shrinker
    deletes records as it would from a list) but straight from the choice sequence,
    without a strategy dispatch per record; decoded and built once per partition."""

    def __init__(self, trace_class: str, partitions: int, max_records: int, min_records: int):
        super().__init__()
        self.trace_class, self.partitions = trace_class, partitions
        self.min_records, self.max_records = min_records, max_records
        # the average size st.lists would use
        self.average = min(max(min_records * 2, min_records + 5), 0.5 * (min_records + max_records))
        self.codes = 3 * _kinds(trace_class) * 8

    def __repr__(self) -> str:
        return (
            f"source_histories({self.trace_class!r}, {self.partitions}, "
            f"max_records={self.max_records}, min_records={self.min_records})"
        )

    def do_draw(self, data: ConjectureData) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        # one subject name on several partitions in about half the runs (shrinks to apart)
        shared = self.partitions > 1 and data.draw_boolean(0.5)
        for partition in range(self.partitions):
            codes = []
            with cu.many(data, self.min_records, self.max_records, self.average) as elements:
                for _ in elements:
                    codes.append(data.draw_integer(0, self.codes - 1))
            drafts = [decode_record(self.trace_class, c) for c in codes]
            out += build_partition(partition, drafts, shared)
        return out


@functools.cache
def source_histories(
    trace_class: str, partitions: int, max_records: int = 20, min_records: int = 6
) -> st.SearchStrategy[list[SourceRecord]]:
    """Raw source records for ``partitions`` partitions of a ``valid``/``conflict`` class
    (cached: the machines ask for it once per run)."""
    if not 0 <= min_records <= max_records:
        raise ValueError(
            f"source_histories needs 0 <= min <= max records: {min_records}, {max_records}"
        )
    return _SourceHistories(trace_class, partitions, max_records, min_records)


@attrs.frozen
class SelectorDraft:
    """A fault selector whose replacement, if any, is not yet given an id."""

    operation: Operation
    call: int
    outcome: Outcome
    delay_ms: int = 0
    at: At | None = None
    stop: bool = False
    replace: bool = False

    def materialize(self, replacement: int | None) -> FaultSelector:
        interleave = None
        if self.at is not None:
            interleave = Interleave(self.at, self.stop, replacement if self.replace else None)
        return FaultSelector(self.operation, self.call, self.outcome, self.delay_ms, interleave)


INTERLEAVE_KINDS = ((True, False), (False, True), (True, True))  # (stop, replace)

_CALLS = (1, 1, 1, 2, 3)  # weighted toward the first call, which every attempt makes
_DELAYS = (0, 5, 20)
_INTERLEAVES: tuple[tuple[At | None, bool, bool], ...] = (
    (None, False, False),
    (None, False, False),
    (None, False, False),
    *((at, stop, replace) for at in (At.BEFORE, At.AFTER) for stop, replace in INTERLEAVE_KINDS),
)


@functools.cache
def _operations(actor: str) -> tuple[Operation, ...]:
    primary = PRIMARY_OPERATION[actor]
    others = sorted(OPERATIONS_OF[actor] - {primary}, key=lambda o: o.value)
    return (primary, primary, *others)  # weighted toward the actor's primary operation


def _codes(actor: str, max_call: int) -> int:
    """How many selector codes an actor has (see :func:`decode_selector`)."""
    return len(_operations(actor)) * 4 * len(_calls(max_call)) * len(_DELAYS) * len(_INTERLEAVES)


@functools.cache
def _calls(max_call: int) -> tuple[int, ...]:
    return tuple(c for c in _CALLS if c <= max_call) or (1,)


def decode_selector(actor: str, code: int, max_call: int = 3) -> SelectorDraft:
    """The selector a code stands for: mixed-radix digits, least significant first, for the
    operation, the outcome, the call, the delay and the interleave.  Code 0 is the simplest
    selector (primary operation, commit, first call, no delay, no interleave), and smaller
    digits are simpler, so Hypothesis's integer shrinking simplifies the selector.

    One integer per selector is far cheaper to generate than a composite strategy of six
    draws (generation dominates the machines' time)."""
    operations = _operations(actor)
    code, i = divmod(code, len(operations))
    operation = operations[i]
    code, i = divmod(code, 4)
    outcomes = [o for o in OUTCOME_ORDER if o in OUTCOMES_FOR[operation]]
    outcome = outcomes[i % len(outcomes)]
    calls = _calls(max_call)
    code, i = divmod(code, len(calls))
    call = calls[i]
    code, i = divmod(code, len(_DELAYS))
    delay = _DELAYS[i]
    at, stop, replace = _INTERLEAVES[code % len(_INTERLEAVES)]
    return SelectorDraft(operation, call, outcome, delay, at, stop, replace)


def _slots(actor: str, max_call: int) -> tuple[tuple[Operation, int], ...]:
    """Every (operation, call) an actor's selectors can strike, in a fixed order."""
    operations = dict.fromkeys(_operations(actor))
    return tuple((o, c) for o in operations for c in dict.fromkeys(_calls(max_call)))


def decode_selectors(
    actor: str, codes: Sequence[int], min_size: int = 0, max_size: int = 2, max_call: int = 3
) -> list[SelectorDraft]:
    """The selector list ``max_size`` codes stand for: the first code's least significant
    digit is how many selectors beyond ``min_size``, the rest of each code is a
    :func:`decode_selector` code.  A selector whose (operation, call) an earlier one already
    took moves to the next free (operation, call) in a fixed order — constructive, so
    nothing is ever rejected — and all-zero codes are ``min_size`` simplest selectors on
    successive calls."""
    first, extra = divmod(codes[0], max_size - min_size + 1)
    slots = _slots(actor, max_call)
    taken: set[tuple[Operation, int]] = set()
    out = []
    for one in (first, *codes[1:])[: min(min_size + extra, len(slots))]:
        draft = decode_selector(actor, one, max_call)
        slot = (draft.operation, draft.call)
        if slot in taken:
            start = slots.index(slot)
            slot = next(s for s in slots[start:] + slots[:start] if s not in taken)
            outcomes = [o for o in OUTCOME_ORDER if o in OUTCOMES_FOR[slot[0]]]
            outcome = draft.outcome if draft.outcome in outcomes else outcomes[0]
            draft = attrs.evolve(draft, operation=slot[0], call=slot[1], outcome=outcome)
        taken.add(slot)
        out.append(draft)
    return out


def selector_drafts(
    actor: str, min_size: int = 0, max_size: int = 2, max_call: int = 3
) -> st.SearchStrategy[list[SelectorDraft]]:
    """Fault selectors for one ``assign``/``seek``/``process`` step, at most one per
    (operation, call): ``max_size`` integers, the first also carrying the list's length
    (:func:`decode_selectors`).

    Why so: a ``lists(..., unique_by=...)`` cost a continue-boolean, an integer and a
    uniqueness filter per element, each in its own span, and generation dominated the
    machines' time.  Not one integer for the whole list: Hypothesis draws a wide integer
    range with most of its mass near zero, so the later selectors would nearly always be the
    simplest one.  The strategies are cached (one object per shape)."""
    if not 0 <= min_size <= max_size:
        raise ValueError(f"selector_drafts needs 0 <= min_size <= max_size: {min_size}, {max_size}")
    return _selector_drafts(actor, min_size, max_size, max_call)


class _Selectors(SearchStrategy[list[SelectorDraft]]):
    """``max_size`` integer choices decoded by :func:`decode_selectors`, drawn straight
    from the choice sequence in one span: a ``tuples(integers(), ...).map()`` costs a span
    and a strategy dispatch per part, which showed up in the machines' profile."""

    def __init__(self, actor: str, min_size: int, max_size: int, max_call: int) -> None:
        super().__init__()
        self.actor, self.min_size, self.max_size, self.max_call = (
            actor,
            min_size,
            max_size,
            max_call,
        )
        self.codes = _codes(actor, max_call)

    def __repr__(self) -> str:
        return (
            f"selector_drafts({self.actor!r}, min_size={self.min_size}, "
            f"max_size={self.max_size}, max_call={self.max_call})"
        )

    def do_draw(self, data: ConjectureData) -> list[SelectorDraft]:
        n, size = self.codes, self.max_size
        if size == 0:
            return []
        first = data.draw_integer(0, (size - self.min_size + 1) * n - 1)
        codes = [first, *(data.draw_integer(0, n - 1) for _ in range(size - 1))]
        return decode_selectors(self.actor, codes, self.min_size, size, self.max_call)


@functools.cache
def _selector_drafts(
    actor: str, min_size: int, max_size: int, max_call: int
) -> st.SearchStrategy[list[SelectorDraft]]:
    return _Selectors(actor, min_size, max_size, max_call)


# -- the combination sweep ----------------------------------------------------------------

ACTOR_OF: dict[Operation, Actor] = {
    Operation.VALIDATE: "assign",
    Operation.CLAIM: "assign",
    Operation.OBSERVE: "seek",
    Operation.PROCESS: "process",
}
"""The actor whose first call of an operation a combination's selector strikes."""

KIND_NAMES = {(True, False): "stop", (False, True): "replacement", (True, True): "stop+replacement"}


@attrs.frozen
class Combination:
    """One (operation, outcome, interleave boundary, stop/replacement) class the seed allows,
    or a named race pattern (``pattern``) built from several selectors."""

    actor: Actor
    drafts: tuple[SelectorDraft, ...]
    key: tuple[str, ...]  # what the reach test lists


def _combinations() -> tuple[Combination, ...]:
    out = []
    for operation in (Operation.VALIDATE, Operation.CLAIM, Operation.OBSERVE, Operation.PROCESS):
        for outcome in (o for o in OUTCOME_ORDER if o in OUTCOMES_FOR[operation]):
            for at in (None, At.BEFORE, At.AFTER):
                for stop, replace in [(False, False)] if at is None else INTERLEAVE_KINDS:
                    draft = SelectorDraft(operation, 1, outcome, 0, at, stop, replace)
                    kind = "-" if at is None else KIND_NAMES[(stop, replace)]
                    key = (operation.value, outcome.value, "-" if at is None else at.value, kind)
                    out.append(Combination(ACTOR_OF[operation], (draft,), key))
    abort, unknown = Outcome.ABORT, Outcome.UNKNOWN_COMMITTED
    process, observe, claim = Operation.PROCESS, Operation.OBSERVE, Operation.CLAIM
    no: At | None = None
    patterns: dict[str, tuple[Actor, list[tuple[Operation, int, Outcome, At | None, bool]]]] = {
        # every call of one retry loop unavailable
        "exhausted": ("process", [(process, n, abort, no, False) for n in (1, 2, 3)]),
        # an unknown commit whose recovery read never completes
        "unresolved": (
            "process",
            [(process, 1, unknown, no, False)]
            + [(observe, n, abort, no, False) for n in (1, 2, 3)],
        ),
        # a stop lands while the caller waits to retry: the wakeup must see it
        "cancel-after-wakeup": ("process", [(process, 1, abort, At.AFTER, True)]),
        # an unknown claim, its recovery read, then a fresh claim
        "unknown-claim-then-claim": ("assign", [(claim, 1, unknown, no, False)]),
    }
    for name, (actor, specs) in patterns.items():
        drafts = tuple(
            SelectorDraft(op, call, outcome, 0, at, stop, False)
            for op, call, outcome, at, stop in specs
        )
        out.append(Combination(actor, drafts, ("pattern", name)))
    return tuple(out)


COMBINATIONS = _combinations()
"""Every single-selector combination the seed allows (first call, no delay), then the race
patterns; a state machine rule draws one by index — a single cheap integer draw."""


__all__ = [
    "OUTCOME_ORDER",
    "PRIMARY_OPERATION",
    "VALID_KINDS",
    "CONFLICT_KINDS",
    "build_partition",
    "decode_record",
    "record_codes",
    "record_drafts",
    "source_histories",
    "SelectorDraft",
    "INTERLEAVE_KINDS",
    "decode_selector",
    "decode_selectors",
    "selector_drafts",
    "ACTOR_OF",
    "KIND_NAMES",
    "Combination",
    "COMBINATIONS",
]
