"""The durable store's reads outside a job's lock: one job, the jobs, consistent snapshots
(the reconciler's full and incremental reads, the checkers'), the log, the deployment's
limits.

Why a part of its own: none of these takes a lock or goes through the transaction
protocol (:mod:`remora.jobs.transactions`); each is one consistent read.
"""

from __future__ import annotations

import json
from typing import Any

from remora.context import Context
from remora.jobs.model import (
    DurableSnapshot,
    JobRow,
    JobsConfig,
    LogEntry,
    UnknownJob,
    WorkerRow,
    dumps,
)
from remora.jobs.sql import (
    ATTEMPT_COLUMNS,
    CREDENTIAL_COLUMNS,
    JOB_COLUMNS,
    SELECT_DOWN,
    SELECT_JOB,
    SELECT_LOG,
    TERMINAL_SQL,
    attempt_row,
    credential_row,
    job_row,
    qualified,
)
from remora.jobs.transactions import Transactions

#: How many ids one ``IN (…)`` list holds.
CHUNK = 500


class DurableReads(Transactions):
    """Reads of the durable store (module docstring)."""

    def job(self, job_id: str) -> JobRow:
        row = self.backend.read_one("job", self._q(SELECT_JOB), (job_id,))
        if row is None:
            raise UnknownJob(f"no job {job_id!r}")
        return job_row(tuple(row))

    def jobs(self, *, active_only: bool = False) -> list[JobRow]:
        where = f"WHERE phase NOT IN {TERMINAL_SQL} " if active_only else ""
        rows = self.backend.read(
            "jobs",
            lambda cur: cur.execute(
                f"SELECT {JOB_COLUMNS} FROM remora_jobs_job {where}ORDER BY seq, id"
            ).fetchall(),
        )
        return [job_row(tuple(r)) for r in rows]

    def snapshot(self) -> DurableSnapshot:
        def body(cur: Any) -> DurableSnapshot:
            jobs = cur.execute(f"SELECT {JOB_COLUMNS} FROM remora_jobs_job ORDER BY seq, id")
            jobs = jobs.fetchall()
            attempts = cur.execute(
                f"SELECT {ATTEMPT_COLUMNS} FROM remora_jobs_attempt ORDER BY job, token"
            ).fetchall()
            workers = cur.execute("SELECT id, up FROM remora_jobs_worker ORDER BY id").fetchall()
            creds = cur.execute(
                f"SELECT {CREDENTIAL_COLUMNS} FROM remora_jobs_credential ORDER BY job, sequence"
            ).fetchall()
            return DurableSnapshot(
                tuple(job_row(tuple(r)) for r in jobs),
                tuple(attempt_row(tuple(r)) for r in attempts),
                tuple(WorkerRow(r[0], bool(r[1])) for r in workers),
                tuple(credential_row(tuple(r)) for r in creds),
            )

        return self.backend.read("snapshot", body)

    def active_snapshot(
        self, since_seq: int = 0, also: frozenset[str] = frozenset()
    ) -> DurableSnapshot:
        """The reconciler's incremental read, one consistent snapshot: the jobs not yet
        terminal, the jobs submitted at or after ``since_seq``, the jobs in ``also`` (e.g.
        those the previous pass saw in flight: they may have finished since), their
        attempts and intents, every attempt with an outcome in flight, and the workers
        that are down.  Finished jobs the reads miss are left to the full
        :meth:`snapshot` (the reconciler takes one every few passes)."""
        mark = self.dialect.placeholder

        def body(cur: Any) -> DurableSnapshot:
            flight = f"j.phase NOT IN {TERMINAL_SQL} OR j.seq >= {mark}"
            jobs = {
                r[0]: job_row(tuple(r))
                for r in cur.execute(
                    f"SELECT {qualified('j', JOB_COLUMNS)} FROM remora_jobs_job j WHERE {flight}",
                    (since_seq,),
                ).fetchall()
            }
            extra = sorted(also - jobs.keys())

            def rows(table: str, columns: str, pending: str = "") -> list[tuple[Any, ...]]:
                """``table``'s rows of the jobs read above (and ``pending`` ones)."""
                out: list[tuple[Any, ...]] = cur.execute(
                    f"SELECT {qualified('x', columns)} FROM {table} x JOIN remora_jobs_job j "
                    f"ON j.id = x.job WHERE {flight}{pending}",
                    (since_seq,),
                ).fetchall()
                for i in range(0, len(extra), CHUNK):
                    part = extra[i : i + CHUNK]
                    marks = ", ".join(mark for _ in part)
                    out += cur.execute(
                        f"SELECT {columns} FROM {table} WHERE job IN ({marks})", part
                    ).fetchall()
                return out

            for i in range(0, len(extra), CHUNK):
                part = extra[i : i + CHUNK]
                marks = ", ".join(mark for _ in part)
                for r in cur.execute(
                    f"SELECT {JOB_COLUMNS} FROM remora_jobs_job WHERE id IN ({marks})", part
                ).fetchall():
                    jobs[r[0]] = job_row(tuple(r))
            attempts = {
                (r[0], int(r[1])): attempt_row(tuple(r))
                for r in rows("remora_jobs_attempt", ATTEMPT_COLUMNS, " OR x.pending <> ''")
            }
            creds = {
                (r[0], int(r[1])): credential_row(tuple(r))
                for r in rows("remora_jobs_credential", CREDENTIAL_COLUMNS)
            }
            down = cur.execute(SELECT_DOWN).fetchall()
            return DurableSnapshot(
                tuple(sorted(jobs.values(), key=lambda j: (j.seq, j.id))),
                tuple(attempts[k] for k in sorted(attempts)),
                tuple(WorkerRow(r[0], False) for r in down),
                tuple(creds[k] for k in sorted(creds)),
            )

        return self.backend.read("active snapshot", body)

    def log(self) -> list[LogEntry]:
        rows = self.backend.read(
            "log",
            lambda cur: cur.execute(f"{SELECT_LOG} ORDER BY subject, version").fetchall(),
        )
        return [LogEntry(r[0], int(r[1]), r[2], json.loads(r[3]), r[4], int(r[5])) for r in rows]

    def config(self) -> JobsConfig | None:
        row = self.backend.read(
            "config",
            lambda cur: cur.execute(
                "SELECT value FROM remora_jobs_config WHERE name = 'jobs'"
            ).fetchone(),
        )
        return None if row is None else JobsConfig(**json.loads(row[0]))

    def ensure_config(self, ctx: Context, config: JobsConfig | None) -> JobsConfig:
        """The deployment's limits: stored on first use, then read by every process."""

        def body(cur: Any) -> JobsConfig:
            row = cur.execute("SELECT value FROM remora_jobs_config WHERE name = 'jobs'").fetchone()
            if row is not None:
                return JobsConfig(**json.loads(row[0]))
            chosen = config or JobsConfig()
            cur.execute(
                self._q("INSERT INTO remora_jobs_config (name, value) VALUES ('jobs', ?)"),
                (dumps(chosen.to_json()),),
            )
            return chosen

        return self.backend.write(ctx, True, "config", body)


__all__ = ["CHUNK", "DurableReads"]
