"""A partition file that changes while ``remora run`` reads it (a line corrupted or cut
short after the run validated the files): only that partition stops, the error names
``partition-N.jsonl:LINE (byte B)``, the other partitions finish, exit 1 with the table.
Before: the whole run stopped (untouched partitions included) and the message gave only
``partition-1.jsonl@BYTE``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import remora.cli.run
from remora.cli import main
from remora.source import FileSourceLog, open_source_dir
from remora.store import SqliteStore
from tests.cli.docs_lines import assert_documented
from tests.common.workload import generate, write_source_dir

BAD_LINE = 20  # 1-based line number of partition-1.jsonl that changes mid-run


def _corrupt(file: Path) -> int:
    """Overwrite line BAD_LINE with garbage of the same length; returns its byte offset."""
    data = file.read_bytes()
    lines = data.splitlines(keepends=True)
    start = sum(len(x) for x in lines[: BAD_LINE - 1])
    garbage = b"{" + b"x" * (len(lines[BAD_LINE - 1]) - 2) + b"\n"
    file.write_bytes(data[:start] + garbage + data[start + len(garbage) :])
    return start


def _truncate(file: Path) -> int:
    """Cut the file in the middle of line BAD_LINE; returns that line's byte offset."""
    data = file.read_bytes()
    lines = data.splitlines(keepends=True)
    start = sum(len(x) for x in lines[: BAD_LINE - 1])
    file.write_bytes(data[: start + len(lines[BAD_LINE - 1]) // 2])
    return start


@pytest.mark.parametrize("change", [_corrupt, _truncate], ids=["corrupt", "truncated"])
@pytest.mark.parametrize("workers", [1, 3])
def test_a_line_changed_mid_run_stops_only_its_partition(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[Path], int],
    workers: int,
) -> None:
    records = generate(7, 3, 60)
    src = write_source_dir(tmp_path / "src", records, 3)
    db = tmp_path / "state.sqlite3"
    where: list[int] = []

    def opened_then_changed(path: Any) -> FileSourceLog:
        log = open_source_dir(path)  # validated whole, as the run does
        where.append(change(Path(path) / "partition-1.jsonl"))
        return log

    monkeypatch.setattr(remora.cli.run, "open_source_dir", opened_then_changed)
    code = main(["run", str(src), "--db", str(db), "--workers", str(workers), "--json"])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert out, err
    doc = json.loads(out)
    complete = {p["partition"]: p["complete"] for p in doc["partitions"]}
    assert complete == {0: True, 1: False, 2: True}, err
    assert [s["partition"] for s in doc["stopped"]] == [1]
    assert f"partition-1.jsonl:{BAD_LINE} (byte {where[0]})" in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert err.strip().splitlines()[-1].startswith("remora run: stopped: partition 1 at offset")
    if change is _corrupt:  # the lines docs/cli.md shows are the ones printed
        first, last = err.strip().splitlines()
        assert_documented("cli.md", "remora run: partition", first)
        assert_documented("cli.md", "remora run: stopped:", last)
    # Everything before the bad line was processed, exactly once (the frontier stops there).
    store = SqliteStore(db)
    frontier = store.backend.partition_row(1).frontier
    store.close()
    good = [r for r in records if r.partition == 1][: BAD_LINE - 1]
    assert frontier == [r for r in good if r.visible][-1].offset + 1
