"""``remora show DIR --db FILE`` judges a recorded job run with its target's staging: a
stage write that took effect but whose record the worker never wrote (killed between the
write and the record) is completed from the stage directory, not taken for an invention."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from remora.cli import main

REPO = Path(__file__).resolve().parents[2]


def status_of(page: Path) -> str:
    m = re.search(
        r'<script type="application/json" id="remora-timeline">(.*?)</script>', page.read_text()
    )
    assert m is not None
    return str(json.loads(m.group(1).replace("<\\/", "</"))["status"])


def test_an_unrecorded_stage_write_is_completed_from_the_stage_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO))  # examples.jobs.app
    db, record = tmp_path / "jobs.sqlite3", tmp_path / "rec"
    stores = ["--db", str(db), "--record", str(record)]
    assert main(["jobs", "submit", "greet", *stores, "--payload", '{"name": "Ada"}']) == 0
    assert main(["jobs", "worker", *stores, "--app", "examples.jobs.app", "--until-idle"]) == 0
    show = ["show", str(record), "--db", str(db), "--out"]
    assert main([*show, str(tmp_path / "whole.html")]) == 0
    assert status_of(tmp_path / "whole.html") == "REFINES"
    dropped = 0
    for path in record.glob("*.jsonl"):
        lines = path.read_text().splitlines()
        kept = [ln for ln in lines if '"action": "AdvanceAttempt"' not in ln]
        dropped += len(lines) - len(kept)
        path.write_text("".join(ln + "\n" for ln in kept))
    assert dropped == 1
    assert main([*show, str(tmp_path / "completed.html")]) == 0
    assert status_of(tmp_path / "completed.html") == "REFINES"
    # planted: without the staging the same recording has a step no spec step explains
    shutil.rmtree(db.with_name(db.name + ".stage"))
    assert main([*show, str(tmp_path / "unstaged.html")]) == 0
    assert status_of(tmp_path / "unstaged.html") == "REJECTED"
