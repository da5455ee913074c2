"""Issue 11, item 4: every integer a trace may hold is bounded (:mod:`remora.limits`) to what
every store and the clock can run, the generator keeps the same bounds, and a trace at every
bound at once replays to the same report on memory, SQLite and PostgreSQL — never an
``ERROR exception`` from input alone."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from remora.cli import main
from remora.errors import InvalidInput
from remora.limits import (
    MAX_BUDGET_MS,
    MAX_CALL,
    MAX_DELAY_MS,
    MAX_ID,
    MAX_OFFSET,
    MAX_STEPS,
    MAX_WAIT_MS,
)
from remora.sim.generate import generate
from remora.sim.trace import Step, Trace, TraceError, loads


def at_every_bound(seed: int = 17) -> Trace:
    """A generated trace pushed to every bound: the largest offset, lifetime id, seed,
    budget, retry waits, fault delays and call numbers the parser accepts."""
    trace = generate(seed, "valid", steps=64, partitions=2)
    last = max((r for r in trace.source if r.partition == 0), key=lambda r: r.offset)
    source = tuple(attrs.evolve(r, offset=MAX_OFFSET) if r is last else r for r in trace.source)
    renamed = {0: MAX_ID}

    def step(s: Step) -> Step:
        faults = tuple(
            attrs.evolve(f, delay_ms=MAX_DELAY_MS, call=MAX_CALL if i else f.call)
            for i, f in enumerate(s.faults)
        )
        return attrs.evolve(s, worker=renamed.get(s.worker, s.worker), faults=faults)

    config = attrs.evolve(
        trace.config,
        budget_ms=MAX_BUDGET_MS,
        retry_waits_ms=(MAX_WAIT_MS,) * (trace.config.retry_max_calls - 1),
    )
    return attrs.evolve(
        trace,
        seed=MAX_ID,
        config=config,
        source=source,
        steps=tuple(step(s) for s in trace.steps),
    )


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("source", 0, "offset"), MAX_OFFSET + 1, "offset: 9223372036854775807 is not in 0.."),
        (("steps", 0, "worker"), MAX_ID + 1, "worker: 9223372036854775808 is not in 0.."),
        (("seed",), 10**500, "seed: an integer of about 500 digits is not in 0.."),
        (("config", "budget_ms"), MAX_BUDGET_MS + 1, f"budget_ms: {MAX_BUDGET_MS + 1} is not"),
        (("config", "retry", "waits_ms", 0), MAX_WAIT_MS + 1, "waits_ms[0]: 3600001 is not"),
        (("config", "steps"), MAX_STEPS + 1, f"steps: {MAX_STEPS + 1} is not in 0..{MAX_STEPS}"),
    ],
    ids=["offset", "worker", "seed", "budget", "wait", "steps"],
)
def test_out_of_bounds_integers_are_rejected(
    path: tuple[str | int, ...], value: int, message: str
) -> None:
    doc = json.loads(generate(3, "valid").dumps())
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    if path[0] == "config":
        from remora.sim.trace import config_digest

        doc["config_digest"] = config_digest(doc["config"])
    with pytest.raises(TraceError, match=message.replace("[", r"\[").replace("]", r"\]")):
        loads(json.dumps(doc))


def test_the_generator_keeps_the_parser_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``--steps 200000`` generated (slowly) and saved a trace the parser refuses."""
    with pytest.raises(InvalidInput, match=f"3..{MAX_STEPS} steps"):
        generate(1, "valid", steps=MAX_STEPS + 1)
    with pytest.raises(InvalidInput, match="seed"):
        generate(MAX_ID + 1)
    assert usage(["sim-worker", "--seed", "1", "--steps", str(MAX_STEPS + 1)]) == 2
    assert f"must be at most {MAX_STEPS}" in capsys.readouterr().err
    assert usage(["sim-worker", "--seed", str(MAX_ID + 1)]) == 2
    assert usage(["sim-worker", "--seed", "9" * 5000]) == 2
    assert "Traceback" not in capsys.readouterr().err


def usage(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse refuses a flag by exiting
        return int(exc.code or 0)


def test_a_trace_at_every_bound_replays_the_same_on_every_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a huge budget_ms was an ``ERROR exception`` on every store; an offset >= 2^63
    passed on memory and failed on SQLite and PostgreSQL."""
    trace = at_every_bound()
    path = tmp_path / "bounds.json"
    path.write_text(trace.dumps())
    assert loads(path.read_text()) == trace
    reports = {}
    stores = ["memory", "sqlite"]
    try:
        from tests.postgres.services import require_postgres

        stores.append("postgres")
        dsn = require_postgres()
    except pytest.skip.Exception:
        dsn = ""
    for store in stores:
        extra = ["--dsn", dsn] if store == "postgres" else []
        code = main(["sim-worker", "--replay", str(path), "--store", store, *extra])
        out, err = capsys.readouterr()
        report = json.loads(out)
        assert report["failure"] is None or "exception" not in report["failure"], err
        reports[store] = (code, out)
    assert len(set(reports.values())) == 1, reports
    assert reports["memory"][0] == 0
