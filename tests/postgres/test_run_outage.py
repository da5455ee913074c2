"""``remora run`` on PostgreSQL through a store outage (issue 25): a link cut of 15 s, and
one of 45 s scaled down (9 s under a 12 s budget: the same 3/4 of the budget), with the
default workers; the run says once that it waits, resumes, and finishes every record
exactly once.  Past ``--outage-budget``: one line and the table, exit 1, and a rerun
finishes.  Before: 3 calls in about 0.3 s, then every partition stopped (or a traceback from
the progress read) — a 15 s cut ended the run without its table.

The cut is a TCP proxy (:class:`tests.postgres.proxy.PgProxy`) that closes every connection
and drops new ones; the test waits on the durable progress, not on the clock, to cut."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import pytest

from remora.sim.checker import Checker
from remora.store.postgres import PostgresStore
from tests.cli.docs_lines import assert_documented
from tests.common.processes import finish, remora_run, wait_for_progress
from tests.common.workload import generate, write_source_dir
from tests.postgres.proxy import PgProxy
from tests.postgres.services import pg_progress

PARTITIONS = 3
RECORDS = 800


@pytest.fixture
def proxy(remora_scratch_database: str) -> Iterator[PgProxy]:
    p = PgProxy(remora_scratch_database)
    try:
        yield p
    finally:
        p.close()


def _cut(proc: subprocess.Popen[str], dsn: str, proxy: PgProxy, seconds: float) -> None:
    wait_for_progress(proc, pg_progress(dsn), 100)
    proxy.down()
    time.sleep(seconds)  # the outage itself: its length is what is tested
    proxy.up()


def _exactly_once(records: object, dsn: str) -> None:
    store = PostgresStore(dsn)
    try:
        checker = Checker(records, range(PARTITIONS))  # type: ignore[arg-type]
        assert checker.final_problems(store.snapshot()) == []
    finally:
        store.close()


@pytest.mark.parametrize(
    ("cut", "budget"), [(15.0, 60.0), (9.0, 12.0)], ids=["15s-of-60s", "45s-of-60s-scaled"]
)
def test_a_cut_within_the_budget_waits_resumes_and_finishes(
    tmp_path: object, remora_scratch_database: str, proxy: PgProxy, cut: float, budget: float
) -> None:
    from pathlib import Path

    records = generate(11, PARTITIONS, RECORDS)
    src = write_source_dir(Path(str(tmp_path)) / "src", records, PARTITIONS)
    args = ["--dsn", proxy.dsn(remora_scratch_database), "--workers", "2", "-q"]
    proc = remora_run(src, args, "--outage-budget", str(budget))
    _cut(proc, remora_scratch_database, proxy, cut)
    code, out, err = finish(proc)
    assert code == 0, (out, err)
    waiting = [line for line in err.splitlines() if "waiting for the store" in line]
    assert len(waiting) == 1, err
    assert f"retrying for up to {budget:g} s (--outage-budget)" in waiting[0]
    assert "the store is back after" in err and "Traceback" not in err, err
    if budget == 60:  # the lines docs/cli.md shows are the ones printed
        back = next(line for line in err.splitlines() if "the store is back" in line)
        assert_documented("cli.md", "remora run: waiting", waiting[0])
        assert_documented(
            "cli.md", "remora run: the store is back", re.sub(r"[0-9.]+ s;", "15.2 s;", back)
        )
    _exactly_once(records, remora_scratch_database)


def test_past_the_budget_one_line_and_the_table_then_a_rerun_finishes(
    tmp_path: object, remora_scratch_database: str, proxy: PgProxy
) -> None:
    from pathlib import Path

    records = generate(12, PARTITIONS, RECORDS)
    src = write_source_dir(Path(str(tmp_path)) / "src", records, PARTITIONS)
    args = ["--dsn", proxy.dsn(remora_scratch_database), "--workers", "2", "-q"]
    proc = remora_run(src, args, "--outage-budget", "3")
    wait_for_progress(proc, pg_progress(remora_scratch_database), 100)
    proxy.down()
    code, out, err = finish(proc)
    proxy.up()
    assert code == 1, (out, err)
    lines = [line for line in err.splitlines() if "waiting for the store" not in line]
    assert len(lines) == 1, err
    assert (
        "the store stayed unavailable past the outage budget (3 s, --outage-budget)" in (lines[0])
    ), err
    assert "partition  epoch  frontier  outbox  quarantine  complete" in out, out
    assert_documented("cli.md", "remora run: the store stayed", lines[0].replace("(3 s", "(60 s"))

    code, out, err = finish(remora_run(src, args))
    assert (code, err) == (0, ""), out
    _exactly_once(records, remora_scratch_database)
