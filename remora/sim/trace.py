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
import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, cast

import attrs

from remora import strictjson
from remora.domain import SourceRecord
from remora.errors import InvalidInput
from remora.faults import OUTCOMES_FOR, At, Operation, Outcome
from remora.limits import (
    MAX_BUDGET_MS,
    MAX_CALL,
    MAX_DELAY_MS,
    MAX_ID,
    MAX_OFFSET,
    MAX_STEPS,
    MAX_TRACE_PARTITIONS,
    MAX_WAIT_MS,
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


class TraceError(InvalidInput):
    """A rejected trace; the message starts with the JSON path of the problem."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


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
class Toolchain:
    python: str
    remora: str
    hypothesis: str | None = None
    generator: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"python": self.python, "remora": self.remora}
        if self.hypothesis is not None:
            out["hypothesis"] = self.hypothesis
        if self.generator is not None:
            out["generator"] = self.generator
        return out


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


def config_digest(config_json: dict[str, Any]) -> str:
    text = json.dumps(config_json, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=16)
def current_toolchain(generator: str | None = None) -> Toolchain:
    """The running toolchain (cached: looking up package metadata is slow)."""
    import platform
    from importlib import metadata

    from remora import __version__

    try:
        hyp: str | None = metadata.version("hypothesis")
    except metadata.PackageNotFoundError:  # pragma: no cover - a test dependency
        hyp = None
    return Toolchain(platform.python_version(), __version__, hyp, generator)


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

T = TypeVar("T")


def _object(
    value: Any, path: str, required: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TraceError(path, f"expected an object, got {_kind(value)}")
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise TraceError(f"{path}.{unknown[0]}", "unknown field")
    missing = [k for k in required if k not in value]
    if missing:
        raise TraceError(f"{path}.{missing[0]}", "required field is missing")
    return cast(dict[str, Any], value)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null"
    )


def _int(value: Any, path: str, minimum: int = 0, maximum: int = MAX_ID) -> int:
    """An integer in ``minimum..maximum`` (every integer of a trace is bounded: by default
    to what a 64-bit store column holds)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TraceError(path, f"expected an integer, got {_kind(value)}")
    if value < minimum or value > maximum:
        raise TraceError(path, f"{strictjson.short(value)} is not in {minimum}..{maximum}")
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise TraceError(path, f"expected true or false, got {_kind(value)}")
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise TraceError(path, f"expected a string, got {_kind(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise TraceError(path, f"expected an array, got {_kind(value)}")
    return value


def _choice(value: Any, path: str, make: Callable[[str], T], what: str) -> T:
    text = _str(value, path)
    try:
        return make(text)
    except ValueError:
        raise TraceError(path, f"{text!r} is not a valid {what}") from None


MAX_SOURCE_RECORDS = 250_000
"""The most source records a trace may hold.  Replay is linear in steps plus records
(``benchmarks/replay_scale.py``), but its report lists every I/O event: a quarter of a
million records replays in a minute or two and a report of some hundred megabytes here,
while an unbounded source would let one file ask for any amount of time and memory."""

MAX_NAME = 200
"""The longest name a trace may give (a mutation, a ``module:qualname`` reference)."""


def _name(value: Any, path: str) -> str:
    text = _str(value, path)
    if not text or len(text) > MAX_NAME or not text.isprintable():
        raise TraceError(path, f"expected a printable name of 1..{MAX_NAME} characters")
    return text


def _parse_config(doc: Any, path: str) -> SimConfig:
    d = _object(doc, path, ["partitions", "class", "steps", "retry", "budget_ms"], NAMED)
    retry = _object(d["retry"], f"{path}.retry", ["max_calls", "waits_ms"])
    max_calls = _int(retry["max_calls"], f"{path}.retry.max_calls", 1, 10)
    waits = tuple(
        _int(w, f"{path}.retry.waits_ms[{i}]", 0, MAX_WAIT_MS)
        for i, w in enumerate(_list(retry["waits_ms"], f"{path}.retry.waits_ms"))
    )
    if len(waits) != max_calls - 1:
        raise TraceError(
            f"{path}.retry.waits_ms", f"needs {max_calls - 1} waits for {max_calls} calls"
        )
    trace_class = _str(d["class"], f"{path}.class")
    if trace_class not in CLASSES:
        raise TraceError(f"{path}.class", f"{trace_class!r} is not one of {', '.join(CLASSES)}")
    return SimConfig(
        partitions=_int(d["partitions"], f"{path}.partitions", 1, MAX_TRACE_PARTITIONS),
        trace_class=trace_class,
        steps=_int(d["steps"], f"{path}.steps", 0, MAX_STEPS),
        retry_max_calls=max_calls,
        retry_waits_ms=waits,
        budget_ms=_int(d["budget_ms"], f"{path}.budget_ms", 1, MAX_BUDGET_MS),
        **{k: _name(d[k], f"{path}.{k}") for k in NAMED if k in d},
    )


def _parse_selector(doc: Any, path: str, actor: str) -> FaultSelector:
    d = _object(doc, path, ["operation", "call", "outcome"], ["delay_ms", "interleave"])
    operation = _choice(d["operation"], f"{path}.operation", Operation, "operation")
    outcome = _choice(d["outcome"], f"{path}.outcome", Outcome, "outcome")
    if outcome not in OUTCOMES_FOR[operation]:
        raise TraceError(
            f"{path}.outcome", f"{outcome.value!r} is not allowed for {operation.value}"
        )
    if operation not in OPERATIONS_OF.get(actor, frozenset()):
        raise TraceError(f"{path}.operation", f"{actor} steps never call {operation.value}")
    interleave = None
    if "interleave" in d:
        i = _object(d["interleave"], f"{path}.interleave", ["at"], ["stop", "replacement"])
        at = _choice(i["at"], f"{path}.interleave.at", At, "interleave point (before|after)")
        stop = _bool(i.get("stop", False), f"{path}.interleave.stop")
        replacement = None
        if "replacement" in i:
            replacement = _int(i["replacement"], f"{path}.interleave.replacement")
        if not stop and replacement is None:
            raise TraceError(f"{path}.interleave", "selects neither stop nor a replacement")
        interleave = Interleave(at, stop, replacement)
    return FaultSelector(
        operation=operation,
        call=_int(d["call"], f"{path}.call", 1, MAX_CALL),
        outcome=outcome,
        delay_ms=_int(d.get("delay_ms", 0), f"{path}.delay_ms", 0, MAX_DELAY_MS),
        interleave=interleave,
    )


def _parse_step(doc: Any, path: str, partitions: int) -> Step:
    d = _object(doc, path, ["actor", "worker"], ["partition", "faults", "mutex_held_ms"])
    actor = _str(d["actor"], f"{path}.actor")
    if actor not in ACTORS:
        raise TraceError(f"{path}.actor", f"{actor!r} is not one of {', '.join(ACTORS)}")
    worker = _int(d["worker"], f"{path}.worker")
    partition = None
    if actor in PARTITIONED:
        if "partition" not in d:
            raise TraceError(f"{path}.partition", f"{actor} steps need a partition")
        partition = _int(d["partition"], f"{path}.partition", 0, partitions - 1)
    elif "partition" in d:
        raise TraceError(f"{path}.partition", f"{actor} steps take no partition")
    faults: tuple[FaultSelector, ...] = ()
    if "faults" in d:
        if actor not in PARTITIONED:
            raise TraceError(f"{path}.faults", f"{actor} steps make no I/O to fault")
        items = _list(d["faults"], f"{path}.faults")
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
        held = _int(d["mutex_held_ms"], f"{path}.mutex_held_ms", 0, 2 * MAX_BUDGET_MS)
    return Step(actor, worker, partition, faults, held)


def _parse_record(doc: Any, path: str, partitions: int) -> SourceRecord:
    d = _object(doc, path, ["partition", "offset", "visible", "key", "value"])
    key = d["key"]
    if key is not None and not isinstance(key, str):
        raise TraceError(f"{path}.key", f"expected a string or null, got {_kind(key)}")
    try:
        value = strictjson.decode_base64(_str(d["value"], f"{path}.value"), "")
    except InvalidInput:
        raise TraceError(f"{path}.value", "is not valid base64") from None
    return SourceRecord(
        partition=_int(d["partition"], f"{path}.partition", 0, partitions - 1),
        offset=_int(d["offset"], f"{path}.offset", 0, MAX_OFFSET),
        visible=_bool(d["visible"], f"{path}.visible"),
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
        try:
            doc = strictjson.loads(text)
        except strictjson.JsonRejected as exc:
            if str(exc).startswith("trailing content"):
                raise TraceError("trace", str(exc)) from None
            raise TraceError("trace", f"not valid JSON ({exc})") from None
        return from_json(doc)


def parse_header(d: dict[str, Any], version: int, implementation: str) -> Toolchain:
    """Check a trace document's ``version`` and ``implementation`` and read its
    ``toolchain`` (the header every trace format shares: worker and job traces)."""
    if d["version"] != version or isinstance(d["version"], bool):
        raise TraceError("trace.version", f"{d['version']!r} is not supported (expected {version})")
    if d["implementation"] != implementation:
        raise TraceError(
            "trace.implementation", f"{d['implementation']!r} is not {implementation!r}"
        )
    t = _object(
        d["toolchain"], "trace.toolchain", ["python", "remora"], ["hypothesis", "generator"]
    )
    return Toolchain(
        python=_str(t["python"], "trace.toolchain.python"),
        remora=_str(t["remora"], "trace.toolchain.remora"),
        hypothesis=None
        if "hypothesis" not in t
        else _str(t["hypothesis"], "trace.toolchain.hypothesis"),
        generator=None
        if "generator" not in t
        else _str(t["generator"], "trace.toolchain.generator"),
    )


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
    d = _object(doc, "trace", keys)
    toolchain = parse_header(d, VERSION, IMPLEMENTATION)
    seed = None if d["seed"] is None else _int(d["seed"], "trace.seed")
    config = _parse_config(d["config"], "trace.config")
    digest = _str(d["config_digest"], "trace.config_digest")
    if digest != config_digest(d["config"]):
        raise TraceError(
            "trace.config_digest", "does not match the config (the config was changed)"
        )
    raw_source = _list(d["source"], "trace.source")
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
        for i, s in enumerate(_list(d["steps"], "trace.steps"))
    )
    if len(steps) > config.steps:
        raise TraceError("trace.steps", f"{len(steps)} steps exceed the configured {config.steps}")
    _check_lifetimes(steps)
    return Trace(toolchain, seed, config, source, steps, _bool(d["drain"], "trace.drain"))


def validate(trace: Trace) -> Trace:
    """Re-check a trace built in code (e.g. by the reducer) exactly as a file would be."""
    return from_json(json.loads(trace.dumps()))
