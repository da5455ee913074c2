"""``remora jobs dashboard`` in a real browser (issue 24 item 5): a worker runs a job that
takes a while beside one that failed, the dashboard serves the deployment read from the
durable store, and headless Chromium loads it at 1000 px — the test reads the *rendered*
text of the page's sections and the layout facts the page measured itself
(``data-visible``: the sections laid out in the window; ``data-overflow``), and requires the
running job (with its worker and progress) and the failure to be there, visible, and
nothing wider than the window.  Planted: pages that overflow, hide the failures, or lose
the running job are rejected by the same check."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.common.browser import dump_dom, screenshot
from tests.jobs.visibility import APP, ENV, FAST, REPO, jobs, started, status, stop

WINDOW = (1000, 900)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A worker running ``crawl`` (30 s) after ``doomed`` failed and ``flaky`` succeeded on
    its retry; a bulk job nobody serves; a job due tomorrow; the dashboard's URL."""
    db = str(tmp_path_factory.mktemp("dashboard") / "jobs.sqlite3")
    submits = [
        ["doomed", "--id", "nightly-export", "--config", FAST],
        ["flaky", "--id", "resize-photo-42"],
        ["crawl", "--id", "crawl-site", "--payload", '{"seconds": 30}', "--priority", "-1"],
        ["greet", "--id", "report-2026", "--queue", "bulk", "--payload", '{"name": "B"}'],
        ["greet", "--id", "tomorrow", "--in", "86400", "--payload", '{"name": "C"}'],
    ]
    for args in submits:
        out = jobs("submit", args[0], "--db", db, *args[1:])
        assert out.returncode == 0, out.stderr
    worker = subprocess.Popen(
        [sys.executable, "-m", "remora", "jobs", "worker", "--db", db, "--app", APP,
         "--id", "worker-a", "--concurrency", "2", "--log-format", "none", "--grace", "0"],
        cwd=REPO,
        env=ENV,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    dashboard = None
    try:
        deadline = time.monotonic() + 120
        while True:
            now = status(db)
            crawl = now["crawl-site"]
            progress = crawl["progress"]
            assert isinstance(progress, dict)
            if (
                now["nightly-export"]["phase"] == "Failed"
                and now["resize-photo-42"]["phase"] == "Succeeded"
                and crawl["phase"] == "Running"
                and progress["checkpoint"]
            ):
                break
            assert time.monotonic() < deadline, now
            time.sleep(0.2)
        dashboard, url = started(
            ["dashboard", "--db", db, "--port", "0", "--refresh", "30"],
            r"(http://127\.0\.0\.1:\d+/)",
        )
        yield db, url
    finally:
        if dashboard is not None:
            stop(dashboard)
        stop(worker)


def section_text(dom: str, name: str) -> str:
    """The rendered text of a section of the page (tags dropped, entities decoded)."""
    m = re.search(rf'<section id="{name}">(.*?)</section>', dom, re.S)
    if m is None:
        return ""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", m.group(1))).split())


def body_facts(dom: str) -> dict[str, str]:
    body = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1) if body else ""))


def page_problems(dom: str) -> list[str]:
    """What keeps the page from showing the deployment (empty: it shows it)."""
    facts = body_facts(dom)
    if facts.get("data-rendered") != "true":
        return ["the page's script did not run"]
    problems = []
    if facts.get("data-overflow") != "none":
        problems.append(f"overflow: {facts.get('data-overflow')}")
    visible = facts.get("data-visible", "").split()
    running = section_text(dom, "running")
    if "running" not in visible or not re.search(r"crawl-site .*Running.* worker-a", running):
        problems.append("the running job is not shown with its worker")
    elif not re.search(r"\d+/100", running):
        problems.append("the running job shows no progress")
    failures = section_text(dom, "failures")
    if "failures" not in visible or "this job can never succeed" not in failures:
        problems.append("the failure is not shown")
    if "workers" not in visible or "worker-a up" not in section_text(dom, "workers"):
        problems.append("the worker is not shown up")
    return problems


def test_the_dashboard_shows_the_running_job_and_the_failure(
    deployment: tuple[str, str], tmp_path: Path
) -> None:
    _, url = deployment
    dom = dump_dom(url, WINDOW)
    assert page_problems(dom) == []
    assert "<section" not in urllib.request.urlopen(url + "health", timeout=10).read().decode()
    phases = section_text(dom, "phases")
    assert re.search(r"bulk 1 0 0 0 0 0 0 1", phases), phases  # the unserved bulk job
    waiting = section_text(dom, "waiting")
    assert "report-2026" in waiting and "tomorrow" in waiting
    # a job links to its attempt history
    assert 'href="/job/resize-photo-42"' in dom
    shot = screenshot(url, tmp_path / "dashboard.png", WINDOW)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_a_jobs_history_page(deployment: tuple[str, str]) -> None:
    _, url = deployment
    dom = dump_dom(url + "job/resize-photo-42", WINDOW)
    facts = body_facts(dom)
    assert facts.get("data-rendered") == "true" and facts.get("data-overflow") == "none"
    attempts = section_text(dom, "attempts")
    assert re.search(r" why 1 worker-a .* retryable failure: first attempts", attempts), attempts
    assert re.search(r" 2 worker-a .* success succeeded$", attempts), attempts
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url + "job/nope", timeout=10)
    assert info.value.code == 404


def planted(deployment: tuple[str, str], tmp_path: Path, old: str, new: str) -> str:
    """The served page with ``old`` replaced by ``new``, loaded from a file."""
    _, url = deployment
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    assert old in text, old
    page = tmp_path / "planted.html"
    page.write_text(text.replace(old, new))
    return dump_dom(page, WINDOW)


def test_planted_pages_the_check_rejects(deployment: tuple[str, str], tmp_path: Path) -> None:
    wide = planted(deployment, tmp_path, "table { width: 100%;", "table { width: 1600px;")
    assert any("wider than the window" in p for p in page_problems(wide))
    hidden = planted(deployment, tmp_path, "a { color:", "#failures { display: none; } a { color:")
    assert page_problems(hidden) == ["the failure is not shown"]
    lost = planted(deployment, tmp_path, '<section id="running">', '<section id="gone">')
    assert "the running job is not shown with its worker" in page_problems(lost)
    broken = planted(deployment, tmp_path, '"use strict";', '"use strict"; throw new Error("x");')
    assert page_problems(broken) == ["the page's script did not run"]
