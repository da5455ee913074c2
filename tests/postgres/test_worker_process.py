"""Real worker processes on PostgreSQL: SIGKILLed mid-run, or interrupted (SIGINT/SIGTERM),
then a replacement process takes over from the durable frontiers.  The final outbox and
view must equal the oracle's: nothing lost, nothing duplicated."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psycopg
import pytest

from remora.sim.checker import Checker
from remora.store.postgres import PostgresStore
from tests.common.processes import finish, interrupt, remora_run
from tests.common.workload import generate, write_source_dir
from tests.postgres.services import pg_progress

pytestmark = pytest.mark.services

PARTITIONS = 4
PER_PARTITION = 400


def open_transactions(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'remora' AND state <> 'idle'"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name
)
def test_worker_process_stopped_mid_run_then_replaced(
    remora_scratch_database: str, tmp_path: Path, sig: signal.Signals
) -> None:
    records = generate(31, PARTITIONS, PER_PARTITION)
    checker = Checker(records, range(PARTITIONS))
    src = write_source_dir(tmp_path / "src", records, PARTITIONS)
    args = ["--dsn", remora_scratch_database, "--workers", "4", "--rebalance-every", "150"]

    code, out, err = interrupt(
        remora_run(src, args), pg_progress(remora_scratch_database), 150, sig
    )
    if sig is signal.SIGKILL:
        assert code == -signal.SIGKILL
    else:
        assert code == 1 and err.count("\n") == 1 and f"interrupted ({sig.name})" in err, err
    store = PostgresStore(remora_scratch_database)
    try:
        middle = store.snapshot()
        assert checker.problems(middle) == []
        assert checker.final_problems(middle) != [], "the worker was not stopped mid-run"
        epochs = {r.partition: r.epoch for r in middle.partitions}

        code, out, err = finish(remora_run(src, [*args, "--json"]))
        assert (code, err) == (0, ""), out
        doc = json.loads(out)
        assert all(p["complete"] for p in doc["partitions"])
        final = store.snapshot()
        assert checker.final_problems(final) == []
        # The replacement took over with newer epochs, from the durable frontiers.
        assert all(r.epoch > epochs.get(r.partition, 0) for r in final.partitions)
        assert doc["processed"] == sum(1 for r in records if r.visible) - (
            len(middle.outbox) + len(middle.quarantine)
        )
    finally:
        store.close()
    assert open_transactions(remora_scratch_database) == 0  # the killed worker's sessions are gone
