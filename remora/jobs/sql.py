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
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

from remora.jobs.actions import Action
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

R = TypeVar("R")

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
        queue TEXT NOT NULL DEFAULT 'default', priority INTEGER NOT NULL DEFAULT 0,
        due DOUBLE PRECISION NOT NULL DEFAULT 0,
        submitted_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        started_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        finished_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        queued_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        timeout_s DOUBLE PRECISION NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_attempt (
        job TEXT NOT NULL, token INTEGER NOT NULL, worker TEXT NOT NULL,
        reservation TEXT NOT NULL, initial_progress INTEGER NOT NULL,
        resumed INTEGER NOT NULL, adopted_from INTEGER NOT NULL, transferred INTEGER NOT NULL,
        stop TEXT NOT NULL, stopped INTEGER NOT NULL, committed INTEGER NOT NULL,
        pending TEXT NOT NULL, authorized_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        PRIMARY KEY (job, token))""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_worker (
        id TEXT PRIMARY KEY, up INTEGER NOT NULL, version INTEGER NOT NULL,
        seen DOUBLE PRECISION NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_credential (
        job TEXT NOT NULL, sequence INTEGER NOT NULL, state TEXT NOT NULL,
        durable INTEGER NOT NULL, token INTEGER NOT NULL, PRIMARY KEY (job, sequence))""",
    """CREATE TABLE IF NOT EXISTS remora_jobs_log (
        subject TEXT NOT NULL, version INTEGER NOT NULL, action TEXT NOT NULL,
        params TEXT NOT NULL, actor TEXT NOT NULL, actor_seq BIGINT NOT NULL,
        result TEXT NOT NULL, at DOUBLE PRECISION NOT NULL DEFAULT 0,
        facts TEXT NOT NULL DEFAULT '', PRIMARY KEY (subject, version))""",
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
    # Incarnations being declared down, one row per declarer: their stage writes are
    # refused (PostgresTarget.fence); a declaration that did not commit lifts its own row.
    """CREATE TABLE IF NOT EXISTS remora_jobs_stage_fences (
        worker TEXT NOT NULL, holder TEXT NOT NULL, PRIMARY KEY (worker, holder))""",
    # An earlier version's fences (one row per worker, no declarer): still honoured, never
    # lifted — nothing writes here any more.
    """CREATE TABLE IF NOT EXISTS remora_jobs_stage_fence (worker TEXT PRIMARY KEY)""",
)

_TIME = "DOUBLE PRECISION NOT NULL DEFAULT 0"

#: Columns added after a table was first released, added on first start
#: (:func:`remora.store.dialect.add_missing_columns`).  Times are seconds on the durable
#: store's clock.  ``seen``: the incarnation's last heartbeat; a job's named ``queue``,
#: ``priority`` and ``due`` time (delayed jobs), its ``submitted_at``/``started_at``/
#: ``finished_at``/``queued_at`` times; an attempt's ``authorized_at``; every log row's
#: ``at`` and ``facts`` (what the step observed: an error, how long an attempt ran).
ADDED_COLUMNS = (
    AddedColumn("remora_jobs_worker", "seen", _TIME),
    AddedColumn("remora_jobs_job", "queue", "TEXT NOT NULL DEFAULT 'default'"),
    AddedColumn("remora_jobs_job", "priority", "INTEGER NOT NULL DEFAULT 0"),
    AddedColumn("remora_jobs_job", "due", _TIME),
    AddedColumn("remora_jobs_job", "submitted_at", _TIME),
    AddedColumn("remora_jobs_job", "started_at", _TIME),
    AddedColumn("remora_jobs_job", "finished_at", _TIME),
    AddedColumn("remora_jobs_job", "queued_at", _TIME),
    AddedColumn("remora_jobs_attempt", "authorized_at", _TIME),
    AddedColumn("remora_jobs_log", "at", _TIME),
    AddedColumn("remora_jobs_log", "facts", "TEXT NOT NULL DEFAULT ''"),
    # A job's own timeout in seconds (``jobs submit --timeout``; 0: none).
    AddedColumn("remora_jobs_job", "timeout_s", _TIME),
)

#: The log's failures (``jobs dashboard``'s recent failures, newest first), indexed by time
#: so that the read does not grow with the history.
FAILURE_ACTIONS = (
    Action.ACCEPT_PERMANENT_FAILURE,
    Action.ACCEPT_RETRYABLE_FAILURE_WITH_BUDGET,
    Action.ACCEPT_RETRYABLE_FAILURE_EXHAUSTED,
    Action.REAP_LOST_ATTEMPT,
)
FAILURE_ACTIONS_SQL = "(" + ", ".join(f"'{a.value}'" for a in FAILURE_ACTIONS) + ")"

#: Statements that need the added columns (run after them: an older database gets them).
LATE = (
    "CREATE INDEX IF NOT EXISTS remora_jobs_log_failures ON remora_jobs_log (at) "
    f"WHERE action IN {FAILURE_ACTIONS_SQL}",
)

#: The durable store's schema (SQLite: the durable tables; PostgreSQL adds the target and
#: vault tables, :data:`PG_SCHEMA`).
SCHEMA = Schema(
    version=SCHEMA_VERSION,
    version_table=("remora_jobs_config", "name"),
    create=TABLES,
    added=ADDED_COLUMNS,
    late=LATE,
    label="jobs schema",
)
PG_SCHEMA = attrs.evolve(SCHEMA, create=(*TABLES, *EXTRA_TABLES))

TERMINAL_SQL = "('Succeeded', 'Failed', 'Cancelled')"

JOB_COLUMNS = (
    "id, seq, handler, payload, max_attempts, max_progress, phase, cancel_requested, "
    "current_token, authority, dispatch_needed, committed, checkpoint, checkpoint_owner, "
    "checkpoint_valid, version, error, queue, priority, due, submitted_at, started_at, "
    "finished_at, queued_at, timeout_s"
)
ATTEMPT_COLUMNS = (
    "job, token, worker, reservation, initial_progress, resumed, adopted_from, transferred, "
    "stop, stopped, committed, pending, authorized_at"
)
CREDENTIAL_COLUMNS = "job, sequence, state, durable, token"

SELECT_JOB = f"SELECT {JOB_COLUMNS} FROM remora_jobs_job WHERE id = ?"
SELECT_ATTEMPTS = f"SELECT {ATTEMPT_COLUMNS} FROM remora_jobs_attempt WHERE job = ?"
SELECT_CREDENTIALS = f"SELECT {CREDENTIAL_COLUMNS} FROM remora_jobs_credential WHERE job = ?"
SELECT_DOWN = "SELECT id FROM remora_jobs_worker WHERE up = 0"
SELECT_LOG = "SELECT subject, version, action, params, actor, actor_seq FROM remora_jobs_log"

JOB_INSERT = (
    f"INSERT INTO remora_jobs_job ({JOB_COLUMNS}) VALUES "
    f"({', '.join('?' for _ in JOB_COLUMNS.split(','))})"
)
#: A transition's write of the job row: what a transition may change (the id, handler,
#: payload, limits, queue, priority and due time never change).
JOB_UPDATE = (
    "UPDATE remora_jobs_job SET phase = ?, cancel_requested = ?, current_token = ?, "
    "authority = ?, dispatch_needed = ?, committed = ?, checkpoint = ?, "
    "checkpoint_owner = ?, checkpoint_valid = ?, version = ?, error = ?, "
    "started_at = ?, finished_at = ?, queued_at = ? WHERE id = ?"
)
ATTEMPT_UPSERT = (
    f"INSERT INTO remora_jobs_attempt ({ATTEMPT_COLUMNS}) VALUES "
    f"({', '.join('?' for _ in ATTEMPT_COLUMNS.split(','))}) "
    "ON CONFLICT (job, token) DO UPDATE SET "
    "transferred = excluded.transferred, stop = excluded.stop, "
    "stopped = excluded.stopped, committed = excluded.committed, "
    "pending = excluded.pending"
)
CREDENTIAL_UPSERT = (
    f"INSERT INTO remora_jobs_credential ({CREDENTIAL_COLUMNS}) VALUES "
    "(?, ?, ?, ?, ?) ON CONFLICT (job, sequence) DO UPDATE SET "
    "state = excluded.state, durable = excluded.durable"
)


@functools.cache
def log_insert_sql(dialect: Dialect) -> str:
    """The durable log's row of one transition (``?`` placeholders), its time on the
    durable store's clock (:meth:`Dialect.now_sql`: the server's, or a parameter from the
    injected clock)."""
    now = "?" if dialect.clock_sql is None else dialect.clock_sql
    return (
        "INSERT INTO remora_jobs_log (subject, version, action, params, actor, actor_seq, "
        f"result, facts, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {now})"
    )


#: The log's rows with their times and facts (history: :mod:`remora.jobs.history`).
SELECT_LOG_ROWS = (
    "SELECT subject, version, action, params, actor, actor_seq, at, facts, result "
    "FROM remora_jobs_log"
)


@functools.cache
def locked_rows_sql(dialect: Dialect) -> str:
    """The folded locked read (:attr:`Dialect.folds`): a job's attempts, intents and the
    incarnations that are down, as JSON aggregates in one statement, and the durable
    store's clock."""
    return (
        "SELECT (SELECT json_agg(json_build_array("
        + ", ".join(f"a.{c.strip()}" for c in ATTEMPT_COLUMNS.split(","))
        + f")) FROM remora_jobs_attempt a WHERE a.job = {dialect.placeholder}), "
        "(SELECT json_agg(json_build_array("
        + ", ".join(f"c.{c.strip()}" for c in CREDENTIAL_COLUMNS.split(","))
        + f")) FROM remora_jobs_credential c WHERE c.job = {dialect.placeholder}), "
        "(SELECT json_agg(w.id) FROM remora_jobs_worker w WHERE w.up = 0), " + dialect.now_sql()
    )


def qualified(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


# -- row codecs ----------------------------------------------------------------------------

ROWS_REMEMBERED = 4096
"""How many decoded rows each codec keeps (:func:`_remembered`)."""


def _remembered(decode: Callable[[tuple[Any, ...]], R]) -> Callable[[tuple[Any, ...]], R]:
    """``decode`` that hands back the value it made before for an equal raw row.

    The reconciler's passes and every snapshot read the same unchanged rows again and
    again; the decoded rows are frozen values, so one may be shared.  Equal raw rows decode
    to equal values (no column's decoding tells ``1`` from ``1.0`` or ``True``).  The memory
    is bounded: the cache is emptied when full.  A row with an unhashable column (a
    driver's ``memoryview``) is decoded every time."""
    cache: dict[tuple[Any, ...], R] = {}

    @functools.wraps(decode)
    def remembered(r: tuple[Any, ...]) -> R:
        try:
            hit = cache.get(r)
        except TypeError:
            return decode(r)
        if hit is None:
            if len(cache) >= ROWS_REMEMBERED:
                cache.clear()
            hit = cache[r] = decode(r)
        return hit

    return remembered


@_remembered
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
        queue=r[17],
        priority=int(r[18]),
        due=float(r[19]),
        submitted_at=float(r[20]),
        started_at=float(r[21]),
        finished_at=float(r[22]),
        queued_at=float(r[23]),
        timeout=float(r[24]),
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
        j.queue,
        j.priority,
        j.due,
        j.submitted_at,
        j.started_at,
        j.finished_at,
        j.queued_at,
        j.timeout,
    )


def job_update_values(j: JobRow) -> tuple[Any, ...]:
    """:data:`JOB_UPDATE`'s parameters."""
    v = job_values(j)
    return (*v[6:17], j.started_at, j.finished_at, j.queued_at, j.id)


@_remembered
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
        authorized_at=float(r[12]),
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
        a.authorized_at,
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
    #: The durable store's clock when the rows were read (seconds: the server's, or the
    #: injected clock's): the transition's time (:func:`stamp`) and a delayed job's due test.
    now: float = 0.0
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
    cur: Any,
    dialect: Dialect,
    job_id: str,
    *,
    lock: bool = True,
    also: Also | None = None,
    now: float = 0.0,
) -> Locked:
    """``job_id``'s row (locked, unless ``lock`` is off), its attempts and intents, the
    incarnations that are down, the durable store's clock (``now``: the injected clock's
    reading, used when the engine has no clock of its own) and the caller's ``also``
    read."""
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
        rest_cur.execute(locked_rows_sql(dialect), (job_id, job_id, *dialect.now_params(now)))
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
            float(rest[3]),
            None if also_cur is None else also_cur.fetchone(),
        )
    row = first.fetchone()
    if row is None:
        raise UnknownJob(f"no job {job_id!r}")
    attempts = cur.execute(dialect.q(SELECT_ATTEMPTS), (job_id,)).fetchall()
    creds = cur.execute(dialect.q(SELECT_CREDENTIALS), (job_id,)).fetchall()
    down = cur.execute(SELECT_DOWN).fetchall()
    if dialect.clock_sql is not None:
        now = float(cur.execute(f"SELECT {dialect.clock_sql}").fetchone()[0])
    return Locked(
        job_row(tuple(row)),
        {int(a[1]): attempt_row(tuple(a)) for a in attempts},
        {int(c[1]): credential_row(tuple(c)) for c in creds},
        frozenset(r[0] for r in down),
        now,
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
    *,
    facts: Mapping[str, Any] | None = None,
    now: float = 0.0,
) -> None:
    """The durable log's row of one transition (``now``: the injected clock's reading, the
    row's time when the engine has no clock of its own)."""
    cur.execute(
        dialect.q(log_insert_sql(dialect)),
        (
            subject,
            version,
            action,
            dumps(params),
            actor,
            seq,
            result,
            _facts(facts),
            *dialect.now_params(now),
        ),
    )


def _facts(facts: Mapping[str, Any] | None) -> str:
    return dumps(dict(facts)) if facts else ""


def stamp(locked: Locked, change: Change) -> Change:
    """``change`` with its times on the durable store's clock (``locked.now``): a job that
    becomes ``Running`` for the first time is *started*, one that becomes ``Queued`` is
    *queued*, one that becomes terminal *finished*; an attempt row the transition creates is
    *authorized*.  Times are facts for operators (status, history, metrics), never read by a
    guard."""
    now = locked.now
    job = change.job
    if job is not None and job.phase is not locked.job.phase:
        if job.phase is Phase.RUNNING and not job.started_at:
            job = attrs.evolve(job, started_at=now)
        if job.phase is Phase.QUEUED:
            job = attrs.evolve(job, queued_at=now)
        if job.phase.terminal:
            job = attrs.evolve(job, finished_at=now)
    attempts = tuple(
        a if a.token in locked.attempts or a.authorized_at else attrs.evolve(a, authorized_at=now)
        for a in change.attempts
    )
    return attrs.evolve(change, job=job, attempts=attempts)


def advanced(locked: Locked, change: Change, version: int) -> Locked:
    """The locked read as it stands after ``change`` (written at ``version``) in the same
    transaction: what the next step of a fused transaction decides on
    (:meth:`remora.jobs.transactions.Transactions.transact_steps`)."""
    job = attrs.evolve(change.job or locked.job, version=version)
    attempts = {**locked.attempts, **{a.token: a for a in change.attempts}}
    credentials = {**locked.credentials, **{c.sequence: c for c in change.credentials}}
    return attrs.evolve(locked, job=job, attempts=attempts, credentials=credentials)


def apply_change(
    cur: Any, dialect: Dialect, locked: Locked, change: Change, actor: str, seq: int
) -> int:
    """Write ``change`` (stamped already: :func:`stamp`) and its log row; returns the job's
    new version."""
    version = locked.job.version + 1
    job = attrs.evolve(change.job or locked.job, version=version)
    log: tuple[Any, ...] = (job.id, version, change.action, dumps(change.params), actor, seq)
    log += (change.result, _facts(change.facts), *dialect.now_params(locked.now))
    if dialect.folds:
        # One statement (a data-modifying WITH): the writes and the log row.
        parts = [f"u AS ({JOB_UPDATE})"]
        params: list[Any] = list(job_update_values(job))
        for i, a in enumerate(change.attempts):
            parts.append(f"a{i} AS ({ATTEMPT_UPSERT})")
            params += attempt_values(a)
        for i, c in enumerate(change.credentials):
            parts.append(f"c{i} AS ({CREDENTIAL_UPSERT})")
            params += credential_values(c)
        params += log
        cur.execute(dialect.q(f"WITH {', '.join(parts)} {log_insert_sql(dialect)}"), params)
        return version
    cur.execute(dialect.q(JOB_UPDATE), job_update_values(job))
    for a in change.attempts:
        cur.execute(dialect.q(ATTEMPT_UPSERT), attempt_values(a))
    for c in change.credentials:
        cur.execute(dialect.q(CREDENTIAL_UPSERT), credential_values(c))
    cur.execute(dialect.q(log_insert_sql(dialect)), log)
    return version


__all__ = [
    "ADDED_COLUMNS",
    "ATTEMPT_COLUMNS",
    "Also",
    "CREDENTIAL_COLUMNS",
    "EXTRA_TABLES",
    "FAILURE_ACTIONS",
    "FAILURE_ACTIONS_SQL",
    "LATE",
    "JOB_COLUMNS",
    "Locked",
    "SELECT_LOG_ROWS",
    "PG_SCHEMA",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TABLES",
    "TERMINAL_SQL",
    "advanced",
    "apply_change",
    "attempt_row",
    "credential_row",
    "insert_log",
    "job_row",
    "job_update_values",
    "locked_rows_sql",
    "log_insert_sql",
    "stamp",
    "lock_job_sql",
    "qualified",
    "read_locked",
]
