"""Issue 11, item 4: hostile input never produces a traceback.

Hypothesis mutates valid inputs — the bytes of a trace or a source file, or single JSON nodes
(replaced by hostile values: huge and boundary integers, NaN, lone surrogates, NUL, deep
nesting, 5,000-digit integers, wrong types; deleted; unknown keys added) — and runs the real
command on the result.  Whatever the input:

* the exit code is 0, 1 or 2;
* stderr holds no traceback and no ``internal error`` (the final handler's line for an
  exception nothing expected: from input alone, that is a bug);
* a replayed trace never ends in ``ERROR exception``, and one the parser accepts replays to
  the same report on SQLite as on memory; a source run either refuses the input (2) or
  completes (0) — a record that cannot be stored is quarantined, not retried forever.

It runs under every Hypothesis profile (``ci`` in CI: derandomized, 200 examples each).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from remora.cli import main
from remora.sim.generate import generate
from remora.sim.report import run_trace
from remora.sim.trace import config_digest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "source"

TRACES = [
    generate(seed, cls, steps=12).dumps() for seed in (1, 2, 3) for cls in ("valid", "conflict")
]
SOURCE = (EXAMPLES / "partition-1.jsonl").read_text()

DEEP = "__remora_deep__"
HUGE = "__remora_huge__"
PLACEHOLDERS = {f'"{DEEP}"': "[" * 5000 + "]" * 5000, f'"{HUGE}"': "9" * 5000}

hostile_text = st.sampled_from(
    [
        "\ud800",
        "a\udfffb",
        "a\x00b",
        "\x00",
        "",
        "é",
        "start",
        "process",
        "commit",
        "before",
        "unknown-committed",
        "valid",
        "sha256:0",
        "os:system",
        "*" * 3,
    ]
) | st.text(max_size=8)

amendment_value = st.fixed_dictionaries(
    {
        "subject": hostile_text,
        "op": st.sampled_from(["submit", "correct", "withdraw"]),
        "revision": st.integers(0, 3) | st.just(2**70),
        "body": st.just({}) | st.just({"x": "\x00"}),
    }
)


def b64_json(doc: Any) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


known_crashers = st.sampled_from([DEEP, HUGE, "\ud800", "a\x00b", float("nan"), 2**64])
"""The values that used to crash or stall a command (drawn half of the time)."""

hostile = known_crashers | st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 2, 2**63 - 1, 2**63, -1, 0, 1, 10**30, 10**400]),
    st.booleans(),
    st.none(),
    st.floats(),  # NaN and infinities included: json.dumps writes NaN / Infinity
    hostile_text,
    st.lists(st.integers(-2, 2), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(-1, 1), max_size=2),
    st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode()),
    amendment_value.map(b64_json),  # a valid base64 value that may hold NUL or a surrogate
    amendment_value,
)


WORDS = [
    *("start", "assign", "seek", "process", "revoke", "stop"),
    *("validate", "claim", "observe", "commit", "abort", "unknown-committed"),
    *("unknown-aborted", "before", "after", "valid", "conflict"),
]


def same_kind(key: Any, value: Any) -> st.SearchStrategy[Any]:
    """Plausible values of ``value``'s kind, bounds and their neighbours included."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(0, 4) | st.sampled_from(
            [2**63 - 2, 2**63 - 1, 2**31 - 1, 100_000, 3_600_000, 86_400_000, 1_000_000]
        )
    if key == "value":
        return amendment_value.map(b64_json) | st.binary(max_size=24).map(
            lambda b: base64.b64encode(b).decode()
        )
    if isinstance(value, str):
        return st.sampled_from(WORDS) | hostile_text
    return hostile


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += paths(value, (*prefix, i))
    return out


def mutate_node(data: st.DataObject, doc: Any) -> Any:
    """Replace, delete, or add beside one node of ``doc``."""
    path = data.draw(st.sampled_from(paths(doc)[1:]), label="path")
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    how = data.draw(
        st.sampled_from(["retype", "retype", "replace", "replace", "delete", "add"]), label="how"
    )
    if how == "retype":  # a value of the same kind: more mutants get past the parser
        parent[path[-1]] = data.draw(same_kind(path[-1], parent[path[-1]]), label="value")
    elif how == "replace":
        parent[path[-1]] = data.draw(hostile, label="value")
    elif how == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(hostile_text, label="key")] = data.draw(hostile, label="value")
    else:
        parent.insert(path[-1], data.draw(hostile, label="value"))
    return doc


def dumps(doc: Any) -> str:
    text = json.dumps(doc)  # ASCII: surrogates and NUL become \\u escapes
    for placeholder, literal in PLACEHOLDERS.items():
        text = text.replace(placeholder, literal)
    return text


def mutate_bytes(data: st.DataObject, raw: bytes) -> bytes:
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, max(len(buf) - 1, 0)), label="at")
        kind = data.draw(st.sampled_from(["set", "insert", "delete", "repeat"]), label="kind")
        if kind == "set" and buf:
            buf[at] = data.draw(st.integers(0, 255), label="byte")
        elif kind == "insert":
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=4), label="bytes")
        elif kind == "delete":
            del buf[at : at + data.draw(st.integers(1, 16), label="n")]
        else:
            buf[at:at] = buf[at : at + data.draw(st.integers(1, 64), label="n")]
    return bytes(buf)


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code) if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, err: str, allowed: tuple[int, ...]) -> None:
    assert code in allowed, (code, err)
    assert "Traceback" not in err and "internal error" not in err, err


def mutated_trace(data: st.DataObject) -> bytes:
    text = data.draw(st.sampled_from(TRACES), label="trace")
    if data.draw(st.integers(0, 2), label="bytes?") == 0:
        return mutate_bytes(data, text.encode())
    doc = mutate_node(data, json.loads(text))
    redigest = data.draw(st.integers(0, 9), label="redigest") > 0
    if isinstance(doc.get("config"), dict) and redigest:
        with contextlib.suppress(TypeError, ValueError):  # reach past the digest check
            doc["config_digest"] = config_digest(doc["config"])
    return dumps(doc).encode("utf-8", "surrogatepass")


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_mutated_trace_never_crashes_replay(data: st.DataObject) -> None:
    raw = mutated_trace(data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        path.write_bytes(raw)
        code, out, err = run(["sim-worker", "--replay", str(path)])
        event(f"sim-worker exit {code}")
        assert_clean(code, err, (0, 1, 2))
        if code == 2:
            return
        failure = json.loads(out)["failure"] or ""
        assert "exception" not in failure, failure
        # Accepted by the parser: the same report on SQLite as on memory.
        on_sqlite = run(["sim-worker", "--replay", str(path), "--store", "sqlite"])
    assert on_sqlite[:2] == (code, out), on_sqlite[2]


def mutated_source(data: st.DataObject) -> bytes:
    if data.draw(st.integers(0, 2), label="bytes?") == 0:
        return mutate_bytes(data, SOURCE.encode())
    lines = SOURCE.splitlines()
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    lines[i] = dumps(mutate_node(data, json.loads(lines[i])))
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_mutated_source_is_refused_or_processed_never_stuck(data: st.DataObject) -> None:
    raw = mutated_source(data)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        (src / "partition-1.jsonl").write_bytes(raw)
        code, _, err = run(["run", str(src), "--db", str(Path(tmp) / "state.sqlite3")])
    event(f"run exit {code}")
    assert_clean(code, err, (0, 2))
    if code == 2:
        assert err.count("\n") == 1 and "partition-1.jsonl" in err, err


REPORT = run_trace(generate(17, "conflict", steps=24)).dumps()
COUNTEREXAMPLE = (EXAMPLES.parents[1] / "tests/fixtures/show/commit-is-fenced-cas.json").read_text()


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_mutated_report_never_crashes_show(data: st.DataObject) -> None:
    """``remora show`` draws a report or an explorer counterexample without replaying it:
    its reader is the one that must hold (before: a non-list ``interleaves`` or
    ``waits_ms``, or a non-object counterexample ``config``, was an internal error)."""
    text = data.draw(st.sampled_from([REPORT, COUNTEREXAMPLE]), label="document")
    if data.draw(st.integers(0, 2), label="bytes?") == 0:
        raw = mutate_bytes(data, text.encode())
    else:
        raw = dumps(mutate_node(data, json.loads(text))).encode("utf-8", "surrogatepass")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.json"
        path.write_bytes(raw)
        code, _, err = run(["show", str(path), "--out", str(Path(tmp) / "page.html")])
    event(f"show exit {code}")
    assert_clean(code, err, (0, 2))


def test_the_planted_crashes_are_caught() -> None:
    """The fuzz assertions are not vacuous: the hostile values they draw include each case
    that used to crash, and each is now one line, exit 2."""
    lines = SOURCE.splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        for i, value in enumerate([DEEP, HUGE, "\ud800"]):
            doc = json.loads(lines[0])
            doc["value"] = value
            src = Path(tmp) / f"src{i}"
            src.mkdir()
            (src / "partition-1.jsonl").write_bytes(dumps(doc).encode() + b"\n")
            code, _, err = run(["run", str(src), "--db", str(Path(tmp) / f"{i}.db")])
            assert_clean(code, err, (2,))
            trace = json.loads(TRACES[0])
            trace["drain"] = value
            (Path(tmp) / "t.json").write_bytes(dumps(trace).encode())
            code, _, err = run(["sim-worker", "--replay", str(Path(tmp) / "t.json")])
            assert_clean(code, err, (2,))
