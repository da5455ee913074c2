"""Source log, fetch cursors and the JSONL directory format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import InvalidInput, SourceError, Unseeked
from remora.source import FetchCursors, MemorySourceLog, load_source_dir, parse_source_line


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
