"""The ``worker-parallel-v1`` document: lossless round trip, strict parsing (one line naming
the JSON path), and ``remora sim-worker --replay`` of it (exit codes 0 / 1 / 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from remora.errors import InvalidInput
from remora.faults import At, Operation, Outcome
from remora.sim.parallel import (
    Found,
    ParallelExample,
    StoreCommand,
    TargetConfig,
    example_for,
    loads,
)
from remora.sim.schedule import PCT
from remora.sim.trace import FaultSelector, Interleave, Step
from tests.common.planted import SOURCE

REPO = Path(__file__).resolve().parents[2]


def store_example() -> ParallelExample:
    c = StoreCommand
    return attrs.evolve(
        example_for(
            TargetConfig("store", "memory", 1),
            SOURCE,
            [c(Operation.CLAIM, 0)],
            [
                [c(Operation.PROCESS, 0), c(Operation.OBSERVE, 0, Outcome.ABORT)],
                [c(Operation.CLAIM, 0, Outcome.UNKNOWN_COMMITTED)],
            ],
            PCT((1, 0), (3,)),
        ),
        decisions=(0, 1, 1, 0),
        found=Found("ERROR not-linearizable", "detail", 3, 5),
    )


def lifecycle_example() -> ParallelExample:
    fault = FaultSelector(Operation.CLAIM, 1, Outcome.UNKNOWN_ABORTED)
    return example_for(
        TargetConfig("lifecycle", "sqlite", 1, 3, lifecycle="remora.worker:Lifecycle"),
        SOURCE,
        [Step("assign", 0, 0, (fault,))],
        [[Step("process", 0, 0), Step("stop", 1)], [Step("revoke", 2)]],
        PCT((0, 1)),
    )


@pytest.mark.parametrize("example", [store_example(), lifecycle_example()])
def test_round_trip_is_lossless(example: ParallelExample) -> None:
    assert loads(example.dumps()) == example
    assert loads(example.dumps()).dumps() == example.dumps()


def broken(example: ParallelExample, edit: Any) -> str:
    doc = json.loads(example.dumps())
    edit(doc)
    return json.dumps(doc)


REJECTED = [
    ("unknown field", store_example, lambda d: d.update(extra=1), "example.extra: unknown field"),
    ("implementation", store_example, lambda d: d.update(implementation="x"), "implementation"),
    (
        "read with a lost reply",
        store_example,
        lambda d: d["branches"][0][1].update(outcome="unknown-committed"),
        "example.branches[0][1].outcome",
    ),
    (
        "a store session validating",
        store_example,
        lambda d: d["prefix"][0].update(operation="validate"),
        "example.prefix[0].operation",
    ),
    (
        "partition out of range",
        store_example,
        lambda d: d["prefix"][0].update(partition=1),
        "example.prefix[0].partition",
    ),
    (
        "priorities not an order",
        store_example,
        lambda d: d["schedule"]["policy"].update(priorities=[0, 0]),
        "example.schedule.policy.priorities",
    ),
    (
        "a decision for a thread that is not there",
        store_example,
        lambda d: d["schedule"]["decisions"].append(2),
        "example.schedule.decisions[4]",
    ),
    ("no branches", store_example, lambda d: d.update(branches=[]), "example.branches"),
    (
        "lifetime out of range",
        lifecycle_example,
        lambda d: d["branches"][0][0].update(worker=3),
        "example.branches[0][0].worker",
    ),
    (
        "a start step",
        lifecycle_example,
        lambda d: d["branches"][1].append({"actor": "start", "worker": 0}),
        "example.branches[1][1].actor",
    ),
    (
        "an interleave",
        lifecycle_example,
        lambda d: d["prefix"][0]["faults"][0].update(interleave={"at": "after", "stop": True}),
        "example.prefix[0].faults",
    ),
    (
        "lifetimes on a store target",
        store_example,
        lambda d: d["target"].update(lifetimes=2),
        "example.target.lifetimes",
    ),
]


@pytest.mark.parametrize(("why", "make", "edit", "where"), REJECTED, ids=[r[0] for r in REJECTED])
def test_bad_documents_are_one_line_naming_the_path(
    why: str, make: Any, edit: Any, where: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        loads(broken(make(), edit))
    assert where in str(caught.value) and "\n" not in str(caught.value)


def test_an_interleave_selector_is_refused_even_when_valid_in_a_trace() -> None:
    il = FaultSelector(Operation.CLAIM, 1, Outcome.COMMIT, 0, Interleave(At.AFTER, True))
    example = attrs.evolve(lifecycle_example(), prefix=(Step("assign", 0, 0, (il,)),))
    with pytest.raises(InvalidInput, match="interleave"):
        loads(example.dumps())


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remora", "sim-worker", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_replaying_a_passing_example_exits_0_with_a_report(tmp_path: Path) -> None:
    path = tmp_path / "example.json"
    path.write_text(store_example().dumps(), encoding="utf-8")
    done = cli("--replay", str(path), "--runs", "2", "--report", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "PASS" and report["runs"] == 2 and report["reproduced"] == 0
    assert report["recorded"]["failure"] == "ERROR not-linearizable"
    assert json.loads((tmp_path / "r.json").read_text()) == report


def test_bad_replays_exit_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "example.json"
    path.write_text(broken(store_example(), lambda d: d.update(version=2)), encoding="utf-8")
    done = cli("--replay", str(path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert str(path) in done.stderr and "version" in done.stderr
    good = tmp_path / "good.json"
    good.write_text(store_example().dumps(), encoding="utf-8")
    for args in (["--store", "sqlite"], ["--dsn", "postgresql://nowhere"], ["--mutation", "x"]):
        done = cli("--replay", str(good), *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr)
    postgres = attrs.evolve(store_example(), target=TargetConfig("store", "postgres", 1))
    good.write_text(postgres.dumps(), encoding="utf-8")
    done = cli("--replay", str(good))
    assert done.returncode == 2 and "--dsn is required" in done.stderr
    done = cli("--seed", "3", "--runs", "2")
    assert done.returncode == 2 and "--runs only applies" in done.stderr


def test_an_unimportable_backend_is_bad_input(tmp_path: Path) -> None:
    example = attrs.evolve(
        store_example(), target=TargetConfig("store", "memory", 1, backend="nowhere:Nothing")
    )
    path = tmp_path / "example.json"
    path.write_text(example.dumps(), encoding="utf-8")
    done = cli("--replay", str(path))
    assert done.returncode == 2 and "example.target.backend" in done.stderr
