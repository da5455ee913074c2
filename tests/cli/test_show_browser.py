"""``remora show`` pages in a real browser: headless Chromium loads the page, its own script
draws the lanes, marks, interleaves and the violation, and the live DOM is read back
(``--dump-dom``, after the script ran) — including the size the browser's layout gave the
drawing.  A page whose script does not run, or does not draw the violation, is caught."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest

from remora.cli import main
from remora.sim.generate import generate
from remora.sim.report import run_trace
from tests.common.browser import dump_dom, screenshot
from tests.common.ledger import WRONG, ledger_model, trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "show"


def data_of(page: str) -> dict[str, object]:
    m = re.search(r'<script type="application/json" id="remora-timeline">(.*?)</script>', page)
    assert m is not None
    return json.loads(m.group(1).replace("<\\/", "</"))  # type: ignore[no-any-return]


def drawing_problems(dom: str, data: dict[str, object]) -> list[str]:
    """What the page's script failed to draw (empty when everything is on the page)."""
    problems = []
    body = re.search(r"<body([^>]*)>", dom)
    attrs_ = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1) if body else ""))
    if attrs_.get("data-rendered") != "true":
        return ["the page's script did not finish drawing"]
    lanes = data["lanes"]
    assert isinstance(lanes, list)
    drawn = [html.unescape(k) for k in re.findall(r'<g class="lane" data-lane="([^"]+)">', dom)]
    if drawn != [lane["key"] for lane in lanes] or attrs_["data-lanes"] != str(len(lanes)):
        problems.append(f"lanes drawn {drawn}, expected {[lane['key'] for lane in lanes]}")
    marks = data["marks"]
    assert isinstance(marks, list)
    if len(re.findall(r'<g class="io" data-kind="', dom)) != len(marks):
        problems.append("not every mark was drawn")
    width, height = (int(n) for n in attrs_.get("data-drawn", "0x0").split("x"))
    if width < 22 * int(str(data["slots"])) or height < 38 * len(lanes):
        problems.append(f"the drawing is {width}x{height} px, too small for its lanes and slots")
    if data["violation"] is not None:
        violation = data["violation"]
        assert isinstance(violation, dict)
        if not re.search(rf'<g id="violation" data-slot="{violation["slot"]}">', dom):
            problems.append("no violation mark")
        elif 'class="violation-mark"' not in dom:
            problems.append("the violation group has no mark")
    for link in data["links"]:  # type: ignore[attr-defined]
        if link["target"] is not None and 'class="interleave has-replacement' not in dom:
            problems.append("a replacement interleave is not drawn")
            break
    return problems


def failing_page(tmp_path: Path) -> Path:
    trace = generate(4, "valid")
    trace = attrs.evolve(
        trace, config=attrs.evolve(trace.config, mutation="skip-cancel-check-after-wakeup")
    )
    (tmp_path / "run.json").write_text(trace.dumps())
    assert main(["show", str(tmp_path / "run.json")]) == 0
    return tmp_path / "run.html"


def test_a_failing_run_is_drawn_with_its_lanes_and_violation(tmp_path: Path) -> None:
    page = failing_page(tmp_path)
    data = data_of(page.read_text())
    dom = dump_dom(page)
    assert drawing_problems(dom, data) == []
    assert '<g class="lane" data-lane="lifetime 4">' in dom
    assert re.search(r'<g class="interleave has-stop has-replacement" data-slot="\d+">', dom)
    assert '<g class="series" data-series="partition 0">' in dom


def test_a_counterexample_is_drawn(tmp_path: Path) -> None:
    source = tmp_path / "cex.json"
    source.write_text((FIXTURES / "commit-is-fenced-cas.json").read_text())
    assert main(["show", str(source)]) == 0
    page = tmp_path / "cex.html"
    dom = dump_dom(page)
    assert drawing_problems(dom, data_of(page.read_text())) == []
    assert '<g class="lane" data-lane="attempt [job |-&gt; j1, token |-&gt; 1]">' in dom


def test_planted_a_page_whose_script_fails_or_skips_the_violation(tmp_path: Path) -> None:
    page = failing_page(tmp_path)
    text = page.read_text()
    data = data_of(text)
    broken = tmp_path / "broken.html"
    broken.write_text(text.replace('"use strict";', '"use strict"; throw new Error("planted");'))
    assert drawing_problems(dump_dom(broken), data) == ["the page's script did not finish drawing"]
    blind = tmp_path / "blind.html"
    blind.write_text(text.replace("if (data.violation) {", "if (false) {"))
    assert drawing_problems(dump_dom(blind), data) == ["no violation mark"]


def test_a_screenshot_of_the_page(tmp_path: Path) -> None:
    shot = screenshot(failing_page(tmp_path), tmp_path / "shot.png")
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a drawing, not a blank page


# -- the first violation in words, and nothing overflowing, at 1000 px ---------------------

WINDOW = (1000, 900)


def processing_bug_page(tmp_path: Path) -> Path:
    """A user's own processing bug found by the oracle (the ledger's planted sign error)."""
    report = run_trace(trace(), processing=WRONG, model=ledger_model)
    assert report.failure == "ERROR outbox-mismatch"
    (tmp_path / "ledger.json").write_text(json.dumps(report.document))
    assert main(["show", str(tmp_path / "ledger.json")]) == 0
    return tmp_path / "ledger.html"


def counterexample_page(tmp_path: Path) -> Path:
    source = tmp_path / "cex.json"
    source.write_text((FIXTURES / "commit-is-fenced-cas.json").read_text())
    assert main(["show", str(source)]) == 0
    return tmp_path / "cex.html"


def finding_of(dom: str) -> dict[str, str]:
    """The summary panel's facts, as the browser rendered them."""
    m = re.search(r'<section class="finding" id="finding">(.*?)</section>', dom, re.S)
    assert m is not None, "no finding panel in the rendered page"
    pairs = re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", m.group(1), re.S)
    return {html.unescape(k): html.unescape(v) for k, v in pairs}


def layout_of(dom: str) -> dict[str, str]:
    body = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1) if body else ""))


@pytest.mark.parametrize(
    ("make", "wanted"),
    [
        (failing_page, {"property": "io-after-stop", "involved": "lifetime"}),
        (processing_bug_page, {"property": "outbox-mismatch", "expected": "", "observed": ""}),
        (counterexample_page, {"property": "CommitIsFencedCAS", "step": "AcceptSuccess"}),
    ],
    ids=["worker-trace", "processing-bug", "counterexample"],
)
def test_the_first_violation_is_stated_on_the_page_without_hovering(
    tmp_path: Path, make: Any, wanted: dict[str, str]
) -> None:
    page = make(tmp_path)
    source = page.read_text()
    dom = dump_dom(page, WINDOW)
    layout = layout_of(dom)
    assert layout.get("data-rendered") == "true"
    assert layout.get("data-finding") == "visible"  # on screen as the page opens
    assert layout.get("data-overflow") == "none", layout.get("data-overflow")
    facts = finding_of(dom)
    assert '<section class="finding"' not in source  # drawn by the page, read from the browser
    for key, part in wanted.items():
        assert key in facts and part in facts[key], (key, facts)
    if "expected" in wanted:
        assert facts["expected"] != facts["observed"]
    rows = data_of(source)["state_rows"]
    assert isinstance(rows, list)
    assert len(re.findall(r'<g class="state-row" data-row="', dom)) == len(rows)


def test_planted_a_page_that_hides_the_finding_or_overflows(tmp_path: Path) -> None:
    text = failing_page(tmp_path).read_text()
    hidden = tmp_path / "hidden.html"
    hidden.write_text(text.replace("section.finding {", "section.finding { display: none;"))
    assert layout_of(dump_dom(hidden, WINDOW)).get("data-finding") == "hidden"
    wide = tmp_path / "wide.html"
    wide.write_text(text.replace("header {", "header { min-width: 1600px;"))
    assert "wider than the window" in layout_of(dump_dom(wide, WINDOW)).get("data-overflow", "")
    clipped = tmp_path / "clipped.html"
    clipped.write_text(  # the violation's label drawn past the drawing's right edge
        text.replace("if (vlabel.getComputedTextLength() > room) {", "if (false) {").replace(
            "var vlabel = text(vg, vx + 13,", "var vlabel = text(vg, vx + 4000,"
        )
    )
    assert "svg text ERROR" in layout_of(dump_dom(clipped, WINDOW)).get("data-overflow", "")


# -- a recorded job run ---------------------------------------------------------------------


def recorded_run(tmp_path: Path) -> tuple[Path, Path]:
    """Two jobs (one retried) submitted and worked on SQLite with ``--record``."""
    db, record = tmp_path / "jobs.sqlite3", tmp_path / "rec"
    stores = ["--db", str(db), "--record", str(record)]
    assert main(["jobs", "submit", "greet", *stores, "--payload", '{"name": "Ada"}']) == 0
    assert main(["jobs", "submit", "flaky", *stores]) == 0
    worker = ["jobs", "worker", *stores, "--app", "examples.jobs.app", "--until-idle"]
    assert main(worker) == 0
    return db, record


def test_a_recorded_job_run_is_drawn_with_the_specs_verdict(tmp_path: Path) -> None:
    db, record = recorded_run(tmp_path)
    assert main(["show", str(record), "--db", str(db)]) == 0
    page = tmp_path / "rec.html"
    data = data_of(page.read_text())
    assert data["status"] == "REFINES" and data["violation"] is None
    dom = dump_dom(page, WINDOW)
    assert drawing_problems(dom, data) == []
    layout = layout_of(dom)
    assert layout.get("data-overflow") == "none", layout.get("data-overflow")
    assert "accepted:" in html.unescape(dom) and "behaviour of Remora.tla" in html.unescape(dom)
    lanes = [lane["key"] for lane in data["lanes"]]  # type: ignore[attr-defined,index]
    assert any(k.endswith(".reconciler") for k in lanes) and any(
        k.startswith("client") for k in lanes
    )
    assert len(re.findall(r'<rect class="bar attempt"', dom)) == 3  # greet 1, flaky 1 and 2


def test_planted_a_recording_the_spec_rejects(tmp_path: Path) -> None:
    """A recording with its reservations removed: the authorizations they allowed are no
    longer spec steps, and the page says so in words at the top."""
    db, record = recorded_run(tmp_path)
    for path in record.glob("*.jsonl"):
        lines = [ln for ln in path.read_text().splitlines() if '"action": "Reserve"' not in ln]
        path.write_text("\n".join(lines) + "\n")
    assert main(["show", str(record), "--db", str(db)]) == 0
    page = tmp_path / "rec.html"
    assert data_of(page.read_text())["status"] == "REJECTED"
    dom = dump_dom(page, WINDOW)
    assert layout_of(dom).get("data-finding") == "visible"
    assert "Remora.tla" in finding_of(dom)["property"]


def test_a_recording_without_its_stores_is_drawn_unchecked(tmp_path: Path) -> None:
    _, record = recorded_run(tmp_path)
    assert main(["show", str(record)]) == 0
    data = data_of((tmp_path / "rec.html").read_text())
    assert data["status"] == "RECORDED"
    assert any("not checked" in v for _, v in data["summary"])  # type: ignore[attr-defined]
