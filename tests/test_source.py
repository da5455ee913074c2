"""Source log, fetch cursors and the JSONL directory format."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import remora.source.files
from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import InvalidInput, SourceError, Unseeked
from remora.sim.checker import Checker
from remora.source import (
    FetchCursors,
    MemorySourceLog,
    SourceLog,
    load_source_dir,
    open_source_dir,
    parse_source_line,
)
from remora.store import MemoryStore
from remora.worker.group import WorkerGroup
from tests.common.workload import generate


def rec(offset: int, visible: bool = True, partition: int = 0) -> SourceRecord:
    return SourceRecord(partition, offset, visible, None, b"{}")


def test_fetch_skips_invisible_and_gaps_and_reports_idle() -> None:
    log = MemorySourceLog([rec(0), rec(1, False), rec(5), rec(9, False)])
    cursors = FetchCursors(log)
    with pytest.raises(Unseeked):
        cursors.fetch(0)
    cursors.seek(0, 0)
    assert cursors.fetch(0) == rec(0)
    assert cursors.fetch(0) == rec(5)
    assert cursors.position(0) == 6
    assert cursors.fetch(0) is None  # idle: only an invisible record is left
    assert log.end(0) == 10
    cursors.seek(0, 3)
    assert cursors.fetch(0) == rec(5)
    cursors.clear()
    assert cursors.position(0) is None


def test_validate_unknown_partition_fails() -> None:
    log = MemorySourceLog([rec(0)], partitions=[0, 2])
    ctx = Context(LogicalClock())
    log.validate(2, ctx)  # declared, even though empty
    assert log.end(2) == 0 and log.next_visible(2, 0) is None
    with pytest.raises(SourceError):
        log.validate(1, ctx)


def test_duplicate_offsets_rejected() -> None:
    with pytest.raises(InvalidInput):
        MemorySourceLog([rec(3), rec(3)])


def write(tmp_path: Path, name: str, lines: list[object]) -> None:
    (tmp_path / name).write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
    )


def test_load_source_dir_encodings(tmp_path: Path) -> None:
    write(
        tmp_path,
        "partition-0.jsonl",
        [
            {"offset": 0, "key": "k", "value": {"b": 1, "a": 2}},
            "",
            {"offset": 4, "visible": False, "value": "raw text"},
            {"offset": 5, "value_base64": "AP8=", "partition": 0},
        ],
    )
    write(tmp_path, "partition-2.jsonl", [])
    (tmp_path / "notes.txt").write_text("ignored")
    log = load_source_dir(tmp_path)
    assert log.partitions == (0, 2)
    assert [(r.offset, r.visible, r.key, r.value) for r in log.records(0)] == [
        (0, True, "k", b'{"a":2,"b":1}'),
        (4, False, None, b"raw text"),
        (5, True, None, b"\x00\xff"),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{", "not JSON"),
        ("[]", "JSON object"),
        ('{"offset": 0, "value": 1, "extra": 1}', "unknown field"),
        ('{"offset": -1, "value": 1}', "offset"),
        ('{"offset": true, "value": 1}', "offset"),
        ('{"offset": 0}', "exactly one"),
        ('{"offset": 0, "value": 1, "value_base64": ""}', "exactly one"),
        ('{"offset": 0, "value_base64": "***"}', "base64"),
        ('{"offset": 0, "value_base64": 5}', "must be a string"),
        ('{"offset": 0, "value": 1, "visible": 1}', "visible"),
        ('{"offset": 0, "value": 1, "key": 5}', "key"),
        ('{"offset": 0, "value": 1, "partition": 3}', "partition"),
    ],
)
def test_bad_lines_rejected_with_location(line: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as exc:
        parse_source_line(0, line, "f.jsonl:7")
    assert str(exc.value).startswith("f.jsonl:7: ")


def test_offsets_must_increase(tmp_path: Path) -> None:
    write(tmp_path, "partition-0.jsonl", [{"offset": 2, "value": 1}, {"offset": 2, "value": 1}])
    with pytest.raises(InvalidInput, match=r"partition-0\.jsonl:2: offset 2 is not increasing"):
        load_source_dir(tmp_path)


def test_empty_or_missing_dir_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no partition"):
        load_source_dir(tmp_path)
    with pytest.raises(InvalidInput, match="not a directory"):
        load_source_dir(tmp_path / "missing")


def test_unreadable_file_rejected(tmp_path: Path) -> None:
    (tmp_path / "partition-0.jsonl").write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidInput, match="cannot read"):
        load_source_dir(tmp_path)


# -- the streaming file source ------------------------------------------------------


def write_records(root: Path, records: list[SourceRecord], partitions: int, crlf: bool) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    ending = "\r\n" if crlf else "\n"
    for p in range(partitions):
        lines = []
        for i, r in enumerate(x for x in records if x.partition == p):
            doc = {
                "offset": r.offset,
                "visible": r.visible,
                "key": r.key,
                "value": r.value.decode(),
            }
            lines.append(json.dumps(doc))
            if i % 7 == 3:
                lines.append("   ")  # blank lines are skipped
        (root / f"partition-{p}.jsonl").write_bytes("".join(x + ending for x in lines).encode())
    return root


def disagreements(log: SourceLog, reference: MemorySourceLog, positions: list[int]) -> list[str]:
    """Positions (asked in this order, per partition) where ``log`` answers differently."""
    found = []
    for p in reference.partitions:
        for position in positions:
            got, want = log.next_visible(p, position), reference.next_visible(p, position)
            if got != want:
                found.append(f"partition {p} at {position}: {got} != {want}")
    return found


def positions(seed: int, end: int) -> list[int]:
    """Forward runs (as a fetch cursor asks), jumps back (a new owner at the durable
    frontier), and positions past the end."""
    rng = random.Random(seed)
    out, here = [], 0
    for _ in range(300):
        roll = rng.random()
        here = rng.randrange(end + 3) if roll < 0.15 else here + rng.randrange(1, 3)
        out.append(min(here, end + 2))
    return out


@pytest.mark.parametrize("crlf", [False, True])
@pytest.mark.parametrize("every", [1, 3, 1024])
def test_file_source_answers_like_the_loaded_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crlf: bool, every: int
) -> None:
    monkeypatch.setattr(remora.source.files, "INDEX_EVERY", every)
    records = generate(5, 3, 120)
    root = write_records(tmp_path / "src", records, 3, crlf)
    reference = load_source_dir(root)
    assert reference.all_records() == records
    with open_source_dir(root) as log:
        assert log.partitions == (0, 1, 2)
        assert [log.end(p) for p in range(4)] == [reference.end(p) for p in range(4)]
        end = max(reference.end(p) for p in range(3))
        assert disagreements(log, reference, positions(1, end)) == []
        ctx = Context(LogicalClock())
        log.validate(2, ctx)
        with pytest.raises(SourceError):
            log.validate(3, ctx)
        assert log.next_visible(3, 0) is None


def test_file_source_keeps_no_records(tmp_path: Path) -> None:
    """What it holds per partition is one index entry per INDEX_EVERY records."""
    records = generate(2, 1, 5000, faulty=False)
    with open_source_dir(write_records(tmp_path / "src", records, 1, False)) as log:
        cursors = FetchCursors(log)
        cursors.seek(0, 0)
        fetched = 0
        while cursors.fetch(0) is not None:
            fetched += 1
        assert fetched == sum(r.visible for r in records)
        held = log._files[0]
        assert len(held.index) == 1 + len(records) // remora.source.files.INDEX_EVERY


class NeverRewinds(remora.source.files._PartitionFile):
    """Planted: a seek back is served from the current reading position."""

    def next_visible(self, position: int) -> SourceRecord | None:
        self.floor = min(self.floor, position)
        return super().next_visible(position)


def test_a_reader_that_cannot_seek_back_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = generate(5, 1, 100)
    root = write_records(tmp_path / "src", records, 1, False)
    monkeypatch.setattr(remora.source.files, "_PartitionFile", NeverRewinds)
    with open_source_dir(root) as log:
        assert disagreements(log, load_source_dir(root), positions(2, 120)) != []


def test_file_source_rejects_what_the_loader_rejects(tmp_path: Path) -> None:
    write(tmp_path, "partition-0.jsonl", [{"offset": 2, "value": 1}, {"offset": 2, "value": 1}])
    with pytest.raises(InvalidInput, match=r"partition-0\.jsonl:2: offset 2 is not increasing"):
        open_source_dir(tmp_path)
    (tmp_path / "partition-0.jsonl").write_bytes(b'{"offset": 0, "value": 1}\n\xff\n')
    with pytest.raises(InvalidInput, match=r"partition-0\.jsonl:2: cannot read"):
        open_source_dir(tmp_path)
    with pytest.raises(InvalidInput, match="not a directory"):
        open_source_dir(tmp_path / "missing")


def test_a_group_over_the_file_source_processes_everything_once(tmp_path: Path) -> None:
    records = generate(9, 4, 150)
    root = write_records(tmp_path / "src", records, 4, False)
    store = MemoryStore()
    with open_source_dir(root) as log:
        stats = WorkerGroup(store, log, 3, rebalance_every=7, batch=5).run()
    assert stats.errors == [] and stats.done and stats.rebalances > 0
    assert Checker(records, range(4)).final_problems(store.snapshot()) == []
