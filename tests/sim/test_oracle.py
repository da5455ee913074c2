"""The independent oracle: hand-derived fixtures, isolation from production code, and a
planted bug for every history property of the monitor."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from remora.oracle import Monitor, Observed, Oracle, RawRecord
from remora.sim.checker import raw_records
from tests.common.support import FIXTURES, fixture_records, load_fixture

ORACLE_DIR = Path(__file__).resolve().parents[2] / "remora" / "oracle"
FORBIDDEN = ("remora.worker", "remora.domain", "remora.store")


def test_oracle_source_imports_nothing_forbidden() -> None:
    for path in ORACLE_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"
                assert not name.startswith(("remora.sim", "remora.cli", "remora.testing"))


def test_importing_oracle_loads_no_production_package() -> None:
    code = (
        f"import sys, remora.oracle; print([m for m in sys.modules if m.startswith({FORBIDDEN!r})])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def raw(doc: dict[str, object]) -> list[RawRecord]:
    return raw_records(fixture_records(doc))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["correction", "withdrawal"])
def test_oracle_matches_hand_derived_fixture(name: str) -> None:
    doc = load_fixture(FIXTURES / "fold" / f"{name}.json")
    oracle = Oracle(raw(doc))
    p = int(doc["partition"])  # type: ignore[call-overload]
    exp = doc["expected"]
    got = oracle.expected(p, oracle.end_frontier(p))
    assert oracle.end_frontier(p) == exp["frontier"]  # type: ignore[index]
    assert [(e.seq, e.subject, e.version, e.op, e.body, e.offset) for e in got.outbox] == [
        (e["seq"], e["subject"], e["version"], e["op"], e["body"], e["offset"])
        for e in exp["outbox"]  # type: ignore[index]
    ]
    assert [(q.offset, q.subject, q.reason) for q in got.quarantine] == [
        (q["offset"], q["subject"], q["reason"])
        for q in exp["quarantine"]  # type: ignore[index]
    ]
    assert [(i.subject, i.version, i.body) for i in got.intents] == [
        (i["subject"], i["version"], i["body"])
        for i in exp["intents"]  # type: ignore[index]
    ]
    assert oracle.predicted_status() == "BLOCKED"


def rec(p: int, o: int, value: object, visible: bool = True) -> RawRecord:
    return RawRecord(p, o, visible, None, json.dumps(value).encode())


def am(subject: str, op: str, rev: int, **body: object) -> dict[str, object]:
    return {"subject": subject, "op": op, "revision": rev, "body": body}


SOURCE = [
    rec(0, 0, am("a", "submit", 1, x=1)),
    rec(0, 2, am("a", "correct", 2, x=2), visible=False),
    rec(0, 3, am("a", "correct", 2, x=3)),
    rec(0, 4, am("b", "withdraw", 1)),
]


def test_prefixes_views_and_statuses() -> None:
    oracle = Oracle(SOURCE, partitions=[0, 1])
    assert oracle.partitions == (0, 1)
    assert [oracle.is_valid_frontier(0, f) for f in range(6)] == [
        True,
        True,
        False,
        False,
        True,
        True,
    ]
    assert oracle.processed_count(0, 4) == 2 and oracle.visible_count(0) == 3
    assert len(oracle.expected(0, 1).outbox) == 1 and oracle.expected(0, 1).quarantine == ()
    assert [tuple(v) for v in oracle.view({0: 1})] == [(0, "a", 1, "live", {"x": 1})]
    assert [tuple(v) for v in oracle.view()] == [(0, "a", 2, "live", {"x": 3})]
    assert oracle.predicted_status() == "PASS_WITH_EXCLUSIONS"
    assert oracle.end_frontier(1) == 0 and oracle.expected(7, 0).outbox == ()
    assert Oracle([rec(0, 0, am("a", "submit", 1))]).predicted_status() == "PASS"


def good(frontier: int = 5, epoch: int = 1) -> Observed:
    return Observed(
        0,
        epoch,
        frontier,
        [(1, "a", 1, "submit", '{"x":1}', 0), (2, "a", 2, "correct", '{"x":3}', 3)],
        [(4, "b", "rejected")],
        [("a", 1, '{"x":1}'), ("a", 2, '{"x":3}')],
    )


def kinds(monitor: Monitor, obs: Observed) -> list[str]:
    return [v.kind for v in monitor.check(obs)]


def test_correct_observation_passes() -> None:
    m = Monitor(Oracle(SOURCE))
    assert kinds(m, good(0, 0)._replace(outbox=[], quarantine=[], intents=[])) == []
    assert kinds(m, good()) == []
    assert kinds(m, good()) == []


@pytest.mark.parametrize(
    ("planted", "kind"),
    [
        (good()._replace(frontier=2), "frontier-invalid"),
        (
            good()._replace(
                outbox=[(1, "a", 1, "submit", '{"x":1}', 0), (1, "a", 2, "correct", '{"x":3}', 3)]
            ),
            "outbox-seq",
        ),
        (
            good()._replace(
                outbox=[(1, "a", 1, "submit", '{"x":1}', 0), (2, "a", 3, "correct", '{"x":3}', 3)]
            ),
            "outbox-version",
        ),
        (good()._replace(quarantine=[]), "progress-disagreement"),
        (
            good()._replace(quarantine=[(4, "b", "rejected"), (4, "b", "rejected")]),
            "progress-disagreement",
        ),
        (
            good()._replace(
                outbox=[(1, "a", 1, "submit", '{"x":1}', 0), (2, "a", 2, "correct", '{"x":2}', 3)]
            ),
            "outbox-mismatch",
        ),
        (good()._replace(quarantine=[(4, "b", "conflict")]), "quarantine-mismatch"),
        (good()._replace(intents=[("a", 1, '{"x":1}')]), "intent-mismatch"),
    ],
)
def test_planted_state_bug_is_caught(planted: Observed, kind: str) -> None:
    assert kind in kinds(Monitor(Oracle(SOURCE)), planted)


def test_history_bugs_are_caught() -> None:
    m = Monitor(Oracle(SOURCE))
    assert kinds(m, good(epoch=3)) == []
    assert "epoch-regressed" in kinds(m, good(epoch=2))
    early = good(1)._replace(outbox=good().outbox[:1], quarantine=[], intents=good().intents[:1])
    assert "frontier-regressed" in kinds(m, early)
    m = Monitor(Oracle(SOURCE))
    assert kinds(m, good()) == []
    mutated = good()._replace(intents=[("a", 1, '{"x":9}'), ("a", 2, '{"x":3}')])
    assert "intent-mutated" in kinds(m, mutated)
    assert "intent-mutated" in kinds(m, good()._replace(intents=[("a", 2, '{"x":3}')]))


def test_non_json_body_is_a_mismatch_not_a_crash() -> None:
    obs = good()._replace(outbox=[(1, "a", 1, "submit", "{", 0), good().outbox[1]])
    assert "outbox-mismatch" in kinds(Monitor(Oracle(SOURCE)), obs)


@pytest.mark.parametrize(
    "value",
    [
        b"\xff",
        b"NaN",
        b"[1]",
        b'{"subject": 1}',
        b'{"subject": ""}',
        b'{"subject": "s", "op": "submit", "revision": 1, "body": {}, "x": 0}',
        b'{"subject": "s", "op": 5, "revision": 1, "body": {}}',
        b'{"subject": "s", "op": "submit", "revision": true, "body": {}}',
        b'{"subject": "s", "op": "submit", "revision": 1, "body": []}',
    ],
)
def test_oracle_malformed_values(value: bytes) -> None:
    oracle = Oracle([RawRecord(0, 0, True, None, value)])
    assert [q.reason for q in oracle.expected(0, 1).quarantine] == ["malformed"]
