"""Issue 22's visibility at the command line: ``remora jobs status`` (times on the durable
store's clock, elapsed, progress, queue; 100 columns; ``--json``), ``remora jobs history``
(every attempt and why it ended), delayed jobs, named queues and priorities through
``submit`` and ``worker``, and the schema an older database is upgraded to."""

from __future__ import annotations

import datetime
import json
import sqlite3
import time
from pathlib import Path

import pytest

from remora.jobs.durable import open_sqlite
from tests.jobs.first_release import FIRST_RELEASE_JOB, first_release_tables
from tests.jobs.visibility import FAST, jobs, ok, status, work


def seconds(iso: str | None) -> float:
    assert iso is not None and iso.endswith("Z"), iso
    return datetime.datetime.fromisoformat(iso).timestamp()


@pytest.fixture
def worked(tmp_path: Path) -> str:
    """greet (succeeds), flaky (fails once, then succeeds), doomed (fails for good), count
    (checkpoints), all run to the end by one worker."""
    db = str(tmp_path / "j.sqlite3")
    ok("submit", "greet", "--db", db, "--config", FAST, "--id", "g", "--payload", '{"name": "A"}')
    ok("submit", "flaky", "--db", db, "--id", "f")
    ok("submit", "doomed", "--db", db, "--id", "d")
    ok("submit", "count", "--db", db, "--id", "c", "--payload", '{"to": 4}')
    work(db, extra=("--id", "w-vis"))
    return db


def test_status_shows_times_elapsed_progress_and_the_current_attempt(worked: str) -> None:
    before = time.time()
    rows = status(worked)
    f = rows["f"]
    assert (f["phase"], f["attempt"], f["attempts"], f["max_attempts"]) == ("Succeeded", 2, 2, 3)
    assert (f["worker"], f["queue"], f["priority"], f["error"]) == ("w-vis", "default", 0, None)
    submitted, started, finished = (seconds(f[k]) for k in ("submitted", "started", "finished"))
    assert submitted <= started <= seconds(f["attempt_started"]) <= finished <= before
    assert before - submitted < 600  # dates on the epoch clock, not a monotonic origin
    assert f["elapsed"] == pytest.approx(finished - started, abs=0.002)
    assert f["progress"] == {"checkpoint": 100, "max": 100, "staged": None}
    assert rows["c"]["progress"]["checkpoint"] == 100 and rows["c"]["result"] is not None
    d = rows["d"]
    assert d["phase"] == "Failed" and "never succeed" in d["error"] and d["finished"]
    assert rows["g"]["result"] == "hello, A" and rows["g"]["due"] is None


def test_status_fits_100_columns_and_shows_a_job_in_full(tmp_path: Path) -> None:
    db = str(tmp_path / "j.sqlite3")
    long_id = "a-job-with-a-rather-long-identifier-" + "x" * 20
    ok("submit", "greet", "--db", db, "--id", long_id, "--queue", "a-long-queue-name-here")
    ok("submit", "doomed", "--db", db, "--id", "d", "--priority", "7")
    work(db, "a-long-queue-name-here", "default", extra=("--id", "w-" + "y" * 40))
    table = ok("status", "--db", db).splitlines()
    assert table[0].split() == [
        "id",
        "handler",
        "queue",
        "prio",
        "phase",
        "attempt",
        "worker",
        "elapsed",
        "progress",
        "result/error",
    ]
    assert all(len(line) <= 100 for line in table), [len(line) for line in table]
    assert any("Failed" in line and "permanent" in line for line in table)
    full = ok("status", "--db", db, "d").splitlines()
    assert full[0].startswith("d  Failed")
    assert any(line.split()[:2] == ["queue", "default,"] for line in full)
    assert any(line.strip().startswith("error") and "never succeed" in line for line in full)
    assert all(len(line) <= 100 for line in full)


def test_history_lists_every_attempt_and_why_it_ended(worked: str) -> None:
    h = json.loads(ok("history", "--db", worked, "f", "--json"))
    first, second = h["attempts"]
    assert (first["attempt"], first["worker"], first["end"]) == (1, "w-vis", "retryable")
    assert first["why"] == "retryable failure: first attempts always fail"
    assert first["outcome"] == "retryable" and second["outcome"] == "success"
    assert (second["end"], second["why"]) == ("succeeded", "succeeded")
    for a in (first, second):
        assert seconds(a["authorized"]) <= seconds(a["activated"]) <= seconds(a["ended"])
        assert a["ran"] is not None and a["ran"] >= 0
    assert json.loads(ok("history", "--db", worked, "d", "--json"))["attempts"][0]["why"] == (
        "failed: this job can never succeed"
    )
    text = ok("history", "--db", worked, "f").splitlines()
    assert text[0].startswith("f  Succeeded") and "times UTC on" in text[0]
    assert text[1].split() == [
        "attempt",
        "worker",
        "authorized",
        "activated",
        "ended",
        "ran",
        "why",
    ]
    assert text[2].split()[:2] == ["1", "w-vis"] and "retryable failure" in text[2]
    assert all(len(line) <= 100 for line in text)


def test_history_of_an_unknown_job_is_one_line_and_exit_2(worked: str) -> None:
    out = jobs("history", "--db", worked, "nope")
    assert out.returncode == 2 and out.stderr == "remora jobs: no such job: nope\n"
    missing = jobs("history", "--db", str(Path(worked).with_name("none.sqlite3")), "f")
    assert missing.returncode == 2 and "no such jobs database file" in missing.stderr


def test_a_timed_out_attempt_is_named_so(tmp_path: Path) -> None:
    db = str(tmp_path / "j.sqlite3")
    ok("submit", "first_hangs", "--db", db, "--config", FAST, "--id", "t")
    work(db)
    first, second = json.loads(ok("history", "--db", db, "t", "--json"))["attempts"]
    assert (first["end"], first["why"]) == ("timed_out", "timed out after 0.3s")
    assert second["end"] == "succeeded"


def test_a_delayed_job_waits_until_it_is_due(tmp_path: Path) -> None:
    db = str(tmp_path / "j.sqlite3")
    ok("submit", "quick", "--db", db, "--config", FAST, "--id", "later", "--in", "1.5")
    row = status(db)["later"]
    assert seconds(row["due"]) - seconds(row["submitted"]) == pytest.approx(1.5, abs=0.002)
    work(db)
    row = status(db)["later"]
    assert row["phase"] == "Succeeded" and seconds(row["started"]) >= seconds(row["due"])
    ok("submit", "quick", "--db", db, "--id", "far", "--at", "2999-01-01T00:00:00Z")
    assert status(db)["far"]["due"] == "2999-01-01T00:00:00.000Z"
    table = ok("status", "--db", db)
    assert "due 2999-01-01T00:00:00" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at", "tomorrow"], "not an ISO 8601 time"),
        (["--in", "-1"], "not a number of seconds"),
        (["--at", "2030-01-01T00:00:00Z", "--in", "5"], "not allowed with argument"),
        (["--priority", "10000000"], "--priority"),
        (["--queue", "no spaces"], "queue id 'no spaces'"),
    ],
)
def test_bad_delays_queues_and_priorities_are_refused(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = jobs("submit", "quick", "--db", str(tmp_path / "j.sqlite3"), *args)
    assert out.returncode == 2 and message in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2  # usage line + the error, no traceback


def test_a_worker_takes_higher_priorities_first_and_only_its_queues(tmp_path: Path) -> None:
    db = str(tmp_path / "j.sqlite3")
    for job, prio in (("low", "-1"), ("mid", "0"), ("high", "5"), ("top", "9")):
        ok("submit", "quick", "--db", db, "--config", FAST, "--id", job, "--priority", prio)
    ok("submit", "quick", "--db", db, "--id", "other", "--queue", "bulk", "--priority", "99")
    work(db)
    rows = status(db)
    assert rows["other"]["phase"] == "Queued"  # not its queue: left for a bulk worker
    order = sorted(("top", "high", "mid", "low"), key=lambda j: seconds(rows[j]["started"]))
    assert order == ["top", "high", "mid", "low"]
    work(db, "bulk")
    assert status(db)["other"]["phase"] == "Succeeded"


OLD_TABLES = first_release_tables()


def test_an_older_database_gains_the_new_columns_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    for statement in OLD_TABLES:
        conn.execute(statement)
    assert "queue" not in {r[1] for r in conn.execute("PRAGMA table_info(remora_jobs_job)")}
    conn.execute("INSERT INTO remora_jobs_config VALUES ('schema_version', '1')")
    conn.execute(FIRST_RELEASE_JOB)
    conn.commit()
    conn.close()
    open_sqlite(path).close()  # the migration
    conn = sqlite3.connect(path)
    for table, column in (
        ("remora_jobs_job", "queue"),
        ("remora_jobs_job", "queued_at"),
        ("remora_jobs_attempt", "authorized_at"),
        ("remora_jobs_log", "facts"),
    ):
        assert column in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'remora_jobs_log_failures'")
    conn.close()
    row = status(str(path))["old"]
    assert (row["queue"], row["priority"], row["submitted"]) == ("default", 0, None)
    work(str(path))
    assert status(str(path))["old"]["phase"] == "Succeeded"
