"""Memory ⇔ SQLite ⇔ PostgreSQL conformance through the simulation scheduler.

Every corpus trace (seeds 1-8 in the valid and conflict classes, 64 steps) and every named scenario
(``tests/fixtures/scenarios``) is replayed by the same scheduler over the memory store, an
SQLite file and a fresh PostgreSQL database.  The fault outcomes apply at the same
boundary on all three (abort before the statement; unknown-committed = commit then report
unknown; unknown-aborted = run and roll back, then report unknown), so the reports must be
identical: status, final boundary, the boundary before the drain, every attempt and event
(observations, effects, installed epoch/frontier), violations, counts and diagnostics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remora.sim.generate import generate
from remora.sim.report import run_trace
from remora.sim.stores import store_factory
from remora.sim.trace import Trace, loads
from remora.store import StateStore
from remora.store.postgres import PostgresBackend
from tests.postgres.services import fresh_database, require_postgres

pytestmark = pytest.mark.services

SCENARIOS = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
COMPARED = (
    "status",
    "failure",
    "boundary",
    "before_drain",
    "attempts",
    "events",
    "violations",
    "counts",
    "diagnostics",
)


def report_of(trace: Trace, kind: str) -> dict[str, Any]:
    dsn = require_postgres() if kind == "postgres" else None
    with store_factory(kind, dsn) as factory:
        document = run_trace(trace, store_factory=factory).document
    return {key: json.loads(json.dumps(document.get(key), sort_keys=True)) for key in COMPARED}


def traces() -> list[Any]:
    out = [
        pytest.param(generate(seed, cls, 64), id=f"corpus-{cls}-{seed}")
        for cls in ("valid", "conflict")
        for seed in range(1, 9)
    ]
    out += [
        pytest.param(loads(path.read_text()), id=path.name.removesuffix(".trace.json"))
        for path in sorted(SCENARIOS.glob("*.trace.json"))
    ]
    return out


@pytest.mark.parametrize("trace", traces())
def test_same_report_on_memory_sqlite_and_postgres(trace: Trace) -> None:
    memory = report_of(trace, "memory")
    for kind in ("sqlite", "postgres"):
        other = report_of(trace, kind)
        differing = [k for k in COMPARED if other[k] != memory[k]]
        assert differing == [], f"{kind} differs from memory in {differing}"


class IgnoresRollback(PostgresBackend):
    """Planted bug: an ``unknown-aborted`` write is committed instead of rolled back."""

    def _write(self, ctx: Any, commit: bool, what: str, body: Any) -> Any:
        return super()._write(ctx, True, what, body)


def test_planted_boundary_bug_is_caught() -> None:
    """The comparison notices a backend that applies a fault outcome at the wrong
    boundary."""
    for seed in range(1, 9):
        trace = generate(seed, "valid", 64)
        memory = report_of(trace, "memory")
        with fresh_database() as dsn:
            document = run_trace(
                trace, store_factory=lambda _config: StateStore(IgnoresRollback(dsn))
            ).document
        planted = {k: json.loads(json.dumps(document.get(k), sort_keys=True)) for k in COMPARED}
        if planted != memory:
            return
    raise AssertionError("committing unknown-aborted writes went unnoticed by the comparison")


def test_cli_replays_on_every_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from remora.cli import main

    path = SCENARIOS / "epoch-order-replacement-after-commit.trace.json"
    outputs = {}
    for args in (
        [],
        ["--store", "sqlite"],
        ["--store", "postgres", "--dsn", require_postgres()],
    ):
        assert main(["sim-worker", "--replay", str(path), *args]) == 0
        outputs[tuple(args[:2])] = capsys.readouterr().out
    assert len(set(outputs.values())) == 1  # byte-identical reports


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "postgres"], "--dsn is required"),
        (["--dsn", "postgresql://x@127.0.0.1/x"], "--dsn is required"),
        (["--store", "postgres", "--dsn", "host=127.0.0.1 port=1 connect_timeout=1"], "scratch"),
    ],
)
def test_cli_store_errors_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from remora.cli import main

    code = main(["sim-worker", "--seed", "1", *args])
    err = capsys.readouterr().err
    assert code in (1, 2) and message in err and err.count("\n") == 1
