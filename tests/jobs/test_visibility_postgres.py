"""Status, history and the dashboard's reads on PostgreSQL: times on the server's clock
(``clock_timestamp()``, read with the job's locked read), the log's facts, a delayed job
due on that clock, the aggregate and failure reads — with Redis never reached."""

from __future__ import annotations

import datetime
import json

import pytest

from remora.clock import EpochClock
from remora.jobs.durable import open_postgres
from tests.jobs.visibility import APP, FAST, ok

pytestmark = pytest.mark.services

DOWN_REDIS = ("--redis", "redis://127.0.0.1:9/0")  # nothing listens: never reached


def seconds(iso: str | None) -> float:
    assert iso is not None
    return datetime.datetime.fromisoformat(iso).timestamp()


def test_status_history_and_the_dashboards_reads_on_postgres(remora_scratch_database: str) -> None:
    dsn = ("--dsn", remora_scratch_database)
    ok("submit", "flaky", *dsn, "--config", FAST, "--id", "f")
    ok("submit", "doomed", *dsn, "--id", "d", "--queue", "bulk")
    ok("submit", "quick", *dsn, "--id", "later", "--in", "0.5", "--priority", "3")
    ok("worker", *dsn, "--app", APP, "--until-idle", "--queue", "default", "--queue", "bulk",
       "--id", "w-pg", "--log-format", "none")  # fmt: skip
    rows = {r["id"]: r for r in json.loads(ok("status", *dsn, *DOWN_REDIS, "--json"))["jobs"]}
    f, d, later = rows["f"], rows["d"], rows["later"]
    assert (f["phase"], f["attempt"], f["worker"]) == ("Succeeded", 2, "w-pg")
    assert seconds(f["submitted"]) <= seconds(f["started"]) <= seconds(f["finished"])
    assert (d["phase"], d["queue"]) == ("Failed", "bulk")
    assert seconds(later["due"]) - seconds(later["submitted"]) == pytest.approx(0.5, abs=0.002)
    assert seconds(later["started"]) >= seconds(later["due"]) and later["priority"] == 3
    h = json.loads(ok("history", *dsn, *DOWN_REDIS, "f", "--json"))
    assert [a["end"] for a in h["attempts"]] == ["retryable", "succeeded"]
    assert all(a["activated"] and a["ran"] is not None for a in h["attempts"])

    durable = open_postgres(remora_scratch_database)
    try:
        durable.clock = EpochClock()  # unused: the server has the clock
        assert durable.counts() == {
            ("Succeeded", "default"): 2,
            ("Failed", "bulk"): 1,
        }
        failures = durable.recent_failures(10)
        assert {(e.key, e.action) for e in failures} == {
            ("f", "AcceptRetryableFailureWithBudget"),
            ("d", "AcceptPermanentFailure"),
        }
        assert failures[0].at >= failures[1].at  # newest first
        assert all(e.at > 0 and e.facts.get("error") for e in failures)
        assert [w for w, up, _ in durable.incarnations()] == ["w-pg"]
        assert durable.clock_now() >= seconds(f["finished"])
    finally:
        durable.close()
