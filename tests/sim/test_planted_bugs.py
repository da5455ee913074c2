"""Every simulation-level safety check, shown catching a planted bug (and quiet without it)."""

from __future__ import annotations

import attrs
import pytest

import remora.delivery.view
import remora.store.memory
from remora.delivery.view import ViewRow
from remora.domain import (
    AMENDMENTS,
    Applied,
    Decision,
    OutboxEntry,
    Processing,
    SourceRecord,
    SubjectState,
)
from remora.sim.report import run_trace
from remora.sim.scheduler import Simulation
from remora.sim.trace import Step, Trace
from remora.worker import Lifecycle
from tests.common import planted as bug
from tests.common.planted import OWN, sel, trace

CASES: list[tuple[str, Trace, type[Lifecycle]]] = [
    (
        "io-after-stop",
        trace(*OWN, Step("stop", 0), Step("assign", 0, 0)),
        bug.NeverRetires,
    ),
    (
        "ownership-retained",
        trace(*OWN, Step("process", 0, 0, (sel("process", "commit", at="before", replacement=1),))),
        bug.KeepsTokensOnRetire,
    ),
    (
        "ownership-unassigned",
        trace(*OWN, Step("revoke", 0)),
        bug.RevokeForgets,
    ),
    (
        "duplicate-owner",
        trace(
            Step("start", 0),
            Step("assign", 0, 0, (sel("claim", "unknown-committed", at="after", replacement=1),)),
        ),
        bug.AdoptsReadEpoch,
    ),
    (
        "local-frontier-mismatch",
        trace(*OWN, Step("process", 0, 0, (sel("process", "unknown-aborted"),))),
        bug.FrontierBeforeResolution,
    ),
    # the process postcondition sees it at the first process attempt (the drain's); with the
    # rules off the drain's own check still does: test_drain_check_without_the_rules
    ("postcondition-process", trace(*OWN), bug.ProcessesNothing),
    ("drain-failed", trace(*OWN), bug.NeverAssignsTwice),
    (
        "repeated-decision",
        trace(*OWN, Step("process", 0, 0, (sel("process", "unknown-committed"),))),
        bug.RetriesUnknownBlindly,
    ),
    (
        "io-after-stop",
        trace(*OWN, Step("process", 0, 0, (sel("process", "abort", at="after", stop=True),))),
        bug.SkipsCancelAfterWakeup,
    ),
    (
        "callback-after-stop",
        trace(*OWN, Step("stop", 0), Step("seek", 0, 0)),
        bug.SeekIgnoresStop,
    ),
    ("exception", trace(*OWN, Step("process", 0, 0)), bug.Crashes),
]


@pytest.mark.parametrize(("kind", "schedule", "broken"), CASES, ids=[c[0] for c in CASES])
def test_planted_lifecycle_bug_is_caught(
    kind: str, schedule: Trace, broken: type[Lifecycle]
) -> None:
    assert run_trace(schedule).status in ("PASS", "PASS_WITH_EXCLUSIONS")  # the real one
    bug.NeverAssignsTwice.assigned_once = False
    report = run_trace(schedule, lifecycle_factory=broken)
    assert report.status == "ERROR"
    assert report.failure == f"ERROR {kind}"


def test_drain_check_without_the_rules() -> None:
    schedule = trace(*OWN)
    sim = Simulation(
        schedule.config, schedule.source, lifecycle_factory=bug.ProcessesNothing, rules=False
    )
    for step in schedule.steps:
        sim.execute(step)
    sim.drain()
    assert [v.kind for v in sim.violations][:1] == ["drain-no-progress"]


STALE = trace(*OWN, Step("process", 0, 0, (sel("process", "commit", at="before", replacement=1),)))


def test_fence_bypass_is_a_stale_token_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_trace(STALE).status == "PASS"
    monkeypatch.setattr(remora.store.memory, "check_fence", lambda *args: None)
    report = run_trace(STALE)
    assert report.failure == "ERROR stale-token-commit"


def test_broken_store_write_is_an_oracle_mismatch() -> None:
    def wrong_body(record: SourceRecord, current: SubjectState | None, next_seq: int) -> Decision:
        d = AMENDMENTS.decide(record, current, next_seq)
        if isinstance(d, Applied) and d.entry.seq == 2:
            return attrs.evolve(d, entry=attrs.evolve(d.entry, body='{"v":99}'))
        return d

    broken = Processing(AMENDMENTS.key, wrong_body)  # the planted bug, through the hook
    report = run_trace(trace(*OWN, Step("process", 0, 0), Step("process", 0, 0)), processing=broken)
    assert report.failure == "ERROR outbox-mismatch"


def test_broken_materializer_is_a_view_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    real = remora.delivery.view.materialize

    def stale(entry: OutboxEntry) -> ViewRow:
        row = real(entry)
        return ViewRow(row.partition, row.subject, 1, row.status, row.body)

    monkeypatch.setattr(remora.delivery.view, "materialize", stale)
    report = run_trace(trace(*OWN))
    assert report.failure == "ERROR view-mismatch"


def test_violation_stops_the_run_and_skips_drain() -> None:
    schedule = trace(*OWN, Step("stop", 0), Step("assign", 0, 0), Step("assign", 0, 0))
    report = run_trace(schedule, lifecycle_factory=bug.NeverRetires)
    doc = report.document
    assert doc["steps"]["executed"] == 5  # stopped after the first violating attempt
    assert not any(a["fair_recovery"] for a in doc["attempts"])
    assert doc["violations"][0]["attempt"] == 4
