"""The amendment fold against hand-derived fixtures, and its individual rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remora.domain import (
    Applied,
    Malformed,
    Quarantined,
    SourceRecord,
    SubjectState,
    canonical_json,
    decide,
    parse_amendment,
)
from remora.errors import InvalidInput
from tests.common.support import FIXTURES, amendment, fixture_records, load_fixture

FOLD_FIXTURES = sorted((FIXTURES / "fold").glob("*.json"))


def fold_all(recs: list[SourceRecord]) -> dict[str, Any]:
    """Apply records in order with the pure fold, as a store would."""
    subjects: dict[str, SubjectState] = {}
    outbox, quarantine, intents = [], [], []
    next_seq, frontier = 1, 0
    for record in recs:
        if not record.visible:
            continue
        parsed = parse_amendment(record.value)
        current = subjects.get(parsed.subject) if parsed.subject else None
        d = decide(record, parsed, current, next_seq)
        if isinstance(d, Applied):
            outbox.append(d.entry)
            next_seq += 1
            if d.intent:
                intents.append(d.intent)
        else:
            quarantine.append(d.entry)
        if d.subject is not None:
            subjects[d.subject.subject] = d.subject
        frontier = record.offset + 1
    return {
        "frontier": frontier,
        "outbox": outbox,
        "quarantine": quarantine,
        "intents": intents,
        "subjects": subjects,
    }


def expected_outbox(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    p = doc["partition"]
    return [
        (p, e["seq"], e["subject"], e["version"], e["op"], canonical_json(e["body"]), e["offset"])
        for e in doc["expected"]["outbox"]
    ]


@pytest.mark.parametrize("path", FOLD_FIXTURES, ids=lambda p: Path(p).stem)
def test_fold_matches_hand_derived_fixture(path: Path) -> None:
    doc = load_fixture(path)
    got = fold_all(fixture_records(doc))
    exp = doc["expected"]
    assert got["frontier"] == exp["frontier"]
    assert [
        (e.partition, e.seq, e.subject, e.version, e.op, e.body, e.offset) for e in got["outbox"]
    ] == expected_outbox(doc)
    assert [(q.offset, q.subject, q.reason) for q in got["quarantine"]] == [
        (q["offset"], q["subject"], q["reason"]) for q in exp["quarantine"]
    ]
    assert [(i.subject, i.version, i.body) for i in got["intents"]] == [
        (i["subject"], i["version"], canonical_json(i["body"])) for i in exp["intents"]
    ]
    assert {
        s: {"revision": st.revision, "status": st.status, "blocked": st.blocked}
        for s, st in got["subjects"].items()
    } == exp["subjects"]


def rec(value: dict[str, Any] | str, offset: int = 0, visible: bool = True) -> SourceRecord:
    raw = value if isinstance(value, str) else json.dumps(value)
    return SourceRecord(0, offset, visible, None, raw.encode())


def one(value: dict[str, Any] | str, current: SubjectState | None = None) -> Applied | Quarantined:
    r = rec(value)
    return decide(r, parse_amendment(r.value), current, 1)


LIVE2 = SubjectState("s", 2, "live", False, "{}")


@pytest.mark.parametrize(
    ("value", "current", "reason"),
    [
        (amendment("s", "submit", 2), None, "conflict"),
        (amendment("s", "correct", 1), None, "rejected"),
        (amendment("s", "withdraw", 1), None, "rejected"),
        (amendment("s", "submit", 3), LIVE2, "rejected"),
        (amendment("s", "correct", 2), LIVE2, "conflict"),
        (amendment("s", "correct", 4), LIVE2, "conflict"),
        (amendment("s", "withdraw", 5), LIVE2, "conflict"),
        (amendment("s", "correct", 3), SubjectState("s", 2, "withdrawn", False), "rejected"),
        (amendment("s", "submit", 1), SubjectState("s", 0, "absent", True), "blocked"),
        ({"subject": "s", "op": "submit", "revision": 1}, None, "malformed"),
        ({"subject": "s", "op": "submit", "revision": 1, "body": [], "x": 1}, None, "malformed"),
        ({"subject": "s", "op": "delete", "revision": 1, "body": {}}, None, "malformed"),
        ({"subject": "s", "op": "submit", "revision": True, "body": {}}, None, "malformed"),
        ({"subject": "s", "op": "submit", "revision": 0, "body": {}}, None, "malformed"),
        ({"subject": "s", "op": "submit", "revision": 1, "body": [1]}, None, "malformed"),
        ("not json", None, "malformed"),
        ('{"subject":"s","op":"submit","revision":1,"body":{"x":NaN}}', None, "malformed"),
        ("[1, 2]", None, "malformed"),
        ({"subject": 7, "op": "submit", "revision": 1, "body": {}}, None, "malformed"),
        ({"subject": "", "op": "submit", "revision": 1, "body": {}}, None, "malformed"),
    ],
)
def test_quarantine_reasons(
    value: dict[str, Any] | str, current: SubjectState | None, reason: str
) -> None:
    d = one(value, current)
    assert isinstance(d, Quarantined)
    assert d.entry.reason == reason
    parsed = parse_amendment(rec(value).value)
    if parsed.subject is None:
        assert d.subject is None
    else:
        assert d.subject is not None and d.subject.blocked
        # quarantine never changes revision or status, it only blocks
        if current is not None:
            assert (d.subject.revision, d.subject.status) == (current.revision, current.status)


def test_invalid_utf8_is_malformed_without_subject() -> None:
    parsed = parse_amendment(b"\xff\xfe")
    assert isinstance(parsed, Malformed) and parsed.subject is None


def test_applied_entries_carry_seq_version_and_intent() -> None:
    d = decide(
        rec(amendment("s", "correct", 3, q=1), offset=9),
        parse_amendment(rec(amendment("s", "correct", 3, q=1)).value),
        LIVE2,
        next_seq=5,
    )
    assert isinstance(d, Applied)
    assert (d.entry.seq, d.entry.version, d.entry.offset) == (5, 3, 9)
    assert d.intent is not None and (d.intent.version, d.intent.body) == (3, '{"q":1}')
    assert d.subject == SubjectState("s", 3, "live", False, '{"q":1}')


def test_withdraw_commits_no_intent() -> None:
    d = one(amendment("s", "withdraw", 3), LIVE2)
    assert isinstance(d, Applied) and d.intent is None and d.subject.status == "withdrawn"


def test_body_is_canonical_json() -> None:
    d = one('{"subject":"s","op":"submit","revision":1,"body":{"b":2, "a":1}}')
    assert isinstance(d, Applied) and d.entry.body == '{"a":1,"b":2}'


def test_invisible_record_cannot_be_decided() -> None:
    r = rec(amendment("s", "submit", 1), visible=False)
    with pytest.raises(InvalidInput):
        decide(r, parse_amendment(r.value), None, 1)


def test_subject_state_must_match_record() -> None:
    r = rec(amendment("s", "submit", 1))
    with pytest.raises(InvalidInput):
        decide(r, parse_amendment(r.value), SubjectState("t", 0, "absent", False), 1)


def test_negative_offset_rejected() -> None:
    with pytest.raises(InvalidInput):
        SourceRecord(0, -1, True, None, b"")
