"""The durable store: the sole authority (SQLite embedded default, PostgreSQL via psycopg 3).

It holds jobs (phase, cancellation, attempt allocation, fencing tokens, checkpoint, the
committed attempt), attempts, worker incarnations (ids never reused), credential intents,
and the durable transition log.  :class:`DurableStore` is made of parts, one concept each:

* :mod:`remora.jobs.transactions` — the transaction protocol: every durable spec action is
  one transaction (lock the job, evaluate the guard, write, log, commit), and a lost COMMIT
  reply is resolved by re-reading the log, never by a blind retry;
* :mod:`remora.jobs.incarnations` — the worker incarnation rows (start, heartbeat, clean
  shutdown, declared down);
* :mod:`remora.jobs.snapshots` — reads outside a job's lock (one job, snapshots, the log,
  the deployment's limits);
* :mod:`remora.jobs.sql` — the SQL text of both engines, the row codecs and the schema;
* the backends: :mod:`remora.jobs.sqlite` and :mod:`remora.jobs.postgres` (each reuses the
  partition store's connection handling; the schema is created or upgraded by the shared
  helper :func:`remora.store.dialect.migrate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from remora.errors import InvalidInput, NotEnabled
from remora.jobs.incarnations import Incarnations
from remora.jobs.io import Actor
from remora.jobs.model import DEFAULT_QUEUE, JobRow, JobsConfig
from remora.jobs.snapshots import DurableReads
from remora.jobs.sql import (
    JOB_INSERT,
    SCHEMA_VERSION,
    TABLES,
    Also,
    Locked,
    insert_log,
    job_values,
)
from remora.jobs.sqlite import SqliteJobsBackend
from remora.jobs.transactions import Backend, Decide


class DurableStore(Incarnations, DurableReads):
    """The durable authority behind the controlled seam (see the module docstring)."""

    def submit(
        self,
        actor: Actor,
        job_id: str,
        handler: str,
        payload: str,
        config: JobsConfig,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        delay: float | None = None,
        due_at: float | None = None,
        timeout: float = 0.0,
    ) -> JobRow:
        """Durably accept a job (``Queued``, dispatch needed) in ``queue`` with ``priority``;
        a delayed one (``delay`` seconds from now, or at ``due_at``, both on the durable
        store's clock) is not enqueued before it is due.  ``timeout``: the job's own attempt
        timeout in seconds (0: none).  Not a spec step: the spec's jobs are accepted in
        ``Init``."""
        seq = actor.next_seq()

        def body(cur: Any) -> JobRow:
            exists = cur.execute(
                self._q("SELECT 1 FROM remora_jobs_job WHERE id = ?"), (job_id,)
            ).fetchone()
            if exists is not None:
                raise InvalidInput(f"job {job_id!r} already exists")
            top = cur.execute("SELECT COALESCE(MAX(seq), 0) FROM remora_jobs_job").fetchone()
            now = self.durable_now(cur)
            due = due_at if due_at is not None else (now + delay if delay else 0.0)
            job = JobRow(
                job_id,
                int(top[0]) + 1,
                handler,
                payload,
                config.max_attempts,
                config.max_progress,
                version=1,
                queue=queue,
                priority=priority,
                due=due,
                submitted_at=now,
                queued_at=now,
                timeout=timeout,
            )
            cur.execute(self._q(JOB_INSERT), job_values(job))
            insert_log(
                cur,
                self.dialect,
                job_id,
                1,
                "",
                {"j": job_id},
                actor.name,
                seq,
                "submitted",
                now=now,
            )
            return job

        job = self.resolved_write(actor, seq, job_id, body, lambda: self.job(job_id))
        actor.record(seq, "", {"j": job_id}, store="durable", key=job_id, version=1)
        return job


def open_sqlite(path: str | Path = ":memory:") -> DurableStore:
    return DurableStore(SqliteJobsBackend(path))


def open_postgres(dsn: str, *, migrate: bool = True, injected_clock: bool = False) -> DurableStore:
    """``injected_clock``: heartbeats on the caller's clock instead of the server's (a
    simulation on PostgreSQL, whose time is logical)."""
    from remora.jobs.postgres import PostgresJobsBackend

    backend = PostgresJobsBackend(dsn, migrate=migrate)
    if injected_clock:
        backend.dialect = backend.dialect.with_injected_clock()
    return DurableStore(backend)


__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "Also",
    "Backend",
    "Decide",
    "DurableStore",
    "Locked",
    "NotEnabled",
    "SqliteJobsBackend",
    "open_postgres",
    "open_sqlite",
]
