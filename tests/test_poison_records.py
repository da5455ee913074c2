"""Issue 11, item 1: hostile source lines are refused at load (``file:line: reason``), and a
value that parses but that no store could hold is quarantined as ``malformed`` — the same on
memory, SQLite and PostgreSQL — instead of failing its write on every attempt."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import attrs
import pytest

from remora.domain import Applied, Decision, Processing, SourceRecord, SubjectState, parse_amendment
from remora.domain.fold import decide
from remora.domain.processing import amendment_key
from remora.errors import InvalidInput
from remora.sim.stores import BackendFactory
from remora.source import MemorySourceLog, load_source_dir, parse_source_line
from remora.store import MemoryStore, SqliteStore, StateStore
from remora.worker.group import WorkerGroup

OK = {"subject": "s", "op": "submit", "revision": 1, "body": {}}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"offset": 0, "offset": 1, "value": 1}', "duplicate key 'offset'"),
        ('{"offset": 0, "value": {"a": 1, "a": 2}}', "duplicate key 'a'"),
        ('{"offset": true, "value": 1}', "offset must be an integer"),
        ('{"offset": 0, "value": 1, "partition": false}', "partition False"),
        ('{"offset": 0, "value": NaN}', "NaN is not valid JSON"),
        ('{"offset": 0, "value": -Infinity}', "-Infinity is not valid JSON"),
        ('{"offset": 0, "value": 1e400}', "out of range"),
        ('{"offset": 9223372036854775807, "value": 1}', "offset must be an integer in 0.."),
        ('{"offset": 99999999999999999999999, "value": 1}', "offset must be an integer"),
        ('{"offset": ' + "1" * 5000 + ', "value": 1}', "an integer of 5000 digits"),
        ('{"offset": 0, "value": "\\ud800"}', "lone surrogate"),
        ('{"offset": 0, "key": "\\udfff", "value": 1}', "lone surrogate"),
        ('{"offset": 0, "value": {"subject": "\\ud800x"}}', "lone surrogate"),
        ('{"offset": 0, "value": {"\\ud800": 1}}', "lone surrogate in the key"),
        ('{"offset": 0, "value_base64": "\\u00e9"}', "value_base64 is not valid base64"),
        ('{"offset": 0, "value": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than"),
        ('{"offset": 0, "value": ' + "[" * 101 + "]" * 101 + "}", "nested more than 100"),
        ('{"offset": 0, "value": 1} {}', "trailing content"),
    ],
)
def test_hostile_lines_are_refused_at_load(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "partition-3.jsonl").write_text('{"offset": 0, "value": 1}\n' + line + "\n")
    with pytest.raises(InvalidInput) as exc:
        load_source_dir(tmp_path)
    text = str(exc.value)
    assert text.startswith(f"{tmp_path / 'partition-3.jsonl'}:2: ") and message in text
    assert "\n" not in text and len(text) < 400
    text.encode("utf-8")  # printable: the surrogate is quoted as an escape


def test_the_nesting_bound_leaves_room_for_real_values() -> None:
    deep = "[" * 99 + "]" * 99
    record = parse_source_line(0, '{"offset": 0, "value": ' + deep + "}", "f:1")
    assert record.value == deep.encode()
    big = 2**63 - 2  # the largest offset: its frontier still fits a 64-bit column
    assert parse_source_line(0, f'{{"offset": {big}, "value": 1}}', "f:1").offset == big


# -- values that parse but no store can hold --------------------------------------------


def amendment(**fields: object) -> bytes:
    return json.dumps({**OK, **fields}).encode()  # ASCII escapes: \\ud800 and \\u0000 survive


POISON = [
    # (value, subject the quarantine names, why)
    (amendment(subject="a\x00b"), None, "subject holds text no store can hold"),
    (amendment(subject="\ud800"), None, "subject holds text no store can hold"),
    (amendment(subject="t", body={"x": "\ud800"}), "t", "value holds text no store can hold"),
    (amendment(subject="u", body={"x\x00": 1}), "u", "value holds text no store can hold"),
    (amendment(subject="v", op="sub\x00mit"), "v", "value holds text no store can hold"),
    (b"[" * 100_000 + b"]" * 100_000, None, "value is not JSON: RecursionError"),
]


@pytest.mark.parametrize(("value", "subject", "why"), POISON)
def test_the_fold_quarantines_unstorable_values_as_malformed(
    value: bytes, subject: str | None, why: str
) -> None:
    parsed = parse_amendment(value)
    assert parsed.subject == subject and why in getattr(parsed, "detail", "")


def poisoned_source() -> MemorySourceLog:
    """Partition 0 carries every poison value between healthy records; partition 1 is
    healthy.  Before the fix, SQLite and PostgreSQL failed the write of the first poison
    record forever (memory stored it), so neither partition ever completed."""
    records = [SourceRecord(0, 0, True, None, amendment(subject="ok0"))]
    for i, (value, _, _) in enumerate(POISON, start=1):
        records.append(SourceRecord(0, i, True, None, value))
    records.append(SourceRecord(0, len(POISON) + 1, True, None, amendment(subject="ok1")))
    records += [SourceRecord(1, i, True, None, amendment(subject=f"p1-{i}")) for i in range(5)]
    return MemorySourceLog(records, [0, 1])


def outcome(store: StateStore) -> tuple[object, ...]:
    snap = store.snapshot()
    return (
        [(r.partition, r.frontier) for r in snap.partitions],
        [(e.partition, e.subject, e.offset) for e in snap.outbox],
        [(q.partition, q.offset, q.subject, q.reason, q.detail) for q in snap.quarantine],
    )


def test_poison_values_are_quarantined_the_same_on_every_store(
    remora_store_factory: BackendFactory,
) -> None:
    log = poisoned_source()
    store = StateStore(remora_store_factory())
    stats = WorkerGroup(store, log, 2, rebalance_every=3).run()
    assert stats.errors == [] and stats.done
    partitions, outbox, quarantine = outcome(store)
    assert partitions == [(0, len(POISON) + 2), (1, 5)]
    assert outbox == [(0, "ok0", 0), (0, "ok1", len(POISON) + 1)] + [
        (1, f"p1-{i}", i) for i in range(5)
    ]
    assert quarantine == [
        (0, i, subject, "malformed", parse_amendment(value).detail)  # type: ignore[union-attr]
        for i, (value, subject, _) in enumerate(POISON, start=1)
    ]


def test_a_custom_processing_cannot_write_what_no_store_holds(tmp_path: Path) -> None:
    """The same rule guards any processing: its unstorable decision becomes a malformed
    quarantine (planted here: a processing that copies the record's key into the body)."""

    def leaky(record: SourceRecord, current: SubjectState | None, next_seq: int) -> Decision:
        d = decide(record, parse_amendment(record.value), current, next_seq)
        if isinstance(d, Applied):
            return attrs.evolve(d, entry=attrs.evolve(d.entry, body=record.key or ""))
        return d

    processing = Processing(amendment_key, leaky)
    log = MemorySourceLog(
        [
            SourceRecord(0, 0, True, "fine", amendment(subject="a")),
            SourceRecord(0, 1, True, "nul\x00", amendment(subject="b")),
        ]
    )
    for store in (
        MemoryStore(processing=processing),
        SqliteStore(tmp_path / "db", processing=processing),
    ):
        assert WorkerGroup(store, log, 1).run().errors == []
        _, outbox, quarantine = outcome(store)
        assert outbox == [(0, "a", 0)]
        assert quarantine == [
            (
                0,
                1,
                None,
                "malformed",
                "the decision's body holds text no store can hold (a lone surrogate or NUL)",
            )
        ]
        store.close()


def test_value_base64_poison_reaches_the_fold_not_the_loader(tmp_path: Path) -> None:
    raw = amendment(subject="a\x00b")
    line = {"offset": 0, "value_base64": base64.b64encode(raw).decode()}
    (tmp_path / "partition-0.jsonl").write_text(json.dumps(line) + "\n")
    assert load_source_dir(tmp_path).records(0)[0].value == raw


# -- the same in simulation -------------------------------------------------------------


def poisoned_trace(tmp_path: Path) -> Path:
    from remora.sim.generate import generate

    doc = json.loads(generate(17, "valid").dumps())
    first = json.loads(base64.b64decode(doc["source"][0]["value"]))
    doc["source"][0]["value"] = base64.b64encode(
        json.dumps({**first, "subject": "a\x00b"}).encode()
    ).decode()
    path = tmp_path / "poisoned.json"
    path.write_text(json.dumps(doc))
    return path


def replay_everywhere(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    from remora.cli import main

    stores = ["memory", "sqlite"]
    try:
        from tests.postgres.services import require_postgres

        dsn = require_postgres()
        stores.append("postgres")
    except pytest.skip.Exception:
        dsn = ""
    reports = {}
    for store in stores:
        extra = ["--dsn", dsn] if store == "postgres" else []
        main(["sim-worker", "--replay", str(path), "--store", store, *extra])
        reports[store] = capsys.readouterr().out
    return reports


def test_a_poisoned_trace_replays_the_same_on_every_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: PASS_WITH_EXCLUSIONS on memory and SQLite, ``ERROR drain-no-progress`` on
    PostgreSQL (the NUL write failed on every attempt)."""
    reports = replay_everywhere(poisoned_trace(tmp_path), capsys)
    assert len(set(reports.values())) == 1, reports


def test_a_poisoned_trace_is_not_a_false_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = replay_everywhere(poisoned_trace(tmp_path), capsys)
    assert all(json.loads(r)["status"] != "ERROR" for r in reports.values()), reports


def test_the_oracle_catches_a_fold_that_stores_unstorable_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted bug: the fold forgets the storable-text rule (the memory store can hold a
    NUL, so the run itself does not fail) — the oracle's own statement of the rule must
    report the applied value as a mismatch."""
    from remora.cli import main
    from remora.domain import amendment, processing

    monkeypatch.setattr(amendment, "storable_text", lambda text: True)
    monkeypatch.setattr(processing, "storable_text", lambda text: True)
    monkeypatch.setattr(amendment, "_may_hold_unstorable", lambda text: False)
    processing._parsed.cache_clear()  # values parsed by earlier tests, with the rule
    main(["sim-worker", "--replay", str(poisoned_trace(tmp_path)), "--store", "memory"])
    processing._parsed.cache_clear()  # nothing parsed with the planted bug stays behind
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "ERROR", report["status"]
    assert "mismatch" in report["failure"], report["failure"]
