"""``remora run`` when one partition cannot go on: the others still finish, and the end of
the run names the partition and the offset that stopped (exit 1).  On main the first such
error stopped every partition, and the message named neither.

The poison is planted through the processing hook (a decision that raises for one record),
because the real poison values are now quarantined or rejected at load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import remora.cli.run
from remora.cli import main
from remora.domain import AMENDMENTS, Decision, Processing
from remora.errors import InvalidInput
from remora.store import SqliteStore, StateStore
from tests.common.workload import generate, write_source_dir

POISON = (1, 9)


def poison_decide(*args: Any) -> Decision:
    record = args[0]
    if (record.partition, record.offset) == POISON:
        raise InvalidInput(f"the store cannot take offset {record.offset}")
    return AMENDMENTS.decide(*args)


@pytest.mark.parametrize("workers", [1, 3])
def test_one_partition_stops_the_others_finish_and_the_summary_names_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: int,
) -> None:
    records = generate(5, 3, 50)
    assert any((r.partition, r.offset) == POISON and r.visible for r in records)
    src = write_source_dir(tmp_path / "src", records, 3)
    db = tmp_path / "state.sqlite3"

    def poisoned(args: Any, **kwargs: Any) -> StateStore:
        return SqliteStore(db, processing=Processing(AMENDMENTS.key, poison_decide))

    monkeypatch.setattr(remora.cli.run, "open_store", poisoned)
    code = main(["run", str(src), "--db", str(db), "--workers", str(workers), "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    doc = json.loads(out)
    assert [(s["partition"], s["offset"]) for s in doc["stopped"]] == [POISON]
    assert "the store cannot take offset 9" in doc["stopped"][0]["error"]
    complete = {p["partition"]: p["complete"] for p in doc["partitions"]}
    assert complete == {0: True, 1: False, 2: True}
    assert "partition 1 stopped at offset 9: InvalidInput" in err
    assert err.strip().splitlines()[-1].startswith("remora run: stopped: partition 1 at offset 9")
