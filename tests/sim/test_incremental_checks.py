"""Incremental checking: a run's checks read what each partition appended, not its whole
history at every look — and still report exactly what whole looks report.

* the rows the checks read grow linearly with the source (on a quadratic checker they grow
  with its square — the reason a 20k-record replay took minutes);
* for every planted lifecycle bug and many generated schedules, following the store
  incrementally gives the very report (failure, violations, attempts) that whole looks give;
* what incremental looks cannot see — a row changed in place below the mark — is still
  found: by the monitor's periodic whole re-check, and at the latest by the whole look at
  the end of the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from remora.context import Context
from remora.domain import OutboxEntry, SourceRecord
from remora.oracle import Monitor, ObservedTail, Oracle, RawRecord
from remora.sim.checker import Checker
from remora.sim.generate import generate
from remora.sim.mutations import MUTATIONS
from remora.sim.report import run_trace
from remora.sim.trace import SimConfig, Trace
from remora.store import MemoryBackend, PartitionState, PartitionTail, StateStore, Token


def big_source(records: int, partitions: int) -> tuple[SourceRecord, ...]:
    """Valid amendments with a few conflicts (quarantined, blocking) and invisible records."""
    out = []
    for p in range(partitions):
        revision: dict[str, int] = {}
        for i in range(records // partitions):
            subject = f"p{p}-s{i % 7}"
            rev = revision.get(subject, 0) + 1
            visible = i % 11 != 5
            if i % 29 == 13:
                value = {"subject": subject, "op": "correct", "revision": rev + 3, "body": {}}
            else:
                op = "submit" if rev == 1 else "correct"
                value = {"subject": subject, "op": op, "revision": rev, "body": {"n": i}}
                if visible:
                    revision[subject] = rev
            out.append(SourceRecord(p, i, visible, subject, json.dumps(value).encode()))
    return tuple(out)


def scaled(records: int, partitions: int = 2, seed: int = 3) -> Trace:
    base = generate(seed, "conflict", 40, partitions)
    return attrs.evolve(base, source=big_source(records, partitions))


class CountingBackend(MemoryBackend):
    """Counts the rows observers read (whole states and tails)."""

    rows_read = 0

    def partition_state(self, partition: int) -> PartitionState:
        state = super().partition_state(partition)
        CountingBackend.rows_read += len(state.outbox) + len(state.quarantine) + len(state.intents)
        return state

    def partition_tail(self, partition: int, since: tuple[int, int, int]) -> PartitionTail:
        tail = super().partition_tail(partition, since)
        CountingBackend.rows_read += len(tail.outbox) + len(tail.quarantine) + len(tail.intents)
        return tail


def rows_read(trace: Trace) -> int:
    CountingBackend.rows_read = 0

    def factory(config: SimConfig) -> StateStore:
        return StateStore(CountingBackend())

    report = run_trace(trace, store_factory=factory)
    assert report.status in ("BLOCKED", "PASS_WITH_EXCLUSIONS")
    return CountingBackend.rows_read


def test_the_rows_checks_read_grow_linearly_with_the_source() -> None:
    """A checker that reads every partition whole at every look reads ~N^2/4 rows here
    (about 40,000 for 400 records); the incremental one a small multiple of N."""
    small, large = rows_read(scaled(200)), rows_read(scaled(400))
    assert large <= 12 * 400, large
    assert large <= 2.5 * small, (small, large)


def whole_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference: every look reads the whole state (no incremental path)."""
    monkeypatch.setattr(Checker, "follow_store", Checker.check_store)


CASES = [(m.name, seed, cls) for m in MUTATIONS for seed in (1, 2, 3, 5) for cls in ("valid",)] + [
    (None, seed, cls) for seed in range(1, 9) for cls in ("valid", "conflict")
]


@pytest.mark.parametrize(("name", "seed", "trace_class"), CASES)
def test_incremental_looks_report_what_whole_looks_report(
    name: str | None, seed: int, trace_class: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = next((m for m in MUTATIONS if m.name == name), None)
    trace = generate(seed, trace_class, 96)

    def run() -> dict[str, object]:
        if planted is None:
            return run_trace(trace).document
        with planted.applied() as lifecycle:
            return run_trace(trace, lifecycle_factory=lifecycle).document

    incremental = run()
    with monkeypatch.context() as m:
        whole_looks(m)
        whole = run()
    assert incremental == whole


# -- what incremental looks cannot see ---------------------------------------------------


class RewritesHistory(MemoryBackend):
    """Planted: after ``at`` writes, the body of outbox entry 1 is changed in place (the
    counts, the row, everything an incremental look reads stays as it was)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at
        self.writes = 0

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        result = super().process(partition, token, record, ctx, commit)
        if commit:
            self.writes += 1
            if self.writes == self.at:
                part = self._partitions[partition]
                first = part.outbox[0]
                part.outbox[0] = OutboxEntry(
                    first.partition,
                    first.seq,
                    first.subject,
                    first.version,
                    first.op,
                    '{"rewritten":true}',
                    first.offset,
                )
        return result


def run_rewriting(trace: Trace, at: int) -> tuple[dict[str, object], int]:
    """The report, and how many writes the store committed."""
    made: list[RewritesHistory] = []

    def factory(config: SimConfig) -> StateStore:
        made.append(RewritesHistory(at))
        return StateStore(made[-1])

    return run_trace(trace, store_factory=factory).document, made[0].writes


def test_a_row_changed_in_place_is_found_by_the_periodic_whole_look() -> None:
    trace = scaled(2000, partitions=1)
    doc, _ = run_rewriting(trace, at=300)
    assert doc["failure"] == "ERROR outbox-mismatch"
    attempts = doc["attempts"]
    assert isinstance(attempts, list)
    found = doc["violations"][0]["attempt"]  # type: ignore[index]
    assert found < len(attempts) - 1000, "found only at the end, not when the partition doubled"


def test_a_row_changed_in_place_at_the_end_is_found_by_the_final_whole_look() -> None:
    trace = scaled(60, partitions=1)
    clean, writes = run_rewriting(trace, at=0)
    assert clean["failure"] == "BLOCKED"
    doc, _ = run_rewriting(trace, at=writes)
    assert doc["failure"] == "ERROR outbox-mismatch"
    assert doc["violations"][0]["where"] == "drain"  # type: ignore[index]


# -- the monitor's own rules ---------------------------------------------------------------

SOURCE = [
    RawRecord(0, o, True, None, json.dumps(v).encode())
    for o, v in enumerate(
        [
            {"subject": "a", "op": "submit", "revision": 1, "body": {"x": 1}},
            {"subject": "a", "op": "correct", "revision": 2, "body": {"x": 2}},
            {"subject": "a", "op": "correct", "revision": 9, "body": {}},
        ]
    )
]
ROWS = [(1, "a", 1, "submit", '{"x":1}', 0), (2, "a", 2, "correct", '{"x":2}', 1)]
INTENTS = [("a", 1, '{"x":1}'), ("a", 2, '{"x":2}')]


def tail(frontier: int, since: tuple[int, int, int], **rows: object) -> ObservedTail:
    outbox = rows.get("outbox", ROWS[since[0] : frontier])
    quarantine = rows.get("quarantine", [])
    intents = rows.get("intents", INTENTS[since[2] : frontier])
    counts = rows.get("counts")
    if counts is None:
        counts = (
            since[0] + len(outbox),  # type: ignore[arg-type]
            since[1] + len(quarantine),  # type: ignore[arg-type]
            since[2] + len(intents),  # type: ignore[arg-type]
        )
    return ObservedTail(0, 1, frontier, since, outbox, quarantine, intents, counts)  # type: ignore[arg-type]


def no_whole_look() -> Callable[[], object]:
    def fail() -> object:
        raise AssertionError("a whole look was not needed")

    return fail


def test_a_tail_that_keeps_every_rule_needs_no_whole_look() -> None:
    from remora.oracle import Observed

    m = Monitor(Oracle(SOURCE))
    assert m.mark(0) is None
    assert m.check(Observed(0, 1, 1, ROWS[:1], [], INTENTS[:1])) == []
    assert m.mark(0) == (1, 0, 1)
    assert m.check_tail(tail(2, (1, 0, 1)), no_whole_look()) == []  # type: ignore[arg-type]
    assert m.mark(0) == (2, 0, 2)


@pytest.mark.parametrize(
    ("planted", "kind"),
    [
        (dict(outbox=[(2, "a", 2, "correct", '{"x":9}', 1)]), "outbox-mismatch"),
        (dict(outbox=[(3, "a", 2, "correct", '{"x":2}', 1)]), "outbox-seq"),
        (dict(outbox=[], intents=[]), "progress-disagreement"),
        (dict(intents=[("a", 2, '{"x":5}')]), "intent-mismatch"),
    ],
)
def test_a_tail_that_breaks_a_rule_is_judged_by_a_whole_look(
    planted: dict[str, object], kind: str
) -> None:
    from remora.oracle import Observed

    m = Monitor(Oracle(SOURCE))
    assert m.check(Observed(0, 1, 1, ROWS[:1], [], INTENTS[:1])) == []
    bad = tail(2, (1, 0, 1), **planted)
    whole = Observed(0, 1, 2, ROWS[:1] + list(bad.outbox), [], INTENTS[:1] + list(bad.intents))
    found = m.check_tail(bad, lambda: whole)
    assert kind in [v.kind for v in found]
    assert m.mark(0) is None  # the next look is whole again


def test_rows_that_disappeared_are_judged_by_a_whole_look() -> None:
    from remora.oracle import Observed

    m = Monitor(Oracle(SOURCE))
    assert m.check(Observed(0, 1, 2, ROWS, [], INTENTS)) == []
    shrunk = tail(2, (2, 0, 2), outbox=[], intents=[], counts=(1, 0, 1))
    found = m.check_tail(shrunk, lambda: Observed(0, 1, 2, ROWS[:1], [], INTENTS[:1]))
    assert {"progress-disagreement", "intent-mutated"} <= {v.kind for v in found}


def test_a_generic_tail_accounts_for_each_visible_offset_once() -> None:
    from remora.oracle import Observed

    m = Monitor(Oracle(SOURCE, model=None))
    assert m.check(Observed(0, 1, 1, ROWS[:1], [], [])) == []
    again = tail(2, (1, 0, 0), outbox=[(2, "a", 2, "correct", "{}", 0)], intents=[])
    whole = Observed(0, 1, 2, [*ROWS[:1], (2, "a", 2, "correct", "{}", 0)], [], [])
    assert [v.kind for v in m.check_tail(again, lambda: whole)] == ["progress-disagreement"]


# -- the parser's bound on the source --------------------------------------------------------


def test_the_parser_bounds_the_source_length(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import remora.sim.trace
    from remora.cli import main
    from remora.sim.trace import loads

    text = scaled(8, partitions=1).dumps()
    assert len(loads(text).source) == 8
    monkeypatch.setattr(remora.sim.trace, "MAX_SOURCE_RECORDS", 7)
    with pytest.raises(remora.sim.trace.TraceError, match="8 records exceed the limit of 7"):
        loads(text)
    path = tmp_path / "t.json"
    path.write_text(text)
    assert main(["sim-worker", "--replay", str(path)]) == 2
    assert "trace.source: 8 records exceed the limit of 7" in capsys.readouterr().err
