"""The job runtime on PostgreSQL: the durable store's backend, the target staging schema and
the vault schema.

:class:`PostgresJobsBackend` reuses :class:`remora.store.postgres.PostgresBackend`'s
connection pool, error mapping and lost-COMMIT settling (a broken connection during
``COMMIT`` is an :class:`~remora.errors.UnknownResult` only after the server session
finished its transaction); it owns its own schema (``remora_jobs_*`` tables, version in
``remora_jobs_config``), created under the same advisory lock.  Job rows are locked with
``SELECT … FOR UPDATE``.  Write transactions run in psycopg's pipeline mode
(:meth:`PostgresJobsBackend.write`): the same statements in the same order, but those whose
results nobody waits for travel together — a durable transition takes two round trips
(``BEGIN``, lock and locked read; writes and ``COMMIT``), a stage write one.

:class:`PostgresTarget` stages each attempt's snapshots in ``remora_jobs_stage``;
:class:`PostgresVault` keeps secrets in ``remora_jobs_vault`` (a destroyed secret keeps its
row with ``secret = NULL``).  Both may live in the durable store's database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import attrs
import psycopg

from remora.context import Context
from remora.errors import InvalidInput
from remora.jobs.durable import DurableStore
from remora.jobs.io import Actor, JobOperation, io_call, resolved_call
from remora.jobs.model import AttemptId, IntentId, NotEnabled, SecretState, StageInfo
from remora.jobs.sql import EXTRA_TABLES, PG_SCHEMA, SCHEMA_VERSION, Also, Locked
from remora.jobs.transactions import Prepare
from remora.store.dialect import POSTGRES
from remora.store.postgres import PostgresBackend, _rollback_quietly

T = TypeVar("T")


class PostgresJobsBackend(PostgresBackend):
    dialect = POSTGRES
    schema = PG_SCHEMA
    #: Pipeline mode needs libpq 14 or later (psycopg's binary wheels bundle one); without
    #: it the same statements run one round trip each.
    pipelined = psycopg.Pipeline.is_supported()

    def _require_schema(self) -> None:
        version = self.schema_version()
        if version is None:
            raise InvalidInput(f"{self.where}: no Remora jobs schema in this database")
        if version != SCHEMA_VERSION:
            raise InvalidInput(
                f"{self.where}: jobs schema version {version}, this Remora uses {SCHEMA_VERSION}"
            )

    def write(self, ctx: Context, commit: bool, what: str, body: Callable[[Any], T]) -> T:
        """:meth:`PostgresBackend._write` in pipeline mode: the same statements, in the same
        order, in one transaction, but a statement whose result nobody waits for travels
        with the next ones.  ``BEGIN``, the row lock and the locked read go out together
        (one round trip: the read is still a statement of its own, so its snapshot is taken
        after the lock was granted); the writes, whose results the body does not read, go
        out with ``COMMIT`` (one round trip).

        A failure is classified as before: once ``COMMIT`` was handed to the pipeline an
        error with a server reply on a live connection is definitive (the server rolled
        back; a write's error also surfaces here, and it is definitive too: the transaction
        aborted, so the ``COMMIT`` rolled back), and a connection lost is an
        :class:`~remora.errors.UnknownResult` after the lost session was settled, which the
        callers resolve by re-reading as they always did."""
        return self.write_then(ctx, commit, what, lambda cur: _now(body(cur)))

    def write_then(
        self, ctx: Context, commit: bool, what: str, body: Callable[[Any], Callable[[], T]]
    ) -> T:
        """:meth:`write` whose ``body`` returns a function that reads its statements'
        results once ``COMMIT``'s reply is in: a transaction whose writes decide nothing
        before its end takes one round trip (the stage write)."""
        with self._connection(ctx) as conn:
            committing = False  # True once COMMIT may have reached the server
            try:
                with conn.cursor() as cur:
                    with conn.pipeline() if self.pipelined else contextlib.nullcontext():
                        cur.execute("BEGIN")
                        then = body(cur)
                        ctx.check()  # canceled while we worked: roll back rather than commit
                        if commit:
                            committing = True
                            self._commit(cur)
                        else:
                            cur.execute("ROLLBACK")
                    # Leaving the pipeline block sent the Sync and read every reply.
                    return then()
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                if committing:
                    raise self._commit_failure(exc, conn, ctx, what) from exc
                raise self._failure(exc, ctx, what) from exc
            except BaseException:
                _rollback_quietly(conn)
                raise

    def read(self, what: str, body: Callable[[Any], T]) -> T:
        return self._read(what, body)

    def read_one(self, what: str, sql: str, params: Any) -> Any:
        """One statement's first row, in its own (implicit) transaction: a single
        statement reads one snapshot, so ``BEGIN``/``COMMIT`` would be two more round
        trips for nothing."""
        with self._connection(None) as conn:
            try:
                return conn.execute(sql, params).fetchone()
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                raise self._failure(exc, None, what) from exc

    def read_all(self, what: str, sql: str, params: Any) -> list[Any]:
        """:meth:`read_one`'s every row (one statement, one snapshot)."""
        with self._connection(None) as conn:
            try:
                return conn.execute(sql, params).fetchall()
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                raise self._failure(exc, None, what) from exc


def _info_query(a: AttemptId) -> Also:
    return (
        "SELECT max(progress), max(cleaned) FROM remora_jobs_stage WHERE job = %s AND token = %s",
        (a.job, a.token),
    )


def _stage_info(row: Any) -> StageInfo | None:
    if row is None or row[0] is None:
        return None
    return StageInfo(int(row[0]), bool(row[1]))


def _now(value: T) -> Callable[[], T]:
    return lambda: value


#: The class id of the stage's advisory locks (two-key locks: apart from the one-key
#: migration lock).
STAGE_LOCK_CLASS = 0x5354  # "ST"


def _lock_attempt(cur: Any, a: AttemptId) -> None:
    """Serialize the stage writes and the cleanup of one attempt (a transaction-scoped
    advisory lock, taken by a statement of its own so that the next statement's snapshot
    sees what the previous holder committed).  Without it a write racing ``CleanupStage``
    checked for the cleaned mark in a snapshot from before the cleanup committed, and a row
    at a new progress did not conflict with the rows the cleanup updated: the zombie's write
    went in beside the cleanup (``tests/jobs/test_stage_race.py``)."""
    cur.execute(
        "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
        (STAGE_LOCK_CLASS, f"{a.job}#{a.token}"),
    )


#: A stage write's fence condition (two parameters: the worker, twice): no declarer holds a
#: fence of the worker, nor did an earlier version (``remora_jobs_stage_fence``, one row
#: per worker, never lifted).
_UNFENCED = (
    "NOT EXISTS (SELECT 1 FROM remora_jobs_stage_fences WHERE worker = %s) "
    "AND NOT EXISTS (SELECT 1 FROM remora_jobs_stage_fence WHERE worker = %s)"
)
_FENCED = (
    "SELECT worker FROM remora_jobs_stage_fences UNION SELECT worker FROM remora_jobs_stage_fence"
)


class _PgStore:
    def __init__(self, dsn: str) -> None:
        self.backend = PostgresJobsBackend(dsn)

    def _write(
        self,
        actor: Actor,
        op: JobOperation,
        key: str,
        body: Callable[[Any], T],
        applied: Callable[[], bool],
        done: T,
    ) -> T:
        return resolved_call(
            actor,
            op,
            key,
            lambda commit: self.backend.write(actor.ctx, commit, op.value, body),
            applied,
            lambda: done,
        )

    def close(self) -> None:
        self.backend.close()


class PostgresTarget(_PgStore):
    """Target staging in PostgreSQL (``remora_jobs_stage``)."""

    def fence(self, actor: Actor, worker: str) -> None:
        """Refuse ``worker``'s later stage writes (``actor``'s own fence: a row of
        ``remora_jobs_stage_fences``).  A write whose statement began before the fence
        committed may still go in — but it holds its attempt's advisory lock until it
        commits, so it is serialized before that attempt's cleanup, which removes it
        (``tests/jobs/test_stage_race.py``)."""

        def body(cur: Any) -> None:
            cur.execute(
                "INSERT INTO remora_jobs_stage_fences (worker, holder) VALUES (%s, %s) "
                "ON CONFLICT (worker, holder) DO NOTHING",
                (worker, actor.name),
            )

        def applied() -> bool:
            return worker in self.fenced(actor.name)

        self._write(actor, JobOperation.TARGET_WRITE, "", body, applied, None)

    def unfence(self, actor: Actor, workers: Iterable[str]) -> None:
        ids = sorted(workers)

        def body(cur: Any) -> None:
            cur.execute(
                "DELETE FROM remora_jobs_stage_fences WHERE holder = %s AND worker = ANY(%s)",
                (actor.name, ids),
            )

        def applied() -> bool:
            return not (self.fenced(actor.name) & set(ids))

        self._write(actor, JobOperation.TARGET_WRITE, "", body, applied, None)

    def fenced(self, holder: str | None = None) -> frozenset[str]:
        """Every fenced incarnation (an earlier version's ``remora_jobs_stage_fence``
        rows too: held by no declarer, never lifted), or only ``holder``'s."""
        if holder is None:
            rows = self.backend.read_all("stage fences", _FENCED, ())
        else:
            rows = self.backend.read_all(
                "stage fences",
                "SELECT worker FROM remora_jobs_stage_fences WHERE holder = %s",
                (holder,),
            )
        return frozenset(str(r[0]) for r in rows)

    def write(
        self, actor: Actor, a: AttemptId, progress: int, data: bytes, worker: str = ""
    ) -> None:
        def body(cur: Any) -> Callable[[], bool]:
            _lock_attempt(cur, a)
            # One statement whose condition is the refusal check, sent with the lock, and
            # COMMIT sent without waiting for its result: one round trip.  A refused write
            # committed an empty transaction; the reason is read only then (both facts it
            # reads, the cleaned mark and the highest progress, only ever grow).
            inserted = cur.connection.cursor()
            inserted.execute(
                "INSERT INTO remora_jobs_stage (job, token, progress, data) "
                "SELECT %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM remora_jobs_stage "
                "WHERE job = %s AND token = %s AND (cleaned = 1 OR progress >= %s)) "
                f"AND {_UNFENCED} RETURNING 1",
                (a.job, a.token, progress, data, a.job, a.token, progress, worker, worker),
            )
            return lambda: inserted.fetchone() is not None

        def effect(commit: bool) -> None:
            done = self.backend.write_then(actor.ctx, commit, JobOperation.TARGET_WRITE.value, body)
            if done or not commit:
                return
            if worker in self.fenced():
                raise NotEnabled(f"worker {worker} is down: its stage writes are fenced")
            info = self.info(None, a)
            if info is not None and info.cleaned:
                raise NotEnabled(f"staging of {a} was cleaned")
            if info is not None and progress <= info.progress:
                raise NotEnabled(f"{a}: progress {progress} is not ahead")
            raise NotEnabled(f"{a}: the stage write at {progress} was refused")  # not reached

        def applied() -> bool:
            info = self.info(None, a)
            return info is not None and info.progress >= progress and not info.cleaned

        resolved_call(actor, JobOperation.TARGET_WRITE, a.job, effect, applied, lambda: None)

    def info(self, actor: Actor | None, a: AttemptId) -> StageInfo | None:
        def read(commit: bool = True) -> StageInfo | None:
            return _stage_info(self.backend.read_one("stage info", *_info_query(a)))

        if actor is None:
            return read()
        return io_call(actor, JobOperation.TARGET_READ, a.job, read)

    def locked_info(self, durable: DurableStore, a: AttemptId) -> Also | None:
        """:meth:`info`'s read for ``durable.transact(…, also=…)`` when this target lives in
        the durable store's database (the same DSN): then it travels with the job's locked
        read instead of taking a round trip of its own (``AcceptSuccess``'s guard);
        ``None`` otherwise."""
        backend = durable.backend
        if not isinstance(backend, PostgresJobsBackend) or backend.dsn != self.backend.dsn:
            return None
        return _info_query(a)

    def locked_write(
        self, durable: DurableStore, a: AttemptId, progress: int, data: bytes, worker: str
    ) -> Prepare | None:
        """:meth:`write` as the first write of a fused durable transaction
        (:meth:`~remora.jobs.transactions.Transactions.transact_steps`'s ``prepare``) when
        this target lives in the durable store's database (``None`` otherwise): the stage
        write then commits with the ``SendOutcome`` and ``ProcessOutcome`` that need it —
        one COMMIT instead of two.  Taken after the job's row lock (the order every other
        holder of both takes them in: the reconciler's cleanup runs under the job's lock),
        with the same refusal condition and the same advisory lock as :meth:`write`; a
        refusal raises :class:`~remora.errors.NotEnabled` and rolls the whole transaction
        back.  The locked read's ``also`` becomes the stage row as written — known without
        reading it: the insert went in only where no row of the attempt was cleaned or at
        ``progress`` or beyond, so the attempt's highest progress is now ``progress`` and
        nothing of it is cleaned (one statement fewer than reading it back)."""
        if self.locked_info(durable, a) is None:
            return None

        def prepare(cur: Any, locked: Locked) -> Locked:
            _lock_attempt(cur, a)
            inserted = cur.execute(
                "INSERT INTO remora_jobs_stage (job, token, progress, data) "
                "SELECT %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM remora_jobs_stage "
                "WHERE job = %s AND token = %s AND (cleaned = 1 OR progress >= %s)) "
                f"AND {_UNFENCED} RETURNING 1",
                (a.job, a.token, progress, data, a.job, a.token, progress, worker, worker),
            ).fetchone()
            if inserted is None:
                raise NotEnabled(f"{a}: the stage write at {progress} was refused")
            return attrs.evolve(locked, also=(progress, 0))

        return prepare

    def info_from(self, actor: Actor, a: AttemptId, row: Any) -> StageInfo | None:
        """:meth:`info` from the row :meth:`locked_info`'s read returned: the same modeled
        call (link gate, fault seam), its effect already taken under the lock."""
        return io_call(actor, JobOperation.TARGET_READ, a.job, lambda commit: _stage_info(row))

    def data(self, a: AttemptId, progress: int | None = None) -> bytes | None:
        row = self.backend.read_one(
            "stage data",
            "SELECT data FROM remora_jobs_stage WHERE job = %s AND token = %s AND "
            "cleaned = 0 AND progress <= %s ORDER BY progress DESC LIMIT 1",
            (a.job, a.token, progress if progress is not None else 2**31 - 1),
        )
        return None if row is None or row[0] is None else bytes(row[0])

    def cleanup(self, actor: Actor, a: AttemptId) -> bool:
        def body(cur: Any) -> bool:
            _lock_attempt(cur, a)
            row = cur.execute(
                "SELECT max(progress), max(cleaned) FROM remora_jobs_stage "
                "WHERE job = %s AND token = %s",
                (a.job, a.token),
            ).fetchone()
            if row is not None and row[1]:
                return False
            cur.execute(
                "UPDATE remora_jobs_stage SET data = NULL, cleaned = 1 "
                "WHERE job = %s AND token = %s",
                (a.job, a.token),
            )
            if row is None or row[0] is None:
                cur.execute(
                    "INSERT INTO remora_jobs_stage (job, token, progress, data, cleaned) "
                    "VALUES (%s, %s, 0, NULL, 1)",
                    (a.job, a.token),
                )
            return True

        def applied() -> bool:
            info = self.info(None, a)
            return info is not None and info.cleaned

        return self._write(actor, JobOperation.TARGET_WRITE, a.job, body, applied, True)

    def snapshot(self) -> dict[AttemptId, StageInfo]:
        rows = self.backend.read(
            "stage snapshot",
            lambda cur: cur.execute(
                "SELECT job, token, max(progress), max(cleaned) FROM remora_jobs_stage "
                "GROUP BY job, token"
            ).fetchall(),
        )
        return {AttemptId(r[0], int(r[1])): StageInfo(int(r[2]), bool(r[3])) for r in rows}


class PostgresVault(_PgStore):
    """Credential secrets in PostgreSQL (``remora_jobs_vault``)."""

    def state(self, actor: Actor | None, c: IntentId) -> SecretState:
        def read(commit: bool = True) -> SecretState:
            row = self.backend.read_one(
                "vault state",
                "SELECT secret IS NOT NULL FROM remora_jobs_vault WHERE job = %s AND sequence = %s",
                (c.job, c.sequence),
            )
            if row is None:
                return SecretState.ABSENT
            return SecretState.LIVE if row[0] else SecretState.DESTROYED

        if actor is None:
            return read()
        return io_call(actor, JobOperation.VAULT_READ, c.job, read)

    def write(self, actor: Actor, c: IntentId, secret: bytes) -> None:
        def body(cur: Any) -> None:
            row = cur.execute(
                "INSERT INTO remora_jobs_vault (job, sequence, secret) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (c.job, c.sequence, secret),
            ).fetchone()
            if row is None:
                raise NotEnabled(f"vault entry {c} exists")

        self._write(
            actor,
            JobOperation.VAULT_WRITE,
            c.job,
            body,
            lambda: self.state(None, c) is SecretState.LIVE,
            None,
        )

    def destroy(self, actor: Actor, c: IntentId) -> None:
        def body(cur: Any) -> None:
            row = cur.execute(
                "UPDATE remora_jobs_vault SET secret = NULL WHERE job = %s AND sequence = %s "
                "AND secret IS NOT NULL RETURNING 1",
                (c.job, c.sequence),
            ).fetchone()
            if row is None:
                raise NotEnabled(f"no live secret {c}")

        self._write(
            actor,
            JobOperation.VAULT_WRITE,
            c.job,
            body,
            lambda: self.state(None, c) is SecretState.DESTROYED,
            None,
        )

    def read(self, c: IntentId) -> bytes | None:
        row = self.backend.read(
            "vault read",
            lambda cur: cur.execute(
                "SELECT secret FROM remora_jobs_vault WHERE job = %s AND sequence = %s",
                (c.job, c.sequence),
            ).fetchone(),
        )
        return None if row is None or row[0] is None else bytes(row[0])

    def snapshot(self) -> dict[IntentId, SecretState]:
        rows = self.backend.read(
            "vault snapshot",
            lambda cur: cur.execute(
                "SELECT job, sequence, secret IS NOT NULL FROM remora_jobs_vault"
            ).fetchall(),
        )
        return {
            IntentId(r[0], int(r[1])): SecretState.LIVE if r[2] else SecretState.DESTROYED
            for r in rows
        }


__all__ = ["EXTRA_TABLES", "PostgresJobsBackend", "PostgresTarget", "PostgresVault"]
