"""The ``worker-schedule-v1`` trace: model, strict parser and serializer.

A trace is everything needed to replay a run: the producing toolchain (provenance only),
the seed it was generated from (replay never regenerates from it), the complete immutable
configuration and its digest, the raw source records (values base64-encoded, so bytes
round-trip losslessly), the explicit steps with their fault choices, and whether to drain.

The parser is strict.  It reads JSON as :mod:`remora.strictjson` does (duplicate keys,
``NaN``, huge integers, deep nesting and lone surrogates are refused) and holds every integer
to the bounds of :mod:`remora.limits` — what every store and the clock can run, the same
bounds the generator keeps — so a trace it accepts replays the same on memory, SQLite and
PostgreSQL.  It rejects, with one line naming the JSON path: unknown fields at any
level, duplicate keys, trailing content, a wrong ``version`` or ``implementation``, a
``config`` whose digest differs from ``config_digest``, invalid choices (an unknown outcome
for ``validate``/``observe``, ``call`` < 1, a bad actor or ``at``, an operation the actor
never performs), and reuse of a worker lifetime id (starting an id twice, or starting an id
reserved by a replacement).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from remora import strictjson
from remora.domain import SourceRecord
from remora.errors import InvalidInput
from remora.faults import OUTCOMES_FOR, At, Operation, Outcome
from remora.limits import (
    MAX_BUDGET_MS,
    MAX_CALL,
    MAX_DELAY_MS,
    MAX_OFFSET,
    MAX_STEPS,
    MAX_TRACE_PARTITIONS,
    MAX_WAIT_MS,
)
from remora.sim.codec import (
    Toolchain,
    TraceError,
    config_digest,
    current_toolchain,
    kind_of,
    parse_header,
    read_bool,
    read_choice,
    read_document,
    read_int,
    read_list,
    read_name,
    read_object,
    read_str,
)
from remora.sim.gcpause import collector_paused

VERSION = 1
IMPLEMENTATION = "worker-schedule-v1"

Actor = Literal["start", "assign", "seek", "process", "revoke", "stop"]
ACTORS: tuple[Actor, ...] = ("start", "assign", "seek", "process", "revoke", "stop")
PARTITIONED: frozenset[str] = frozenset({"assign", "seek", "process"})
OPERATIONS_OF: dict[str, frozenset[Operation]] = {
    "assign": frozenset({Operation.VALIDATE, Operation.CLAIM, Operation.OBSERVE}),
    "seek": frozenset({Operation.OBSERVE}),
    "process": frozenset({Operation.PROCESS, Operation.OBSERVE}),
}
CLASSES = ("valid", "conflict", "custom")
NAMED = ("mutation", "lifecycle", "processing", "model")
"""Optional names in ``config`` (present only when not the built-in default)."""


# -- model ------------------------------------------------------------------------------


@attrs.frozen
class Interleave:
    at: At
    stop: bool = False
    replacement: int | None = None


@attrs.frozen
class FaultSelector:
    operation: Operation
    call: int
    outcome: Outcome
    delay_ms: int = 0
    interleave: Interleave | None = None


@attrs.frozen
class Step:
    actor: Actor
    worker: int
    partition: int | None = None
    faults: tuple[FaultSelector, ...] = ()
    mutex_held_ms: int = 0  # the lifetime's mutex is held this long by a concurrent call


@attrs.frozen
class SimConfig:
    partitions: int
    trace_class: str
    steps: int
    retry_max_calls: int = 3
    retry_waits_ms: tuple[int, ...] = (100, 200)
    budget_ms: int = 20_000
    mutation: str | None = None  # a named planted bug (remora.sim.mutations) it runs
    lifecycle: str | None = None  # "module:qualname" of a custom lifecycle factory
    processing: str | None = None  # "module:qualname" of a custom remora.domain.Processing
    model: str | None = None  # "module:qualname" of the reference model checking it

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitions": self.partitions,
            "class": self.trace_class,
            "steps": self.steps,
            "retry": {"max_calls": self.retry_max_calls, "waits_ms": list(self.retry_waits_ms)},
            "budget_ms": self.budget_ms,
        }
        # Optional keys appear only when set, so the digests of earlier traces stay valid.
        for key in NAMED:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def digest(self) -> str:
        return config_digest(self.to_json())


@attrs.frozen
class Trace:
    toolchain: Toolchain
    seed: int | None
    config: SimConfig
    source: tuple[SourceRecord, ...]
    steps: tuple[Step, ...]
    drain: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "implementation": IMPLEMENTATION,
            "toolchain": self.toolchain.to_json(),
            "seed": self.seed,
            "config_digest": self.config.digest(),
            "config": self.config.to_json(),
            "source": [_record_json(r) for r in self.source],
            "steps": [_step_json(s) for s in self.steps],
            "drain": self.drain,
        }

    def dumps(self) -> str:
        """The canonical text of this trace (stable: same trace, same bytes)."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def reserved_replacements(self) -> frozenset[int]:
        return frozenset(
            f.interleave.replacement
            for s in self.steps
            for f in s.faults
            if f.interleave is not None and f.interleave.replacement is not None
        )

    def lifetime_ids(self) -> frozenset[int]:
        """Every lifetime id the trace starts or reserves."""
        return frozenset(s.worker for s in self.steps if s.actor == "start") | (
            self.reserved_replacements()
        )


def _record_json(r: SourceRecord) -> dict[str, Any]:
    return {
        "partition": r.partition,
        "offset": r.offset,
        "visible": r.visible,
        "key": r.key,
        "value": base64.b64encode(r.value).decode("ascii"),
    }


def _selector_json(f: FaultSelector) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operation": f.operation.value,
        "call": f.call,
        "outcome": f.outcome.value,
    }
    if f.delay_ms:
        out["delay_ms"] = f.delay_ms
    if f.interleave is not None:
        il: dict[str, Any] = {"at": f.interleave.at.value}
        if f.interleave.stop:
            il["stop"] = True
        if f.interleave.replacement is not None:
            il["replacement"] = f.interleave.replacement
        out["interleave"] = il
    return out


def _step_json(s: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"actor": s.actor, "worker": s.worker}
    if s.partition is not None:
        out["partition"] = s.partition
    if s.faults:
        out["faults"] = [_selector_json(f) for f in s.faults]
    if s.mutex_held_ms:  # only when set, so the digests of earlier traces stay valid
        out["mutex_held_ms"] = s.mutex_held_ms
    return out


# -- parsing ----------------------------------------------------------------------------

MAX_SOURCE_RECORDS = 250_000
"""The most source records a trace may hold.  Replay is linear in steps plus records
(``benchmarks/replay_scale.py``), but its report lists every I/O event: a quarter of a
million records replays in a minute or two and a report of some hundred megabytes here,
while an unbounded source would let one file ask for any amount of time and memory."""


def _parse_config(doc: Any, path: str) -> SimConfig:
    d = read_object(doc, path, ["partitions", "class", "steps", "retry", "budget_ms"], NAMED)
    retry = read_object(d["retry"], f"{path}.retry", ["max_calls", "waits_ms"])
    max_calls = read_int(retry["max_calls"], f"{path}.retry.max_calls", 1, 10)
    waits = tuple(
        read_int(w, f"{path}.retry.waits_ms[{i}]", 0, MAX_WAIT_MS)
        for i, w in enumerate(read_list(retry["waits_ms"], f"{path}.retry.waits_ms"))
    )
    if len(waits) != max_calls - 1:
        raise TraceError(
            f"{path}.retry.waits_ms", f"needs {max_calls - 1} waits for {max_calls} calls"
        )
    trace_class = read_str(d["class"], f"{path}.class")
    if trace_class not in CLASSES:
        raise TraceError(f"{path}.class", f"{trace_class!r} is not one of {', '.join(CLASSES)}")
    return SimConfig(
        partitions=read_int(d["partitions"], f"{path}.partitions", 1, MAX_TRACE_PARTITIONS),
        trace_class=trace_class,
        steps=read_int(d["steps"], f"{path}.steps", 0, MAX_STEPS),
        retry_max_calls=max_calls,
        retry_waits_ms=waits,
        budget_ms=read_int(d["budget_ms"], f"{path}.budget_ms", 1, MAX_BUDGET_MS),
        **{k: read_name(d[k], f"{path}.{k}") for k in NAMED if k in d},
    )


def _parse_selector(doc: Any, path: str, actor: str) -> FaultSelector:
    d = read_object(doc, path, ["operation", "call", "outcome"], ["delay_ms", "interleave"])
    operation = read_choice(d["operation"], f"{path}.operation", Operation, "operation")
    outcome = read_choice(d["outcome"], f"{path}.outcome", Outcome, "outcome")
    if outcome not in OUTCOMES_FOR[operation]:
        raise TraceError(
            f"{path}.outcome", f"{outcome.value!r} is not allowed for {operation.value}"
        )
    if operation not in OPERATIONS_OF.get(actor, frozenset()):
        raise TraceError(f"{path}.operation", f"{actor} steps never call {operation.value}")
    interleave = None
    if "interleave" in d:
        i = read_object(d["interleave"], f"{path}.interleave", ["at"], ["stop", "replacement"])
        at = read_choice(i["at"], f"{path}.interleave.at", At, "interleave point (before|after)")
        stop = read_bool(i.get("stop", False), f"{path}.interleave.stop")
        replacement = None
        if "replacement" in i:
            replacement = read_int(i["replacement"], f"{path}.interleave.replacement")
        if not stop and replacement is None:
            raise TraceError(f"{path}.interleave", "selects neither stop nor a replacement")
        interleave = Interleave(at, stop, replacement)
    return FaultSelector(
        operation=operation,
        call=read_int(d["call"], f"{path}.call", 1, MAX_CALL),
        outcome=outcome,
        delay_ms=read_int(d.get("delay_ms", 0), f"{path}.delay_ms", 0, MAX_DELAY_MS),
        interleave=interleave,
    )


def _parse_step(doc: Any, path: str, partitions: int) -> Step:
    d = read_object(doc, path, ["actor", "worker"], ["partition", "faults", "mutex_held_ms"])
    actor = read_str(d["actor"], f"{path}.actor")
    if actor not in ACTORS:
        raise TraceError(f"{path}.actor", f"{actor!r} is not one of {', '.join(ACTORS)}")
    worker = read_int(d["worker"], f"{path}.worker")
    partition = None
    if actor in PARTITIONED:
        if "partition" not in d:
            raise TraceError(f"{path}.partition", f"{actor} steps need a partition")
        partition = read_int(d["partition"], f"{path}.partition", 0, partitions - 1)
    elif "partition" in d:
        raise TraceError(f"{path}.partition", f"{actor} steps take no partition")
    faults: tuple[FaultSelector, ...] = ()
    if "faults" in d:
        if actor not in PARTITIONED:
            raise TraceError(f"{path}.faults", f"{actor} steps make no I/O to fault")
        items = read_list(d["faults"], f"{path}.faults")
        faults = tuple(
            _parse_selector(f, f"{path}.faults[{i}]", actor) for i, f in enumerate(items)
        )
        seen: set[tuple[Operation, int]] = set()
        for i, f in enumerate(faults):
            if (f.operation, f.call) in seen:
                raise TraceError(
                    f"{path}.faults[{i}]", f"{f.operation.value} call {f.call} is selected twice"
                )
            seen.add((f.operation, f.call))
    held = 0
    if "mutex_held_ms" in d:
        if actor not in PARTITIONED:
            raise TraceError(f"{path}.mutex_held_ms", f"{actor} steps do not contend the mutex")
        held = read_int(d["mutex_held_ms"], f"{path}.mutex_held_ms", 0, 2 * MAX_BUDGET_MS)
    return Step(actor, worker, partition, faults, held)


def _parse_record(doc: Any, path: str, partitions: int) -> SourceRecord:
    d = read_object(doc, path, ["partition", "offset", "visible", "key", "value"])
    key = d["key"]
    if key is not None and not isinstance(key, str):
        raise TraceError(f"{path}.key", f"expected a string or null, got {kind_of(key)}")
    try:
        value = strictjson.decode_base64(read_str(d["value"], f"{path}.value"), "")
    except InvalidInput:
        raise TraceError(f"{path}.value", "is not valid base64") from None
    return SourceRecord(
        partition=read_int(d["partition"], f"{path}.partition", 0, partitions - 1),
        offset=read_int(d["offset"], f"{path}.offset", 0, MAX_OFFSET),
        visible=read_bool(d["visible"], f"{path}.visible"),
        key=key,
        value=value,
    )


def _check_lifetimes(steps: Sequence[Step]) -> None:
    reserved: dict[int, str] = {}
    for i, s in enumerate(steps):
        for j, f in enumerate(s.faults):
            if f.interleave is not None and f.interleave.replacement is not None:
                rid = f.interleave.replacement
                where = f"trace.steps[{i}].faults[{j}].interleave.replacement"
                if rid in reserved:
                    raise TraceError(
                        where, f"lifetime {rid} is already reserved at {reserved[rid]}"
                    )
                reserved[rid] = where
    started: dict[int, int] = {}
    for i, s in enumerate(steps):
        if s.actor != "start":
            continue
        where = f"trace.steps[{i}].worker"
        if s.worker in started:
            raise TraceError(
                where, f"lifetime {s.worker} is already started at steps[{started[s.worker]}]"
            )
        if s.worker in reserved:
            raise TraceError(where, f"lifetime {s.worker} is reserved for a replacement")
        started[s.worker] = i


def loads(text: str) -> Trace:
    """Parse and validate a trace document (see the module docstring), with the cyclic
    garbage collector paused (:mod:`remora.sim.gcpause`: a large source is many objects)."""
    with collector_paused():
        return from_json(read_document(text))


def from_json(doc: Any) -> Trace:
    keys = [
        "version",
        "implementation",
        "toolchain",
        "seed",
        "config_digest",
        "config",
        "source",
        "steps",
        "drain",
    ]
    d = read_object(doc, "trace", keys)
    toolchain = parse_header(d, VERSION, IMPLEMENTATION)
    seed = None if d["seed"] is None else read_int(d["seed"], "trace.seed")
    config = _parse_config(d["config"], "trace.config")
    digest = read_str(d["config_digest"], "trace.config_digest")
    if digest != config_digest(d["config"]):
        raise TraceError(
            "trace.config_digest", "does not match the config (the config was changed)"
        )
    raw_source = read_list(d["source"], "trace.source")
    if len(raw_source) > MAX_SOURCE_RECORDS:
        raise TraceError(
            "trace.source",
            f"{len(raw_source)} records exceed the limit of {MAX_SOURCE_RECORDS:,}",
        )
    source = tuple(
        _parse_record(r, f"trace.source[{i}]", config.partitions) for i, r in enumerate(raw_source)
    )
    last: dict[int, int] = {}
    for i, r in enumerate(source):
        if r.offset <= last.get(r.partition, -1):
            raise TraceError(
                f"trace.source[{i}].offset",
                f"offset {r.offset} is not increasing in partition {r.partition}",
            )
        last[r.partition] = r.offset
    steps = tuple(
        _parse_step(s, f"trace.steps[{i}]", config.partitions)
        for i, s in enumerate(read_list(d["steps"], "trace.steps"))
    )
    if len(steps) > config.steps:
        raise TraceError("trace.steps", f"{len(steps)} steps exceed the configured {config.steps}")
    _check_lifetimes(steps)
    return Trace(toolchain, seed, config, source, steps, read_bool(d["drain"], "trace.drain"))


def validate(trace: Trace) -> Trace:
    """Re-check a trace built in code (e.g. by the reducer) exactly as a file would be."""
    return from_json(json.loads(trace.dumps()))


__all__ = [
    # the shared codec's names, re-exported: a worker trace's reader is this module
    "Toolchain",
    "TraceError",
    "config_digest",
    "current_toolchain",
    "VERSION",
    "IMPLEMENTATION",
    "Actor",
    "ACTORS",
    "PARTITIONED",
    "OPERATIONS_OF",
    "CLASSES",
    "NAMED",
    "Interleave",
    "FaultSelector",
    "Step",
    "SimConfig",
    "Trace",
    "MAX_SOURCE_RECORDS",
    "loads",
    "from_json",
    "validate",
]
