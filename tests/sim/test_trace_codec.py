"""The worker-schedule-v1 codec: lossless round trip and strict rejection."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remora.domain import SourceRecord
from remora.faults import OUTCOMES_FOR, At
from remora.sim.generate import generate
from remora.sim.trace import (
    OPERATIONS_OF,
    FaultSelector,
    Interleave,
    SimConfig,
    Step,
    Toolchain,
    Trace,
    TraceError,
    config_digest,
    from_json,
    loads,
)


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    partitions = draw(st.integers(1, 4))
    records = []
    for p in range(partitions):
        offsets = sorted(draw(st.sets(st.integers(0, 10_000), max_size=5)))
        for o in offsets:
            records.append(
                SourceRecord(
                    p,
                    o,
                    draw(st.booleans()),
                    draw(st.none() | st.text(max_size=5)),
                    draw(st.binary(max_size=20)),
                )
            )
    next_id = [0]

    def fresh() -> int:
        next_id[0] += 1
        return next_id[0] - 1

    steps: list[Step] = []
    for _ in range(draw(st.integers(0, 12))):
        actor = draw(st.sampled_from(["start", "assign", "seek", "process", "revoke", "stop"]))
        if actor == "start":
            steps.append(Step("start", fresh()))
            continue
        worker = draw(st.integers(0, 6))
        if actor in ("revoke", "stop"):
            steps.append(Step(actor, worker))
            continue
        faults = []
        used = set()
        for op in draw(
            st.lists(st.sampled_from(sorted(OPERATIONS_OF[actor], key=str)), max_size=2)
        ):
            call = draw(st.integers(1, 4))
            if (op, call) in used:
                continue
            used.add((op, call))
            outcome = draw(st.sampled_from(sorted(OUTCOMES_FOR[op], key=str)))
            il = None
            if draw(st.booleans()):
                stop = draw(st.booleans())
                rid = fresh() if (not stop or draw(st.booleans())) else None
                il = Interleave(draw(st.sampled_from(list(At))), stop, rid)
            faults.append(FaultSelector(op, call, outcome, draw(st.integers(0, 99)), il))
        steps.append(Step(actor, worker, draw(st.integers(0, partitions - 1)), tuple(faults)))  # type: ignore[arg-type]
    config = SimConfig(
        partitions,
        draw(st.sampled_from(["valid", "conflict", "custom"])),
        len(steps) + draw(st.integers(0, 3)),
    )
    toolchain = Toolchain("3.11.7", "0.1.0", draw(st.none() | st.just("6.0")), None)
    seed = draw(st.none() | st.integers(0, 2**40))
    return Trace(toolchain, seed, config, tuple(records), tuple(steps), draw(st.booleans()))


@given(traces())
def test_round_trip_is_lossless(trace: Trace) -> None:
    text = trace.dumps()
    assert loads(text) == trace
    assert loads(text).dumps() == text


def test_generated_traces_round_trip() -> None:
    for seed in (1, 17):
        for cls in ("valid", "conflict"):
            trace = generate(seed, cls)
            assert loads(trace.dumps()) == trace


def base() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(generate(17, "valid", steps=8, partitions=1).dumps())
    doc["steps"] = [
        {"actor": "start", "worker": 0},
        {"actor": "assign", "worker": 0, "partition": 0},
        {
            "actor": "process",
            "worker": 0,
            "partition": 0,
            "faults": [
                {
                    "operation": "process",
                    "call": 1,
                    "outcome": "unknown-committed",
                    "interleave": {"at": "after", "replacement": 1},
                }
            ],
        },
    ]
    return doc


def mutate(path: str, value: Any, *, delete: bool = False) -> dict[str, Any]:
    doc = base()
    *parents, last = path.split(".")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key: Any = int(last) if isinstance(node, list) else last
    if delete:
        del node[key]
    else:
        node[key] = value
    return doc


def test_base_document_is_valid() -> None:
    from_json(base())


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        (mutate("extra", 1), "trace.extra: unknown field"),
        (mutate("steps.0.extra", 1), "trace.steps[0].extra: unknown field"),
        (mutate("steps.2.faults.0.interleave.when", 1), "interleave.when: unknown field"),
        (mutate("config.retry.jitter", 1), "trace.config.retry.jitter: unknown field"),
        (mutate("toolchain.os", "x"), "trace.toolchain.os: unknown field"),
        (mutate("source.0.extra", 1), "trace.source[0].extra: unknown field"),
        (mutate("version", 2), "trace.version: 2 is not supported"),
        (mutate("version", True), "trace.version"),
        (mutate("implementation", "worker-schedule-v2"), "trace.implementation"),
        (mutate("drain", None, delete=True), "trace.drain: required field is missing"),
        (mutate("config.steps", 99), "trace.config_digest: does not match"),
        (mutate("config_digest", "sha256:00"), "trace.config_digest: does not match"),
        (
            mutate("steps.2.faults.0.call", 0),
            "trace.steps[2].faults[0].call: 0 is not in 1..1000000",
        ),
        (mutate("steps.2.faults.0.outcome", "maybe"), "outcome: 'maybe' is not a valid outcome"),
        (mutate("steps.2.faults.0.operation", "claim"), "process steps never call claim"),
        (mutate("steps.2.faults.0.interleave.at", "during"), "interleave.at: 'during'"),
        (
            mutate("steps.2.faults.0.interleave.replacement", -1),
            "replacement: -1 is not in 0..9223372036854775807",
        ),
        (mutate("steps.2.faults.0.delay_ms", -5), "delay_ms: -5 is not in 0..3600000"),
        (mutate("steps.0.actor", "restart"), "trace.steps[0].actor: 'restart' is not one of"),
        (mutate("steps.1.partition", 7), "trace.steps[1].partition: 7 is not in 0..0"),
        (mutate("steps.1.partition", None, delete=True), "assign steps need a partition"),
        (mutate("steps.0.partition", 0), "start steps take no partition"),
        (mutate("steps.0.worker", "0"), "trace.steps[0].worker: expected an integer"),
        (mutate("source.0.value", "***"), "trace.source[0].value: is not valid base64"),
        (mutate("source.0.visible", 1), "trace.source[0].visible: expected true or false"),
        (mutate("seed", -1), "trace.seed: -1 is not in 0..9223372036854775807"),
        (mutate("steps", {}), "trace.steps: expected an array"),
    ],
)
def test_rejections_name_the_json_path(doc: dict[str, Any], where: str) -> None:
    if "config" in where and "digest" not in where:
        doc["config_digest"] = config_digest(doc["config"])
    with pytest.raises(TraceError) as exc:
        from_json(doc)
    assert where in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unknown_outcome_for_validate_and_observe_rejected() -> None:
    for op in ("validate", "observe"):
        doc = base()
        doc["steps"][1]["faults"] = [{"operation": op, "call": 1, "outcome": "unknown-aborted"}]
        with pytest.raises(TraceError, match=f"not allowed for {op}"):
            from_json(doc)


def test_lifetime_reuse_rejected() -> None:
    doc = base()
    doc["steps"].append({"actor": "start", "worker": 0})
    with pytest.raises(TraceError, match=r"steps\[3\].worker: lifetime 0 is already started"):
        from_json(doc)
    doc = base()
    doc["steps"].append({"actor": "start", "worker": 1})
    with pytest.raises(TraceError, match="lifetime 1 is reserved for a replacement"):
        from_json(doc)
    doc = base()
    doc["steps"].insert(0, {"actor": "start", "worker": 1})  # started before it is reserved
    with pytest.raises(TraceError, match="reserved for a replacement"):
        from_json(doc)
    doc = base()
    doc["steps"].append(copy.deepcopy(doc["steps"][2]))
    with pytest.raises(TraceError, match="lifetime 1 is already reserved"):
        from_json(doc)


def test_duplicate_selector_and_pointless_interleave_rejected() -> None:
    doc = base()
    doc["steps"][2]["faults"].append({"operation": "process", "call": 1, "outcome": "abort"})
    with pytest.raises(TraceError, match="process call 1 is selected twice"):
        from_json(doc)
    doc = base()
    doc["steps"][2]["faults"][0]["interleave"] = {"at": "after", "stop": False}
    with pytest.raises(TraceError, match="selects neither stop nor a replacement"):
        from_json(doc)
    doc = base()
    doc["steps"][0]["faults"] = []
    with pytest.raises(TraceError, match="start steps make no I/O"):
        from_json(doc)


def test_text_level_rejections() -> None:
    text = json.dumps(base())
    with pytest.raises(TraceError, match="trailing content"):
        loads(text + "\n{}")
    with pytest.raises(TraceError, match="not valid JSON"):
        loads(text[:-1])
    with pytest.raises(TraceError, match="duplicate key"):
        loads(text[:-1] + ', "drain": true}')
    with pytest.raises(TraceError, match="NaN"):
        loads(text.replace('"seed": 17', '"seed": NaN'))


def test_source_offsets_must_increase() -> None:
    doc = base()
    doc["source"].insert(1, copy.deepcopy(doc["source"][0]))
    with pytest.raises(TraceError, match=r"source\[1\].offset: offset 0 is not increasing"):
        from_json(doc)


def test_too_many_steps_rejected() -> None:
    doc = base()
    doc["config"]["steps"] = 2
    doc["config_digest"] = config_digest(doc["config"])
    with pytest.raises(TraceError, match="3 steps exceed the configured 2"):
        from_json(doc)
