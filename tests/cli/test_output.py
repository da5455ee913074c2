"""The CLI's shared output writer: atomic, and a failed write leaves nothing behind."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remora.cli import main
from remora.cli.common import write_json
from remora.errors import InvalidInput

Writer = Callable[[Path, Any], object]


def leaky_write_json(path: Path, doc: Any) -> None:
    """Planted: the explorer's former writer, which made its temporary file first and
    never removed it when writing failed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def leftovers_after_failures(tmp_path: Path, write: Writer) -> list[str]:
    """Files a writer leaves behind when the document cannot be encoded, and when the
    target cannot be replaced (it is a directory)."""
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(TypeError):
        write(out / "summary.json", {"not json": object()})
    (out / "taken.json").mkdir()
    with pytest.raises((OSError, InvalidInput)):  # the writer refuses: OutputError
        write(out / "taken.json", {"ok": 1})
    return sorted(p.name for p in out.iterdir() if p.name != "taken.json")


def test_write_json_is_atomic_and_leaves_nothing_on_error(tmp_path: Path) -> None:
    target = write_json(tmp_path / "deep" / "doc.json", {"a": [1, 2]}, parents=True)
    assert json.loads(target.read_text()) == {"a": [1, 2]}
    assert target.read_text().endswith("]\n}\n")
    assert leftovers_after_failures(tmp_path, write_json) == []


def test_the_former_writer_leaked_temporary_files(tmp_path: Path) -> None:
    assert leftovers_after_failures(tmp_path, leaky_write_json) != []


def test_explore_rejects_bad_worker_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["explore", "--config", "tiny", "--workers", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--workers: must be at least 1" in err
