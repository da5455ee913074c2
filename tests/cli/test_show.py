"""``remora show``: the timeline drawn from a trace, a report or a counterexample, and bad
input rejected in one line (the page itself, in a real browser: test_show_browser.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest

from remora.cli import main
from remora.errors import InvalidInput
from remora.sim.generate import generate
from remora.sim.mutations import mutation
from remora.sim.report import run_trace
from remora.sim.timeline import IO_KINDS, from_protocol, from_report, render
from remora.sim.trace import Trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "show"
CEX = FIXTURES / "commit-is-fenced-cas.json"
PLANTED = "skip-cancel-check-after-wakeup"


def failing_trace() -> Trace:
    """Seed 4 against a planted bug: interleaves (stop, replacements) and an io-after-stop."""
    trace = generate(4, "valid")
    return attrs.evolve(trace, config=attrs.evolve(trace.config, mutation=PLANTED))


def report_of(trace: Trace) -> dict[str, object]:
    with mutation(PLANTED).applied() as lifecycle:
        return run_trace(trace, lifecycle_factory=lifecycle).document


def embedded(page: str) -> dict[str, object]:
    m = re.search(r'<script type="application/json" id="remora-timeline">(.*?)</script>', page)
    assert m is not None
    return json.loads(m.group(1).replace("<\\/", "</"))  # type: ignore[no-any-return]


def test_report_timeline_has_lanes_marks_interleaves_series_and_the_violation() -> None:
    doc = report_of(failing_trace())
    t = from_report(doc, "x.json")
    lifetimes = {e["lifetime"] for e in doc["events"]} | {a["worker"] for a in doc["attempts"]}
    assert [lane.key for lane in t.lanes] == [f"lifetime {n}" for n in sorted(lifetimes)]
    io = [m for m in t.marks if m.kind != "callback"]
    assert len(io) == len(doc["events"])  # one mark per modeled I/O call
    assert {m.kind for m in io} <= {*IO_KINDS, "error"} and "canceled" in {m.kind for m in io}
    assert sum(m.selected for m in io) == doc["counts"]["selected_faults"]
    assert len(t.links) == doc["counts"]["interleaves"]
    assert any(link.stop for link in t.links)
    replacements = [link for link in t.links if link.target is not None]
    assert replacements and all(link.target_slot is not None for link in replacements)
    assert [s.key for s in t.series] == ["partition 0"]
    assert t.series[0].points[-1][1:] == (doc["events"][-1]["epoch"], doc["events"][-1]["frontier"])
    v = doc["violations"][0]
    assert t.violation is not None and t.violation.label == f"ERROR {v['kind']}"
    assert t.violation.lane == "lifetime 4" and t.violation.slot == t.slots - 1


def test_protocol_timeline_has_a_lane_per_worker_attempt_and_job() -> None:
    doc = json.loads(CEX.read_text())
    t = from_protocol(doc, str(CEX))
    keys = [lane.key for lane in t.lanes]
    assert keys[0] == "system" and "worker w1" in keys and "job j1" in keys
    assert "attempt [job |-> j1, token |-> 1]" in keys
    assert len(t.marks) == len(doc["steps"]) == t.slots
    assert {m.kind for m in t.marks} >= {"commit", "fenced", "step"}
    assert t.violation is not None and t.violation.label == "action-property CommitIsFencedCAS"
    assert t.violation.lane == "attempt [job |-> j1, token |-> 1]"
    assert t.series[0].points[-1] == (15, 2, 2)  # token 2 installed, checkpoint 2 committed


@pytest.mark.parametrize("what", ["trace", "report", "counterexample"])
def test_show_writes_one_self_contained_page(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / f"{what}.json"
    if what == "trace":
        source.write_text(failing_trace().dumps())
    elif what == "report":
        source.write_text(json.dumps(report_of(failing_trace())))
    else:
        source.write_text(CEX.read_text())
    assert main(["show", str(source)]) == 0
    page_path = tmp_path / f"{what}.html"
    assert capsys.readouterr().out.strip() == str(page_path)
    page = page_path.read_text()
    assert not re.search(r"<(script|link|img)[^>]*(src|href)=", page)  # nothing to fetch
    assert not re.search(r"\burl\(\s*['\"]?https?:", page)
    data = embedded(page)
    assert data["violation"] is not None and data["lanes"]
    assert 'class="lane"' not in page  # lanes are drawn by the page's script, not the string


def test_a_trace_and_its_report_draw_the_same_timeline(tmp_path: Path) -> None:
    trace = failing_trace()
    (tmp_path / "t.json").write_text(trace.dumps())
    (tmp_path / "r.json").write_text(json.dumps(report_of(trace)))
    assert main(["show", str(tmp_path / "t.json")]) == 0
    assert main(["show", str(tmp_path / "r.json")]) == 0
    a, b = (embedded((tmp_path / n).read_text()) for n in ("t.html", "r.html"))
    assert {**a, "source": ""} == {**b, "source": ""}


def test_a_passing_run_has_no_violation_mark(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(generate(17, "valid").dumps())
    assert main(["show", str(tmp_path / "t.json"), "--out", str(tmp_path / "p.html")]) == 0
    data = embedded((tmp_path / "p.html").read_text())
    assert data["violation"] is None and data["status"] == "PASS"
    assert any(b["kind"] == "drain" for b in data["bands"])  # type: ignore[index]


def test_script_cannot_be_closed_by_the_data() -> None:
    doc = report_of(failing_trace())
    doc["violations"][0]["message"] = "</script><script>alert(1)</script>"
    page = render(from_report(doc, "x"))
    assert page.count("</script>") == 2  # the data block's and the drawing script's


def bad_report() -> str:
    doc = report_of(failing_trace())
    doc["attempts"][2]["events"] = [3, "x"]
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"a": 1, "a": 2}', "duplicate key"),
        ("[1, 2]", "not a worker-schedule-v1 trace or report, nor a remora-protocol"),
        ('{"implementation": "worker-schedule-v1", "version": 1}', "trace.toolchain"),
        (None, "report.attempts[2].events: expected [first, last)"),
        ('{"format": "remora-protocol-trace-v1", "steps": []}', "counterexample.steps: empty"),
    ],
)
def test_bad_input_is_one_line_and_exit_two(
    content: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.json"
    source.write_text(bad_report() if content is None else content)
    assert main(["show", str(source)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith(f"remora show: {source}: ")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "in.html").exists()


def test_missing_file_and_self_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    page = tmp_path / "page.html"
    page.write_text("{}")
    assert main(["show", str(page)]) == 2
    assert "would overwrite its input" in capsys.readouterr().err


def test_timeline_errors_are_typed() -> None:
    with pytest.raises(InvalidInput, match=r"report\.status"):
        from_report({"events": []}, "x")


def test_a_counterexample_draws_its_cause_over_time() -> None:
    """CommitIsFencedCAS: the stale attempt 1 commits although its lease expired and the
    job's token moved to 2 — the state rows show exactly that."""
    doc = json.loads((FIXTURES / "commit-is-fenced-cas.json").read_text())
    rows = {r.label: r.segments for r in from_protocol(doc, "cex.json").state_rows}
    assert [v for _, _, v in rows["leaseState[j1#1]"]] == ["NoLease", "LeaseLive", "LeaseExpired"]
    assert rows["currentToken[j1]"][-1][2] == "2"
    assert rows["committedAttempt[j1]"][-1][2] == "j1#1"
    assert all(seg[1] - seg[0] >= 0 for segs in rows.values() for seg in segs)
    assert sum(seg[1] - seg[0] + 1 for seg in rows["phase[j1]"]) == len(doc["steps"])
