"""The durable store: the sole authority (SQLite embedded default, PostgreSQL via psycopg 3).

It holds jobs (phase, cancellation, attempt allocation, fencing tokens, checkpoint, the
committed attempt), attempts, worker incarnations (ids never reused), credential intents,
and the durable transition log.  Every durable spec action is **one transaction**:

1. lock the job's row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE``
   takes the database write lock), read its attempts and intents;
2. evaluate the spec's guard on the locked rows — the pure functions of
   :mod:`remora.jobs.guards` — together with any fact of another store the action needs,
   read while the lock is held (e.g. ``AcceptSuccess`` reads the attempt's staging);
3. write the new rows, bump the job's ``version`` and append the log row
   ``(job, version, action, params, actor, actor_seq)``; COMMIT.

So each step is a compare-and-swap whose condition is the guard, and the log's per-job
``version`` order is the commit order.  A COMMIT whose reply is lost raises
:class:`~remora.errors.UnknownResult` from the backend; :meth:`DurableStore.transact`
resolves it by re-reading the log for the call's ``(actor, actor_seq)``: found — it
committed (its recorded result is returned); absent — it did not (PostgreSQL settles the
lost session first, see :mod:`remora.store.postgres`), and :class:`~remora.errors.Unavailable`
tells the caller it may try again.  Never a blind retry.

The backends reuse the partition store's: connection handling, error mapping and the
lost-COMMIT settling of :class:`~remora.store.postgres.PostgresBackend`, the interruptible
write lock of :class:`~remora.store.sqlite.SqliteBackend`.  The schema is versioned in
``remora_jobs_config`` and created under the same advisory lock.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

import attrs

from remora.context import Context
from remora.errors import InvalidInput, Unavailable, UnknownResult
from remora.jobs import guards
from remora.jobs.actions import Action
from remora.jobs.guards import Change
from remora.jobs.io import Actor, JobOperation, io_call, resolved_call
from remora.jobs.model import (
    AttemptRow,
    CredentialRow,
    CredentialState,
    DurableSnapshot,
    JobRow,
    JobsConfig,
    LogEntry,
    NotEnabled,
    Outcome,
    Phase,
    Stop,
    UnknownJob,
    WorkerRow,
    dumps,
)
from remora.store.sqlite import SqliteBackend

T = TypeVar("T")
L = TypeVar("L", "Locked", JobRow)
"""What a job lock read: the full locked read or the row alone."""

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
        version INTEGER NOT NULL, error TEXT NOT NULL)""",
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

#: Columns added after a table was first released: ``(table, column, definition)``, added on
#: first start by :func:`add_missing_columns` (``seen``: the incarnation's last heartbeat,
#: seconds on the durable store's clock).
ADDED_COLUMNS = (("remora_jobs_worker", "seen", "DOUBLE PRECISION NOT NULL DEFAULT 0"),)


def add_missing_columns(cur: Any, *, postgres: bool) -> None:
    """Add the :data:`ADDED_COLUMNS` a database created by an older version lacks (checked
    first: ``ALTER TABLE`` locks its table even when it changes nothing)."""
    for table, column, definition in ADDED_COLUMNS:
        if postgres:
            found = cur.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_name = %s "
                "AND column_name = %s AND table_schema = current_schema()",
                (table, column),
            ).fetchone()
        else:
            names = [r[1] for r in cur.execute(f"PRAGMA table_info({table})").fetchall()]
            found = column in names
        if not found:
            cur.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


TERMINAL_SQL = "('Succeeded', 'Failed', 'Cancelled')"

JOB_COLUMNS = (
    "id, seq, handler, payload, max_attempts, max_progress, phase, cancel_requested, "
    "current_token, authority, dispatch_needed, committed, checkpoint, checkpoint_owner, "
    "checkpoint_valid, version, error"
)
ATTEMPT_COLUMNS = (
    "job, token, worker, reservation, initial_progress, resumed, adopted_from, transferred, "
    "stop, stopped, committed, pending"
)
CREDENTIAL_COLUMNS = "job, sequence, state, durable, token"


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

LOCKED_ROWS = (
    "SELECT (SELECT json_agg(json_build_array("
    + ", ".join(f"a.{c.strip()}" for c in ATTEMPT_COLUMNS.split(","))
    + ")) FROM remora_jobs_attempt a WHERE a.job = %s), "
    "(SELECT json_agg(json_build_array("
    + ", ".join(f"c.{c.strip()}" for c in CREDENTIAL_COLUMNS.split(","))
    + ")) FROM remora_jobs_credential c WHERE c.job = %s), "
    "(SELECT json_agg(w.id) FROM remora_jobs_worker w WHERE w.up = 0)"
)


def _qualified(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


class Cursor(Protocol):
    def execute(self, query: Any, params: Any = ...) -> Any: ...


class Backend(Protocol):
    """A SQL engine: one transaction per write, consistent reads."""

    placeholder: str
    lock_clause: str
    where: str
    #: PostgreSQL: fewer statements per transition — the locked read as two (the row lock,
    #: then :data:`LOCKED_ROWS`) instead of four, the writes and the log row as one
    #: statement (data-modifying ``WITH``) — and single-statement reads without
    #: ``BEGIN``/``COMMIT`` (:meth:`read_one`).
    fold_statements: bool
    #: ``now()`` comes from the server (PostgreSQL) rather than the injected clock.
    server_clock: bool

    def read_one(self, what: str, sql: str, params: Any) -> Any: ...

    def write(self, ctx: Context, commit: bool, what: str, body: Callable[[Any], T]) -> T: ...

    def read(self, what: str, body: Callable[[Any], T]) -> T: ...

    def close(self) -> None: ...


def _job(r: tuple[Any, ...]) -> JobRow:
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
    )


def _job_values(j: JobRow) -> tuple[Any, ...]:
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
    )


def _attempt(r: tuple[Any, ...]) -> AttemptRow:
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


def _attempt_values(a: AttemptRow) -> tuple[Any, ...]:
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


def _credential(r: tuple[Any, ...]) -> CredentialRow:
    return CredentialRow(r[0], int(r[1]), CredentialState(r[2]), bool(r[3]), int(r[4]))


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


Decide = Callable[[Locked], Change]

#: An extra read taken under a job's lock with its locked read: ``(sql, params)`` in the
#: backend's placeholders (e.g. the stage row ``AcceptSuccess``'s guard needs, when the
#: target lives in the durable store's database).
Also = tuple[str, Any]


class DurableStore:
    """The durable authority behind the controlled seam (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.where = backend.where
        #: The job row's lock, built once (the locking statement of :meth:`_lock`).
        self._lock_job_sql = (
            self._q(f"SELECT {JOB_COLUMNS} FROM remora_jobs_job WHERE id = ?") + backend.lock_clause
        )

    # -- SQL helpers ----------------------------------------------------------------------
    def _q(self, sql: str) -> str:
        return sql.replace("?", self.backend.placeholder)

    def _lock(
        self, cur: Any, job_id: str, *, lock: bool = True, also: Also | None = None
    ) -> Locked:
        first = cur.execute(
            self._lock_job_sql
            if lock
            else self._q(f"SELECT {JOB_COLUMNS} FROM remora_jobs_job WHERE id = ?"),
            (job_id,),
        )
        if self.backend.fold_statements:
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
                _job(tuple(row)),
                {int(a[1]): _attempt(tuple(a)) for a in rest[0] or ()},
                {int(c[1]): _credential(tuple(c)) for c in rest[1] or ()},
                frozenset(rest[2] or ()),
                None if also_cur is None else also_cur.fetchone(),
            )
        row = first.fetchone()
        if row is None:
            raise UnknownJob(f"no job {job_id!r}")
        attempts = cur.execute(
            self._q(f"SELECT {ATTEMPT_COLUMNS} FROM remora_jobs_attempt WHERE job = ?"),
            (job_id,),
        ).fetchall()
        creds = cur.execute(
            self._q(f"SELECT {CREDENTIAL_COLUMNS} FROM remora_jobs_credential WHERE job = ?"),
            (job_id,),
        ).fetchall()
        down = cur.execute("SELECT id FROM remora_jobs_worker WHERE up = 0").fetchall()
        return Locked(
            _job(tuple(row)),
            {int(a[1]): _attempt(tuple(a)) for a in attempts},
            {int(c[1]): _credential(tuple(c)) for c in creds},
            frozenset(r[0] for r in down),
            None if also is None else cur.execute(*also).fetchone(),
        )

    def _apply(self, cur: Any, locked: Locked, change: Change, actor: str, seq: int) -> int:
        """Write ``change`` and its log row; returns the job's new version."""
        version = locked.job.version + 1
        job = attrs.evolve(change.job or locked.job, version=version)
        if self.backend.fold_statements:
            self._apply_folded(cur, job, change, actor, seq, version)
            return version
        cur.execute(self._q(JOB_UPDATE), (*_job_values(job)[6:], job.id))
        for a in change.attempts:
            cur.execute(self._q(ATTEMPT_UPSERT), _attempt_values(a))
        for c in change.credentials:
            cur.execute(
                self._q(CREDENTIAL_UPSERT),
                (c.job, c.sequence, c.state.value, int(c.durable), c.token),
            )
        self._log(cur, job.id, version, change.action, change.params, actor, seq, change.result)
        return version

    def _apply_folded(
        self, cur: Any, job: JobRow, change: Change, actor: str, seq: int, version: int
    ) -> None:
        """:meth:`_apply` as one statement (PostgreSQL: data-modifying ``WITH``)."""
        parts = [f"u AS ({JOB_UPDATE})"]
        params: list[Any] = [*_job_values(job)[6:], job.id]
        for i, a in enumerate(change.attempts):
            parts.append(f"a{i} AS ({ATTEMPT_UPSERT})")
            params += _attempt_values(a)
        for i, c in enumerate(change.credentials):
            parts.append(f"c{i} AS ({CREDENTIAL_UPSERT})")
            params += [c.job, c.sequence, c.state.value, int(c.durable), c.token]
        params += [job.id, version, change.action, dumps(change.params), actor, seq]
        params.append(change.result)
        cur.execute(self._q(f"WITH {', '.join(parts)} {LOG_INSERT}"), params)

    def _log(
        self,
        cur: Any,
        subject: str,
        version: int,
        action: str,
        params: dict[str, Any],
        actor: str,
        seq: int,
        result: str,
    ) -> None:
        cur.execute(
            self._q(LOG_INSERT), (subject, version, action, dumps(params), actor, seq, result)
        )

    # -- writes ---------------------------------------------------------------------------
    def transact(
        self, actor: Actor, job_id: str, decide: Decide, *, also: Also | None = None
    ) -> Change:
        """One durable spec action on ``job_id``: lock, ``decide`` (raises
        :class:`NotEnabled` when the guard is false), write, log, commit.  The action is
        recorded for ``actor``; an unknown result is resolved by re-reading the log.
        ``also``: an extra read under the lock, handed to ``decide`` as ``Locked.also``."""
        seq = actor.next_seq()
        box: list[tuple[Change, int]] = []

        def body(cur: Any) -> tuple[Change, int]:
            locked = self._lock(cur, job_id, also=also)
            change = decide(locked)
            version = self._apply(cur, locked, change, actor.name, seq)
            return change, version

        def effect(commit: bool) -> tuple[Change, int]:
            out = self.backend.write(actor.ctx, commit, "job transition", body)
            box.append(out)
            return out

        try:
            change, version = io_call(actor, JobOperation.DURABLE_WRITE, job_id, effect)
        except UnknownResult:
            found = self.find_log(actor.name, seq)
            if found is None:
                raise Unavailable(
                    f"{job_id}: the transition's COMMIT reply was lost and a re-read shows it "
                    "did not commit"
                ) from None
            entry, result = found
            change = Change(entry.action, entry.params, result=result)
            version = entry.version
            if box:  # the simulated backend knows the rows it wrote
                change = attrs.evolve(box[0][0], result=result)
        actor.record(
            seq, change.action, change.params, store="durable", key=job_id, version=version
        )
        return change

    def submit(
        self,
        actor: Actor,
        job_id: str,
        handler: str,
        payload: str,
        config: JobsConfig,
    ) -> JobRow:
        """Durably accept a job (``Queued``, dispatch needed).  Not a spec step: the spec's
        jobs are accepted in ``Init``."""
        seq = actor.next_seq()

        def body(cur: Any) -> JobRow:
            exists = cur.execute(
                self._q("SELECT 1 FROM remora_jobs_job WHERE id = ?"), (job_id,)
            ).fetchone()
            if exists is not None:
                raise InvalidInput(f"job {job_id!r} already exists")
            top = cur.execute("SELECT COALESCE(MAX(seq), 0) FROM remora_jobs_job").fetchone()
            job = JobRow(
                job_id,
                int(top[0]) + 1,
                handler,
                payload,
                config.max_attempts,
                config.max_progress,
                version=1,
            )
            cur.execute(
                self._q(
                    f"INSERT INTO remora_jobs_job ({JOB_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                _job_values(job),
            )
            self._log(cur, job_id, 1, "", {"j": job_id}, actor.name, seq, "submitted")
            return job

        job = self._write_resolved(actor, seq, job_id, body, lambda: self.job(job_id))
        actor.record(seq, "", {"j": job_id}, store="durable", key=job_id, version=1)
        return job

    def _write_resolved(
        self,
        actor: Actor,
        seq: int,
        key: str,
        body: Callable[[Any], T],
        reread: Callable[[], T],
    ) -> T:
        return resolved_call(
            actor,
            JobOperation.DURABLE_WRITE,
            key,
            lambda commit: self.backend.write(actor.ctx, commit, "job write", body),
            lambda: self.find_log(actor.name, seq) is not None,
            reread,
        )

    def register_worker(self, actor: Actor, worker_id: str, now: float = 0.0) -> None:
        """``StartIncarnation(w)``: a fresh incarnation id (an id is never reused); its
        heartbeat starts now (``now``: the injected clock, unless the server has one)."""
        seq = actor.next_seq()
        subject = f"worker:{worker_id}"

        def body(cur: Any) -> None:
            exists = cur.execute(
                self._q("SELECT 1 FROM remora_jobs_worker WHERE id = ?"), (worker_id,)
            ).fetchone()
            if exists is not None:
                raise InvalidInput(f"worker incarnation {worker_id!r} was used before")
            cur.execute(
                self._q(
                    "INSERT INTO remora_jobs_worker (id, up, version, seen) "
                    f"VALUES (?, 1, 1, {self._now_sql()})"
                ),
                (worker_id, *self._now_param(now)),
            )
            self._log(
                cur, subject, 1, Action.START_INCARNATION, {"w": worker_id}, actor.name, seq, ""
            )

        self._write_resolved(actor, seq, subject, body, lambda: None)
        actor.record(
            seq, Action.START_INCARNATION, {"w": worker_id}, store="durable", key=subject, version=1
        )

    def retire_worker(self, actor: Actor, worker_id: str) -> None:
        """The incarnation goes down for good (``CrashWorker(w)`` of a clean shutdown)."""
        seq = actor.next_seq()
        subject = f"worker:{worker_id}"

        def body(cur: Any) -> None:
            row = cur.execute(
                self._q("SELECT up FROM remora_jobs_worker WHERE id = ?")
                + self.backend.lock_clause,
                (worker_id,),
            ).fetchone()
            if row is None or not row[0]:
                raise NotEnabled(f"worker {worker_id} is not up")  # declared down already
            cur.execute(
                self._q(
                    "UPDATE remora_jobs_worker SET up = 0, version = 2 WHERE id = ? AND up = 1"
                ),
                (worker_id,),
            )
            self._log(cur, subject, 2, Action.CRASH_WORKER, {"w": worker_id}, actor.name, seq, "")

        self._write_resolved(actor, seq, subject, body, lambda: None)
        actor.record(
            seq, Action.CRASH_WORKER, {"w": worker_id}, store="durable", key=subject, version=2
        )

    # -- incarnation liveness ------------------------------------------------------------------
    def _now_sql(self) -> str:
        """The durable store's clock: PostgreSQL's (so hosts need no synchronized clocks),
        else the injected one (a parameter, :meth:`_now_param`)."""
        if self.backend.server_clock:
            return "extract(epoch from clock_timestamp())"
        return "?"

    def _now_param(self, now: float) -> tuple[float, ...]:
        return () if self.backend.server_clock else (now,)

    def heartbeat(self, actor: Actor, worker_id: str, now: float = 0.0) -> bool:
        """Renew the incarnation's heartbeat (``seen``) — not a spec step, one statement in
        a transaction, taken every few ticks by the worker, never per job.  False when the
        incarnation is down (declared down by another one, or shut down): it must stop."""

        def body(cur: Any) -> bool:
            row = cur.execute(
                self._q(
                    f"UPDATE remora_jobs_worker SET seen = {self._now_sql()} "
                    "WHERE id = ? AND up = 1 RETURNING 1"
                ),
                (*self._now_param(now), worker_id),
            ).fetchone()
            return row is not None

        return bool(
            io_call(
                actor,
                JobOperation.DURABLE_WRITE,
                f"worker:{worker_id}",
                lambda commit: self.backend.write(actor.ctx, commit, "heartbeat", body),
            )
        )

    def liveness(self, now: float = 0.0) -> tuple[float, list[tuple[str, bool, float]]]:
        """The durable clock's ``now`` and every incarnation that is up: ``(id, up, seen)``
        (the reconciler's read for :meth:`declare_down`; one statement)."""
        now_sql = self._now_sql() if self.backend.server_clock else repr(float(now))

        def body(cur: Any) -> tuple[float, list[tuple[str, bool, float]]]:
            rows = cur.execute(
                f"SELECT id, up, seen, {now_sql} FROM remora_jobs_worker WHERE up = 1"
            ).fetchall()
            at = float(rows[0][3]) if rows else now
            return at, [(r[0], bool(r[1]), float(r[2])) for r in rows]

        return self.backend.read("liveness", body)

    def declare_down(
        self, actor: Actor, worker_id: str, by: str, down_after: float, now: float = 0.0
    ) -> None:
        """``CrashWorker(w)`` declared by ``by`` (:func:`guards.declare_down`: ``w`` is up,
        another incarnation is up, ``w``'s heartbeat is ``down_after`` seconds old — on the
        durable store's clock, read in this transaction).  The worker's row is locked, so
        a heartbeat serializes with the declaration; the log row ``(worker:w, 2,
        CrashWorker)`` is the same a clean shutdown writes, so at most one of them commits.
        The caller raises the coordination and target fences *before* (see
        :meth:`Reconciler.declare_down`).  Raises :class:`NotEnabled` when the guard is
        false."""
        seq = actor.next_seq()
        subject = f"worker:{worker_id}"

        def body(cur: Any) -> None:
            row = cur.execute(
                self._q(f"SELECT up, seen, {self._now_sql()} FROM remora_jobs_worker WHERE id = ?")
                + self.backend.lock_clause,
                (*self._now_param(now), worker_id),
            ).fetchone()
            others = cur.execute(
                self._q("SELECT count(*) FROM remora_jobs_worker WHERE up = 1 AND id <> ?"),
                (worker_id,),
            ).fetchone()
            guards.declare_down(
                worker_id,
                by,
                up=row is not None and bool(row[0]),
                seen=float(row[1]) if row is not None else 0.0,
                now=float(row[2]) if row is not None else 0.0,
                down_after=down_after,
                others_up=bool(others and int(others[0]) > 0),
            )
            cur.execute(
                self._q("UPDATE remora_jobs_worker SET up = 0, version = 2 WHERE id = ?"),
                (worker_id,),
            )
            self._log(cur, subject, 2, Action.CRASH_WORKER, {"w": worker_id}, actor.name, seq, "")

        self._write_resolved(actor, seq, subject, body, lambda: None)
        actor.record(
            seq, Action.CRASH_WORKER, {"w": worker_id}, store="durable", key=subject, version=2
        )

    def with_lock(self, actor: Actor, job_id: str, block: Callable[[Locked], T]) -> T:
        """Run ``block(locked)`` while holding ``job_id``'s lock (no durable change is made):
        the reconciler's cross-store steps.  No durable transition of the job can commit
        while ``block`` runs, so the row it sees is the job's durable state throughout."""

        return self._holding(actor, job_id, lambda cur: self._lock(cur, job_id), block)

    def with_job_lock(self, actor: Actor, job_id: str, block: Callable[[JobRow], T]) -> T:
        """:meth:`with_lock` for a ``block`` that needs only the job's row: the row lock is
        the only read (on PostgreSQL one statement fewer than the locked read of the job's
        attempts, intents and the workers down).  The steps whose guard is a fact of the
        job row alone (``CleanTerminalCoordination``, ``PublishCancelNotice``, …) use it."""

        def lock_row(cur: Any) -> JobRow:
            row = cur.execute(self._lock_job_sql, (job_id,)).fetchone()
            if row is None:
                raise UnknownJob(f"no job {job_id!r}")
            return _job(tuple(row))

        return self._holding(actor, job_id, lock_row, block)

    def _holding(
        self, actor: Actor, job_id: str, lock: Callable[[Any], L], block: Callable[[L], T]
    ) -> T:
        """Take the job's lock with ``lock`` (in a transaction that writes nothing), run
        ``block`` on what it read, with ``actor.held`` naming the job's version meanwhile."""

        def body(cur: Any) -> T:
            held = lock(cur)
            row = held.job if isinstance(held, Locked) else held
            assert isinstance(row, JobRow)
            actor.held = (job_id, row.version)
            try:
                return block(held)
            finally:
                actor.held = None

        return io_call(
            actor,
            JobOperation.DURABLE_READ,
            job_id,
            lambda commit: self.backend.write(actor.ctx, False, "job lock", body),
        )

    # -- reads ------------------------------------------------------------------------------
    def read_locked(self, actor: Actor, job_id: str) -> Locked:
        """The job's rows (a consistent read; no lock is kept)."""
        return io_call(
            actor,
            JobOperation.DURABLE_READ,
            job_id,
            lambda commit: self.backend.read(
                "job read", lambda cur: self._lock(cur, job_id, lock=False)
            ),
        )

    def job(self, job_id: str) -> JobRow:
        row = self.backend.read_one(
            "job", self._q(f"SELECT {JOB_COLUMNS} FROM remora_jobs_job WHERE id = ?"), (job_id,)
        )
        if row is None:
            raise UnknownJob(f"no job {job_id!r}")
        return _job(tuple(row))

    def jobs(self, *, active_only: bool = False) -> list[JobRow]:
        where = "WHERE phase NOT IN ('Succeeded', 'Failed', 'Cancelled') " if active_only else ""
        rows = self.backend.read(
            "jobs",
            lambda cur: cur.execute(
                f"SELECT {JOB_COLUMNS} FROM remora_jobs_job {where}ORDER BY seq, id"
            ).fetchall(),
        )
        return [_job(tuple(r)) for r in rows]

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
                tuple(_job(tuple(r)) for r in jobs),
                tuple(_attempt(tuple(r)) for r in attempts),
                tuple(WorkerRow(r[0], bool(r[1])) for r in workers),
                tuple(_credential(tuple(r)) for r in creds),
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

        def body(cur: Any) -> DurableSnapshot:
            flight = f"j.phase NOT IN {TERMINAL_SQL} OR j.seq >= {self.backend.placeholder}"
            jobs = {
                r[0]: _job(tuple(r))
                for r in cur.execute(
                    f"SELECT {_qualified('j', JOB_COLUMNS)} FROM remora_jobs_job j WHERE {flight}",
                    (since_seq,),
                ).fetchall()
            }
            extra = sorted(also - jobs.keys())

            def rows(table: str, columns: str, pending: str = "") -> list[tuple[Any, ...]]:
                """``table``'s rows of the jobs read above (and ``pending`` ones)."""
                out: list[tuple[Any, ...]] = cur.execute(
                    f"SELECT {_qualified('x', columns)} FROM {table} x JOIN remora_jobs_job j "
                    f"ON j.id = x.job WHERE {flight}{pending}",
                    (since_seq,),
                ).fetchall()
                for i in range(0, len(extra), 500):
                    part = extra[i : i + 500]
                    marks = ", ".join(self.backend.placeholder for _ in part)
                    out += cur.execute(
                        f"SELECT {columns} FROM {table} WHERE job IN ({marks})", part
                    ).fetchall()
                return out

            for i in range(0, len(extra), 500):
                part = extra[i : i + 500]
                marks = ", ".join(self.backend.placeholder for _ in part)
                for r in cur.execute(
                    f"SELECT {JOB_COLUMNS} FROM remora_jobs_job WHERE id IN ({marks})", part
                ).fetchall():
                    jobs[r[0]] = _job(tuple(r))
            attempts = {
                (r[0], int(r[1])): _attempt(tuple(r))
                for r in rows("remora_jobs_attempt", ATTEMPT_COLUMNS, " OR x.pending <> ''")
            }
            creds = {
                (r[0], int(r[1])): _credential(tuple(r))
                for r in rows("remora_jobs_credential", CREDENTIAL_COLUMNS)
            }
            down = cur.execute("SELECT id FROM remora_jobs_worker WHERE up = 0").fetchall()
            return DurableSnapshot(
                tuple(sorted(jobs.values(), key=lambda j: (j.seq, j.id))),
                tuple(attempts[k] for k in sorted(attempts)),
                tuple(WorkerRow(r[0], False) for r in down),
                tuple(creds[k] for k in sorted(creds)),
            )

        return self.backend.read("active snapshot", body)

    def worker_up(self, worker_id: str) -> bool:
        row = self.backend.read(
            "worker",
            lambda cur: cur.execute(
                self._q("SELECT up FROM remora_jobs_worker WHERE id = ?"), (worker_id,)
            ).fetchone(),
        )
        return row is not None and bool(row[0])

    def log(self) -> list[LogEntry]:
        rows = self.backend.read(
            "log",
            lambda cur: cur.execute(
                "SELECT subject, version, action, params, actor, actor_seq FROM remora_jobs_log "
                "ORDER BY subject, version"
            ).fetchall(),
        )
        return [LogEntry(r[0], int(r[1]), r[2], json.loads(r[3]), r[4], int(r[5])) for r in rows]

    def find_log(self, actor: str, seq: int) -> tuple[LogEntry, str] | None:
        """The log row a call of ``(actor, seq)`` committed, with its result (resolution of
        an unknown result); ``None`` when it did not commit.  Raises
        :class:`~remora.errors.UnknownResult` when the store cannot be read."""
        try:
            row = self.backend.read_one(
                "resolve",
                self._q(
                    "SELECT subject, version, action, params, actor, actor_seq, result "
                    "FROM remora_jobs_log WHERE actor = ? AND actor_seq = ?"
                ),
                (actor, seq),
            )
        except Unavailable as exc:
            raise UnknownResult(f"cannot resolve an unknown result: {exc}") from exc
        if row is None:
            return None
        entry = LogEntry(row[0], int(row[1]), row[2], json.loads(row[3]), row[4], int(row[5]))
        return entry, row[6]

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

    def close(self) -> None:
        self.backend.close()


# -- backends ----------------------------------------------------------------------------------


class SqliteJobsBackend(SqliteBackend):
    """SQLite (a file, or ``:memory:`` for simulation)."""

    placeholder = "?"
    lock_clause = ""
    fold_statements = False
    server_clock = False

    def __init__(self, path: str | Path = ":memory:", lock_timeout: float = 5.0) -> None:
        super().__init__(path, lock_timeout)
        self.where = str(path)

    def _migrate(self) -> None:
        with self._lock:
            self._begin(None)
            try:
                for statement in TABLES:
                    self._conn.execute(statement)
                add_missing_columns(self._conn, postgres=False)
                row = self._conn.execute(
                    "SELECT value FROM remora_jobs_config WHERE name = 'schema_version'"
                ).fetchone()
                if row is not None and int(row[0]) > SCHEMA_VERSION:
                    raise InvalidInput(
                        f"{self.path}: jobs schema version {row[0]} is newer than this Remora "
                        f"supports ({SCHEMA_VERSION})"
                    )
                self._conn.execute(
                    "INSERT OR REPLACE INTO remora_jobs_config(name, value) "
                    "VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def write(self, ctx: Context, commit: bool, what: str, body: Callable[[Any], T]) -> T:
        with self._transaction(ctx, commit) as conn:
            result = body(conn)
        return result

    def read(self, what: str, body: Callable[[Any], T]) -> T:
        with self._lock:
            try:
                return body(self._conn)
            except sqlite3.OperationalError as exc:
                raise Unavailable(f"sqlite {what}: {exc}") from exc

    def read_one(self, what: str, sql: str, params: Any) -> Any:
        return self.read(what, lambda cur: cur.execute(sql, params).fetchone())


def open_sqlite(path: str | Path = ":memory:") -> DurableStore:
    return DurableStore(SqliteJobsBackend(path))


def open_postgres(dsn: str, *, migrate: bool = True, injected_clock: bool = False) -> DurableStore:
    """``injected_clock``: heartbeats on the caller's clock instead of the server's (a
    simulation on PostgreSQL, whose time is logical)."""
    from remora.jobs.postgres import PostgresJobsBackend

    backend = PostgresJobsBackend(dsn, migrate=migrate)
    if injected_clock:
        backend.server_clock = False
    return DurableStore(backend)


__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "Also",
    "Backend",
    "DurableStore",
    "Locked",
    "NotEnabled",
    "SqliteJobsBackend",
    "guards",
    "open_postgres",
    "open_sqlite",
]
