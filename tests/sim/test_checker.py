"""The checker: the one store→oracle translation, change detection on every store, the view
check of a finished run, and the status rules — each with the planted bug it must catch."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import attrs
import pytest

import remora.delivery.view
import remora.domain
import remora.sim.checker
import remora.store.memory
import remora.store.sqlite
from remora.clock import LogicalClock
from remora.context import Context
from remora.delivery import ViewRow
from remora.domain import Applied, Decision, Intent, OutboxEntry, QuarantineEntry, SourceRecord
from remora.oracle import Observed
from remora.sim.checker import Checker, failure, observed, raw_records, status
from remora.store import MemoryStore, PartitionRow, PartitionState, SqliteStore, StateStore, Token
from tests.common.support import amendment, records

SOURCE = records(
    0,
    amendment("a", "submit", 1, n=1),
    amendment("a", "correct", 2, n=2),
    "not json",
    amendment("b", "withdraw", 1),
)


def fill(store: StateStore, upto: int = len(SOURCE)) -> None:
    ctx = Context(LogicalClock())
    token = store.claim(0, ctx)
    for record in SOURCE[:upto]:
        token = store.process(0, token, record, ctx)


def test_the_translation_maps_every_field() -> None:
    state = PartitionState(
        PartitionRow(3, 2, 9, 2),
        (OutboxEntry(3, 1, "a", 1, "submit", '{"n":1}', 4),),
        (QuarantineEntry(3, 7, "b", "conflict", "revision 5 after 0"),),
        (Intent(3, "a", 1, '{"n":1}'),),
    )
    assert observed(state) == Observed(
        3,
        2,
        9,
        [(1, "a", 1, "submit", '{"n":1}', 4)],
        [(7, "b", "conflict")],
        [("a", 1, '{"n":1}')],
    )
    record = SourceRecord(3, 4, False, "k", b"v")
    assert [tuple(r) for r in raw_records([record])] == [(3, 4, False, "k", b"v")]


def test_a_correct_store_passes_every_check() -> None:
    store = MemoryStore()
    fill(store)
    checker = Checker(SOURCE, [0])
    assert checker.check_store(store.backend) == []
    assert checker.final_problems(store.snapshot()) == []


def test_a_wrong_translation_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the translation forgets the quarantine — a correct store then looks wrong
    (so the checks really read what the translation hands them)."""
    store = MemoryStore()
    fill(store)

    def forgets_quarantine(state: PartitionState) -> Observed:
        return observed(state)._replace(quarantine=[])

    monkeypatch.setattr(remora.sim.checker, "observed", forgets_quarantine)
    kinds = {v.kind for v in Checker(SOURCE, [0]).check_store(store.backend)}
    assert {"progress-disagreement", "quarantine-mismatch"} <= kinds


def tamper(db: Path) -> None:
    """Change an outbox body behind the store's back (no write the store could count)."""
    conn = sqlite3.connect(db)
    conn.execute("UPDATE remora_outbox SET body = '{\"n\":99}' WHERE seq = 2")
    conn.commit()
    conn.close()


def test_an_unchanged_partition_is_checked_once_on_every_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A violation is reported when the state changes, not again at every look — the same on
    a store that counts its writes (memory) and on one that does not (SQLite)."""
    real = remora.domain.decide

    def wrong_body(*args: Any) -> Decision:  # planted: the second outbox entry is wrong
        d = real(*args)
        if isinstance(d, Applied) and d.entry.seq == 2:
            return attrs.evolve(d, entry=attrs.evolve(d.entry, body='{"n":99}'))
        return d

    monkeypatch.setattr(remora.store.memory, "decide", wrong_body)
    monkeypatch.setattr(remora.store.sqlite, "decide", wrong_body)
    found: dict[str, list[list[str]]] = {}
    for kind, store in (("memory", MemoryStore()), ("sqlite", SqliteStore(tmp_path / "s.db"))):
        fill(store, upto=2)
        checker = Checker(SOURCE, [0])
        looks = [checker.check_store(store.backend)]
        looks.append(checker.check_store(store.backend))  # nothing changed
        store.process(0, Token(1, 2), SOURCE[2], Context(LogicalClock()))
        looks.append(checker.check_store(store.backend))  # changed, still wrong
        found[kind] = [[v.kind for v in look] for look in looks]
        store.close()
    expected = [["outbox-mismatch"], [], ["outbox-mismatch"]]
    assert found["memory"] == found["sqlite"] == expected


def test_a_change_nothing_counted_is_still_checked(tmp_path: Path) -> None:
    """Planted: a write behind the store's back.  SQLite does not count its writes, so the
    checker compares the state itself — and sees the change."""
    db = tmp_path / "state.sqlite3"
    store = SqliteStore(db)
    fill(store)
    checker = Checker(SOURCE, [0])
    assert checker.check_store(store.backend) == []
    tamper(db)
    assert [v.kind for v in checker.check_store(store.backend)] == ["outbox-mismatch"]
    assert checker.check_store(store.backend) == []  # reported once, while unchanged
    store.close()


def test_final_problems_name_incompleteness_and_a_wrong_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()
    fill(store, upto=2)
    problems = Checker(SOURCE, [0]).final_problems(store.snapshot())
    assert problems == [f"partition 0: frontier 2, source ends at {len(SOURCE)}"]
    fill_rest = MemoryStore()
    fill(fill_rest)
    real = remora.delivery.view.materialize

    def stale(entry: OutboxEntry) -> ViewRow:  # planted: the view keeps version 1
        row = real(entry)
        return ViewRow(row.partition, row.subject, 1, row.status, row.body)

    monkeypatch.setattr(remora.delivery.view, "materialize", stale)
    problems = Checker(SOURCE, [0]).final_problems(fill_rest.snapshot())
    assert [p.split(":")[0] for p in problems] == ["view-mismatch"]


def boundary(quarantine: dict[str, int], complete: bool) -> dict[str, object]:
    return {"quarantine": quarantine, "complete": complete}


@pytest.mark.parametrize(
    ("rows", "violated", "expected"),
    [
        ([boundary({}, True)], False, "PASS"),
        ([boundary({"conflict": 1}, True)], False, "PASS_WITH_EXCLUSIONS"),
        ([boundary({"conflict": 1}, True), boundary({}, False)], False, "INCOMPLETE"),
        ([boundary({"blocked": 1}, False)], False, "BLOCKED"),
        ([boundary({"blocked": 1}, False)], True, "ERROR"),
        ([], False, "PASS"),
    ],
)
def test_status_precedence(rows: list[dict[str, object]], violated: bool, expected: str) -> None:
    assert status(rows, violated) == expected  # type: ignore[arg-type]


def test_failure_strings() -> None:
    assert failure("PASS", None) is None
    assert failure("BLOCKED", None) == "BLOCKED"
    assert failure("ERROR", "outbox-mismatch") == "ERROR outbox-mismatch"
