"""The job runtime's SQL, for both engines: the schema (durable tables, and the PostgreSQL
target and vault tables), the statements of a durable transition, the row codecs, the
locked read of a job and the write of a :class:`~remora.jobs.guards.Change`.

Why one module: the SQLite and the PostgreSQL durable stores run the same statements; what
differs between the engines is a value of :class:`~remora.store.dialect.Dialect` (the
placeholder, the locking clause, whether a transition is folded into fewer statements),
never a flag.  The stores (:mod:`remora.jobs.durable` and its parts) hold no SQL text of
their own beyond one-statement reads.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import attrs

from remora.jobs.guards import Change
from remora.jobs.model import (
    AttemptRow,
    CredentialRow,
    CredentialState,
    JobRow,
    Outcome,
    Phase,
    Stop,
    UnknownJob,
    dumps,
)
from remora.store.dialect import AddedColumn, Dialect, Schema

SCHEMA_VERSION = 1

TABLES = (
    """CREATE TABLE IF NOT EXISTS remora_jobs_config (
        name TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_job (
        id TEXT PRIMARY KEY, seq BIGINT NOT NULL, handler TEXT NOT NULL, payload TEXT NOT NULL,
        max_attempts INTEGER NOT NULL, max_progress INTEGER NOT NULL, phase TEXT NOT NULL,
        cancel_requested INTEGER NOT NULL, current_token INTEGER NOT NULL,
        authority INTEGER NOT NULL, dispatch_needed INTEGER NOT NULL,
        committed INTEGER NOT NULL, checkpoint INTEGER NOT NULL,
        checkpoint_owner INTEGER NOT NULL, checkpoint_valid INTEGER NOT NULL,
        version INTEGER NOT NULL, error TEXT NOT NULL,
        timeout_s DOUBLE PRECISION NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_attempt (
        job TEXT NOT NULL, token INTEGER NOT NULL, worker TEXT NOT NULL,
        reservation TEXT NOT NULL, initial_progress INTEGER NOT NULL,
        resumed INTEGER NOT NULL, adopted_from INTEGER NOT NULL, transferred INTEGER NOT NULL,
        stop TEXT NOT NULL, stopped INTEGER NOT NULL, committed INTEGER NOT NULL,
        pending TEXT NOT NULL, PRIMARY KEY (job, token))""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_worker (
        id TEXT PRIMARY KEY, up INTEGER NOT NULL, version INTEGER NOT NULL,
        seen DOUBLE PRECISION NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_credential (
        job TEXT NOT NULL, sequence INTEGER NOT NULL, state TEXT NOT NULL,
        durable INTEGER NOT NULL, token INTEGER NOT NULL, PRIMARY KEY (job, sequence))""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_log (
        subject TEXT NOT NULL, version INTEGER NOT NULL, action TEXT NOT NULL,
        params TEXT NOT NULL, actor TEXT NOT NULL, actor_seq BIGINT NOT NULL,
        result TEXT NOT NULL, PRIMARY KEY (subject, version))""",
    "CREATE INDEX IF NOT EXISTS remora_jobs_log_actor ON remora_jobs_log (actor, actor_seq)",
    # The reconciler's incremental pass (DurableStore.active_snapshot) reads the jobs in
    # flight, the newest jobs and the attempts with an outcome in flight: indexed so the
    # read does not grow with the history.
    "CREATE INDEX IF NOT EXISTS remora_jobs_job_active ON remora_jobs_job (seq) "
    "WHERE phase NOT IN ('Succeeded', 'Failed', 'Cancelled')",
    "CREATE INDEX IF NOT EXISTS remora_jobs_job_seq ON remora_jobs_job (seq)",
    "CREATE INDEX IF NOT EXISTS remora_jobs_attempt_pending ON remora_jobs_attempt (job) "
    "WHERE pending <> ''",
)

#: The PostgreSQL target staging and vault (:mod:`remora.jobs.postgres`), in the durable
#: store's database or another one.
EXTRA_TABLES = (
    """CREATE TABLE IF NOT EXISTS remora_jobs_stage (
        job TEXT NOT NULL, token INTEGER NOT NULL, progress INTEGER NOT NULL,
        data BYTEA, cleaned INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (job, token, progress))""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_vault (
        job TEXT NOT NULL, sequence INTEGER NOT NULL, secret BYTEA,
        PRIMARY KEY (job, sequence))""",
    # Incarnations declared down: their stage writes are refused (PostgresTarget.fence).
    """CREATE TABLE IF NOT EXISTS remora_jobs_stage_fence (worker TEXT PRIMARY KEY)""",
)

#: Columns added after a table was first released, added on first start
#: (:func:`remora.store.dialect.add_missing_columns`; ``seen``: the incarnation's last
#: heartbeat, seconds on the durable store's clock).
ADDED_COLUMNS = (
    AddedColumn("remora_jobs_worker", "seen", "DOUBLE PRECISION NOT NULL DEFAULT 0"),
    # A job's own timeout in seconds (``jobs submit --timeout``; 0: none).
    AddedColumn("remora_jobs_job", "timeout_s", "DOUBLE PRECISION NOT NULL DEFAULT 0"),
)

#: The durable store's schema (SQLite: the durable tables; PostgreSQL adds the target and
#: vault tables, :data:`PG_SCHEMA`).
SCHEMA = Schema(
    version=SCHEMA_VERSION,
    version_table=("remora_jobs_config", "name"),
    create=TABLES,
    added=ADDED_COLUMNS,
    label="jobs schema",
)
PG_SCHEMA = attrs.evolve(SCHEMA, create=(*TABLES, *EXTRA_TABLES))

TERMINAL_SQL = "('Succeeded', 'Failed', 'Cancelled')"

JOB_COLUMNS = (
    "id, seq, handler, payload, max_attempts, max_progress, phase, cancel_requested, "
    "current_token, authority, dispatch_needed, committed, checkpoint, checkpoint_owner, "
    "checkpoint_valid, version, error, timeout_s"
)
ATTEMPT_COLUMNS = (
    "job, token, worker, reservation, initial_progress, resumed, adopted_from, transferred, "
    "stop, stopped, committed, pending"
)
CREDENTIAL_COLUMNS = "job, sequence, state, durable, token"

SELECT_JOB = f"SELECT {JOB_COLUMNS} FROM remora_jobs_job WHERE id = ?"
SELECT_ATTEMPTS = f"SELECT {ATTEMPT_COLUMNS} FROM remora_jobs_attempt WHERE job = ?"
SELECT_CREDENTIALS = f"SELECT {CREDENTIAL_COLUMNS} FROM remora_jobs_credential WHERE job = ?"
SELECT_DOWN = "SELECT id FROM remora_jobs_worker WHERE up = 0"
SELECT_LOG = "SELECT subject, version, action, params, actor, actor_seq FROM remora_jobs_log"

JOB_INSERT = (
    f"INSERT INTO remora_jobs_job ({JOB_COLUMNS}) VALUES "
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: The fields of :func:`job_values` a transition may change (:data:`JOB_UPDATE`'s, in its
#: order); the others are fixed at submit.
JOB_UPDATED = slice(6, 17)
JOB_UPDATE = (
    "UPDATE remora_jobs_job SET phase = ?, cancel_requested = ?, current_token = ?, "
    "authority = ?, dispatch_needed = ?, committed = ?, checkpoint = ?, "
    "checkpoint_owner = ?, checkpoint_valid = ?, version = ?, error = ? "
    "WHERE id = ?"
)
ATTEMPT_UPSERT = (
    f"INSERT INTO remora_jobs_attempt ({ATTEMPT_COLUMNS}) VALUES "
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job, token) DO UPDATE SET "
    "transferred = excluded.transferred, stop = excluded.stop, "
    "stopped = excluded.stopped, committed = excluded.committed, "
    "pending = excluded.pending"
)
CREDENTIAL_UPSERT = (
    f"INSERT INTO remora_jobs_credential ({CREDENTIAL_COLUMNS}) VALUES "
    "(?, ?, ?, ?, ?) ON CONFLICT (job, sequence) DO UPDATE SET "
    "state = excluded.state, durable = excluded.durable"
)
LOG_INSERT = (
    "INSERT INTO remora_jobs_log (subject, version, action, params, actor, actor_seq, "
    "result) VALUES (?, ?, ?, ?, ?, ?, ?)"
)

#: The folded locked read (:attr:`Dialect.folds`): a job's attempts, intents and the
#: incarnations that are down, as JSON aggregates in one statement.
LOCKED_ROWS = (
    "SELECT (SELECT json_agg(json_build_array("
    + ", ".join(f"a.{c.strip()}" for c in ATTEMPT_COLUMNS.split(","))
    + ")) FROM remora_jobs_attempt a WHERE a.job = %s), "
    "(SELECT json_agg(json_build_array("
    + ", ".join(f"c.{c.strip()}" for c in CREDENTIAL_COLUMNS.split(","))
    + ")) FROM remora_jobs_credential c WHERE c.job = %s), "
    "(SELECT json_agg(w.id) FROM remora_jobs_worker w WHERE w.up = 0)"
)


def qualified(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


# -- row codecs ----------------------------------------------------------------------------


def job_row(r: tuple[Any, ...]) -> JobRow:
    return JobRow(
        id=r[0],
        seq=int(r[1]),
        handler=r[2],
        payload=r[3],
        max_attempts=int(r[4]),
        max_progress=int(r[5]),
        phase=Phase(r[6]),
        cancel_requested=bool(r[7]),
        current_token=int(r[8]),
        authority=int(r[9]),
        dispatch_needed=bool(r[10]),
        committed=int(r[11]),
        checkpoint=int(r[12]),
        checkpoint_owner=int(r[13]),
        checkpoint_valid=bool(r[14]),
        version=int(r[15]),
        error=r[16],
        timeout=float(r[17]),
    )


def job_values(j: JobRow) -> tuple[Any, ...]:
    return (
        j.id,
        j.seq,
        j.handler,
        j.payload,
        j.max_attempts,
        j.max_progress,
        j.phase.value,
        int(j.cancel_requested),
        j.current_token,
        j.authority,
        int(j.dispatch_needed),
        j.committed,
        j.checkpoint,
        j.checkpoint_owner,
        int(j.checkpoint_valid),
        j.version,
        j.error,
        j.timeout,
    )


def attempt_row(r: tuple[Any, ...]) -> AttemptRow:
    return AttemptRow(
        job=r[0],
        token=int(r[1]),
        worker=r[2],
        reservation=r[3],
        initial_progress=int(r[4]),
        resumed=bool(r[5]),
        adopted_from=int(r[6]),
        transferred=bool(r[7]),
        stop=Stop(r[8]),
        stopped=bool(r[9]),
        committed=bool(r[10]),
        pending=Outcome(r[11]) if r[11] else None,
    )


def attempt_values(a: AttemptRow) -> tuple[Any, ...]:
    return (
        a.job,
        a.token,
        a.worker,
        a.reservation,
        a.initial_progress,
        int(a.resumed),
        a.adopted_from,
        int(a.transferred),
        a.stop.value,
        int(a.stopped),
        int(a.committed),
        a.pending.value if a.pending else "",
    )


def credential_row(r: tuple[Any, ...]) -> CredentialRow:
    return CredentialRow(r[0], int(r[1]), CredentialState(r[2]), bool(r[3]), int(r[4]))


def credential_values(c: CredentialRow) -> tuple[Any, ...]:
    return (c.job, c.sequence, c.state.value, int(c.durable), c.token)


# -- a job's locked read and a transition's writes ----------------------------------------


@attrs.frozen
class Locked:
    """A job's rows read under its lock."""

    job: JobRow
    attempts: Mapping[int, AttemptRow]
    credentials: Mapping[int, CredentialRow]
    workers_down: frozenset[str] = frozenset()
    #: The first row of the caller's extra read (``transact(…, also=…)``), read under the
    #: lock in the same round trip; ``None`` when there was none.
    also: Any = None


#: An extra read taken under a job's lock with its locked read: ``(sql, params)`` in the
#: dialect's placeholders (e.g. the stage row ``AcceptSuccess``'s guard needs, when the
#: target lives in the durable store's database).
Also = tuple[str, Any]


@functools.cache
def lock_job_sql(dialect: Dialect) -> str:
    """The statement that locks a job's row (and reads it)."""
    return dialect.q(SELECT_JOB) + dialect.lock_clause


def read_locked(
    cur: Any, dialect: Dialect, job_id: str, *, lock: bool = True, also: Also | None = None
) -> Locked:
    """``job_id``'s row (locked, unless ``lock`` is off), its attempts and intents, the
    incarnations that are down, and the caller's ``also`` read."""
    first = cur.execute(lock_job_sql(dialect) if lock else dialect.q(SELECT_JOB), (job_id,))
    if dialect.folds:
        # A second statement, not subqueries of the locking one: under READ COMMITTED a
        # statement that waited for the row lock re-reads the locked row but evaluates
        # its subqueries in the snapshot it started with — the attempts would be those
        # from before the transaction it waited for (found by trace validation: a
        # RejectOutcome of an outcome that had just been accepted).  Sent before the
        # lock's reply is read (its own cursor): in pipeline mode both travel together,
        # and the server still runs this one — with a fresh snapshot — only once the
        # lock was granted.
        rest_cur = cur.connection.cursor()
        rest_cur.execute(LOCKED_ROWS, (job_id, job_id))
        also_cur = None
        if also is not None:  # a statement of its own too, after the lock
            also_cur = cur.connection.cursor()
            also_cur.execute(*also)
        row = first.fetchone()
        if row is None:
            raise UnknownJob(f"no job {job_id!r}")
        rest = rest_cur.fetchone()
        return Locked(
            job_row(tuple(row)),
            {int(a[1]): attempt_row(tuple(a)) for a in rest[0] or ()},
            {int(c[1]): credential_row(tuple(c)) for c in rest[1] or ()},
            frozenset(rest[2] or ()),
            None if also_cur is None else also_cur.fetchone(),
        )
    row = first.fetchone()
    if row is None:
        raise UnknownJob(f"no job {job_id!r}")
    attempts = cur.execute(dialect.q(SELECT_ATTEMPTS), (job_id,)).fetchall()
    creds = cur.execute(dialect.q(SELECT_CREDENTIALS), (job_id,)).fetchall()
    down = cur.execute(SELECT_DOWN).fetchall()
    return Locked(
        job_row(tuple(row)),
        {int(a[1]): attempt_row(tuple(a)) for a in attempts},
        {int(c[1]): credential_row(tuple(c)) for c in creds},
        frozenset(r[0] for r in down),
        None if also is None else cur.execute(*also).fetchone(),
    )


def insert_log(
    cur: Any,
    dialect: Dialect,
    subject: str,
    version: int,
    action: str,
    params: dict[str, Any],
    actor: str,
    seq: int,
    result: str,
) -> None:
    """The durable log's row of one transition."""
    cur.execute(
        dialect.q(LOG_INSERT), (subject, version, action, dumps(params), actor, seq, result)
    )


def apply_change(
    cur: Any, dialect: Dialect, locked: Locked, change: Change, actor: str, seq: int
) -> int:
    """Write ``change`` and its log row; returns the job's new version."""
    version = locked.job.version + 1
    job = attrs.evolve(change.job or locked.job, version=version)
    if dialect.folds:
        # One statement (a data-modifying WITH): the writes and the log row.
        parts = [f"u AS ({JOB_UPDATE})"]
        params: list[Any] = [*job_values(job)[JOB_UPDATED], job.id]
        for i, a in enumerate(change.attempts):
            parts.append(f"a{i} AS ({ATTEMPT_UPSERT})")
            params += attempt_values(a)
        for i, c in enumerate(change.credentials):
            parts.append(f"c{i} AS ({CREDENTIAL_UPSERT})")
            params += credential_values(c)
        params += [job.id, version, change.action, dumps(change.params), actor, seq]
        params.append(change.result)
        cur.execute(dialect.q(f"WITH {', '.join(parts)} {LOG_INSERT}"), params)
        return version
    cur.execute(dialect.q(JOB_UPDATE), (*job_values(job)[JOB_UPDATED], job.id))
    for a in change.attempts:
        cur.execute(dialect.q(ATTEMPT_UPSERT), attempt_values(a))
    for c in change.credentials:
        cur.execute(dialect.q(CREDENTIAL_UPSERT), credential_values(c))
    insert_log(
        cur, dialect, job.id, version, change.action, change.params, actor, seq, change.result
    )
    return version


__all__ = [
    "ADDED_COLUMNS",
    "ATTEMPT_COLUMNS",
    "Also",
    "CREDENTIAL_COLUMNS",
    "EXTRA_TABLES",
    "JOB_COLUMNS",
    "Locked",
    "PG_SCHEMA",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TABLES",
    "TERMINAL_SQL",
    "apply_change",
    "attempt_row",
    "credential_row",
    "insert_log",
    "job_row",
    "lock_job_sql",
    "qualified",
    "read_locked",
]
