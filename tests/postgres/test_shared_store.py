"""Several ``remora run`` processes on one PostgreSQL database.

* three members (``--member 0/3``, ``1/3``, ``2/3``) share the partitions; one is SIGKILLed
  mid-run; the other two finish their share and exit 0, the killed one resumes when run
  again — every record processed exactly once, no process exits with an error;
* three processes *without* a split race for every partition: a process that loses a
  partition to a newer epoch treats it as a revoke (logs it, keeps its other partitions)
  and exits 0 — on main two of them died on ``Fenced`` (exit 1).
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from remora.sim.checker import Checker
from remora.store.postgres import PostgresStore
from tests.common.processes import finish, remora_run, wait_for_progress
from tests.common.workload import generate, write_source_dir
from tests.postgres.services import pg_progress

pytestmark = pytest.mark.services

PARTITIONS = 6
PER_PARTITION = 300


def check_exactly_once(dsn: str, checker: Checker) -> None:
    store = PostgresStore(dsn)
    try:
        assert checker.final_problems(store.snapshot()) == []
    finally:
        store.close()


def test_three_members_share_one_store_and_a_killed_one_resumes(
    remora_scratch_database: str, tmp_path: Path
) -> None:
    records = generate(41, PARTITIONS, PER_PARTITION)
    checker = Checker(records, range(PARTITIONS))
    src = write_source_dir(tmp_path / "src", records, PARTITIONS)
    base = ["--dsn", remora_scratch_database, "--workers", "2", "--rebalance-every", "40", "--json"]
    procs = [remora_run(src, [*base, "--member", f"{i}/3"]) for i in range(3)]
    wait_for_progress(procs[1], pg_progress(remora_scratch_database), 120)
    procs[1].send_signal(signal.SIGKILL)
    results = [finish(p) for p in procs]
    assert results[1][0] == -signal.SIGKILL
    for code, out, err in (results[0], results[2]):
        assert (code, err) == (0, ""), (out, err)
    mine = [json.loads(results[i][1]) for i in (0, 2)]
    assert [[p["partition"] for p in doc["partitions"]] for doc in mine] == [[0, 3], [2, 5]]
    assert all(p["complete"] for doc in mine for p in doc["partitions"])

    code, out, err = finish(remora_run(src, [*base, "--member", "1/3"]))
    assert (code, err) == (0, ""), (out, err)
    assert [p["partition"] for p in json.loads(out)["partitions"]] == [1, 4]
    check_exactly_once(remora_scratch_database, checker)


def test_processes_racing_for_every_partition_all_exit_0(
    remora_scratch_database: str, tmp_path: Path
) -> None:
    records = generate(43, PARTITIONS, PER_PARTITION)
    checker = Checker(records, range(PARTITIONS))
    src = write_source_dir(tmp_path / "src", records, PARTITIONS)
    args = ["--dsn", remora_scratch_database, "--workers", "2", "--rebalance-every", "25", "--json"]
    procs: list[subprocess.Popen[str]] = []
    for _ in range(3):
        procs.append(remora_run(src, args))
    results = [finish(p) for p in procs]
    for code, out, err in results:
        assert code == 0, (out, err)
        for line in err.splitlines():  # only revokes are logged, never an error
            assert "taken over by another worker" in line, err
    check_exactly_once(remora_scratch_database, checker)


def test_member_must_be_i_of_n(tmp_path: Path) -> None:
    src = write_source_dir(tmp_path / "src", generate(1, 1, 3), 1)
    for bad in ("3/3", "1", "a/b", "0/0", "-1/2", "1/-2"):
        code, _out, err = finish(
            remora_run(src, ["--db", str(tmp_path / "s.db"), f"--member={bad}"])
        )
        assert code == 2 and "expected I/N" in err, (bad, err)
