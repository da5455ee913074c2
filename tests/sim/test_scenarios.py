"""Named scenarios: hand-written traces replayed with their expected status, attempt results,
event sequence, waits and final boundary (tests/fixtures/scenarios/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remora.cli import main
from remora.domain import canonical_json
from remora.sim.report import build_report, replay
from remora.sim.trace import loads
from tests.common.support import FIXTURES, load_fixture

SCENARIOS = FIXTURES / "scenarios"
NAMES = sorted(p.name.removesuffix(".trace.json") for p in SCENARIOS.glob("*.trace.json"))


def event_line(e: dict[str, Any]) -> str:
    applied = str(e["effect_applied"]).lower()
    return (
        f"{'R' if e['replacement'] else ''}w{e['lifetime']} {e['operation']}#{e['call']} "
        f"{e['outcome']} applied={applied} {e['observation']} e{e['epoch']}/f{e['frontier']}"
    )


def result_line(a: dict[str, Any]) -> str:
    where = f" p{a['partition']}" if a["partition"] is not None else ""
    return f"{a['actor']} w{a['worker']}{where}: {a['result']}"


def test_every_issue_scenario_is_present() -> None:
    required = {
        "unknown-committed-process",
        "unknown-aborted-process",
        "epoch-order-replacement-after-commit",
        "epoch-order-replacement-before-commit",
        "canceled-assign-callback",
        "canceled-seek-callback",
        "unresolved-read",
        "retry-exhaustion",
        "offset-gaps-across-restart",
        "incomplete-then-blocked",
        "atomic-quarantine",
        "fold-correction",
        "fold-withdrawal",
    }
    assert required <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_scenario_replays_to_expected(name: str) -> None:
    trace = loads((SCENARIOS / f"{name}.trace.json").read_text())
    expected = json.loads((SCENARIOS / f"{name}.expected.json").read_text())
    sim = replay(trace)
    doc = build_report(sim, trace).document
    assert doc["violations"] == []
    assert (doc["status"], doc["failure"]) == (expected["status"], expected["failure"])
    attempts = [a for a in doc["attempts"] if not a["fair_recovery"]]
    assert [result_line(a) for a in attempts] == expected["results"]
    fair = {a["index"] for a in doc["attempts"] if a["fair_recovery"]}
    events = [event_line(e) for e in doc["events"] if e["attempt"] not in fair]
    assert events == expected["events"]
    assert [a["waits_ms"] for a in attempts] == expected["waits_ms"]
    boundary = [
        {k: b[k] for k in ("partition", "frontier", "outbox", "quarantine", "complete")}
        for b in doc["boundary"]
    ]
    assert boundary == expected["boundary"]
    if name.startswith("fold-"):
        fixture = load_fixture(FIXTURES / "fold" / f"{name.removeprefix('fold-')}.json")
        snap = sim.store.snapshot()
        assert [(e.seq, e.subject, e.version, e.op, e.body, e.offset) for e in snap.outbox] == [
            (e["seq"], e["subject"], e["version"], e["op"], canonical_json(e["body"]), e["offset"])
            for e in fixture["expected"]["outbox"]
        ]
        assert [(q.offset, q.subject, q.reason) for q in snap.quarantine] == [
            (q["offset"], q["subject"], q["reason"]) for q in fixture["expected"]["quarantine"]
        ]


@pytest.mark.parametrize("name", NAMES)
def test_scenario_replays_through_cli(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    expected = json.loads((SCENARIOS / f"{name}.expected.json").read_text())
    code = main(["sim-worker", "--replay", str(SCENARIOS / f"{name}.trace.json")])
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == expected["status"]
    assert code == (0 if expected["status"] == "PASS" else 1)
