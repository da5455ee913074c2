"""The PostgreSQL backend (psycopg 3): the production store for workers on several hosts.

Semantics are those of every backend (see :mod:`remora.store.base`); what PostgreSQL adds is
real concurrency, so the fence is enforced with a row lock:

* ``claim`` is one upsert (``INSERT … ON CONFLICT DO UPDATE SET epoch = epoch + 1``), which
  takes the partition row's lock, in its own transaction;
* ``process`` is one transaction: ``SELECT … FOR UPDATE`` locks the partition row (and reads
  the subject's state in the same round trip), :func:`check_fence` runs against the locked
  row, the fold decides, and the outbox or quarantine row, the intent, the subject state and
  the new frontier are written before ``COMMIT``.  A competing claim waits for the lock, so
  it lands either wholly before (the stale owner then reads the new epoch and is fenced) or
  wholly after (the owner's commit is legitimate and the claim reads its frontier);
* ``commit=False`` (the ``unknown-aborted`` outcome) runs the same statements and sends
  ``ROLLBACK`` instead of ``COMMIT``.

Errors (all :class:`~remora.errors.RemoraError`):

* a failure before ``COMMIT`` was sent — connection refused or lost, lock timeout,
  serialization failure — rolled the transaction back: :class:`Unavailable` (retried);
* the connection lost while ``COMMIT`` was in flight: :class:`UnknownResult` — the server may
  or may not have committed; only a re-read can tell (the lifecycle does that).  Before
  reporting it, the store *settles* the lost server session (:meth:`PostgresBackend._settle`):
  it waits until that session has finished its transaction, terminating it if it still sits
  idle inside it, so the caller's re-read is final — the outcome is decided at the same
  boundary as the memory model's ``unknown-committed``/``unknown-aborted``;
* ``COMMIT`` answered with an error on a live connection: the server rolled back, so
  :class:`Unavailable` (or :class:`Canceled`);
* a statement canceled by ``Lifecycle.stop()`` (``ctx.on_cancel`` → the driver's cancel
  request): :class:`Canceled`;
* a malformed DSN, or a schema newer than this code: :class:`InvalidInput`;
* anything else the server refuses (e.g. a constraint violation): :class:`StoreError`.

Sessions run with ``lock_timeout`` and ``idle_in_transaction_session_timeout`` set to the
store's lock timeout (5 s by default), so neither a waiting call nor a session orphaned by a
vanished client can hold things up for longer.

Connections: a small free list.  Each call takes an idle connection (or opens one), uses it
alone for the whole transaction, and gives it back; so any number of threads and lifetimes
can share one store, each call on its own connection.  A connection that failed, or whose
call was canceled, is closed instead of being reused.

The schema is owned by the store: versioned in ``remora_meta``, created or upgraded in one
transaction under a transaction-scoped advisory lock, so processes starting at once
serialize, and a second start changes nothing.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from remora.context import Context
from remora.domain import (
    AMENDMENTS,
    Decision,
    Intent,
    OutboxEntry,
    Processing,
    QuarantineEntry,
    SourceRecord,
    SubjectState,
)
from remora.errors import (
    Canceled,
    InvalidInput,
    RemoraError,
    StoreError,
    Unavailable,
    UnknownResult,
)
from remora.faults import NO_FAULTS, IOHook
from remora.store import identity
from remora.store.base import (
    Backend,
    PartitionRow,
    PartitionState,
    PartitionSummary,
    StateStore,
    StoreSnapshot,
    Token,
    check_fence,
)
from remora.store.dialect import POSTGRES, AddedColumn, Schema, migrate
from remora.store.identity import SourceIdentity
from remora.store.sql import (
    SELECT_INTENTS,
    SELECT_OUTBOX,
    SELECT_PARTITIONS,
    SELECT_QUARANTINE,
    SELECT_SUMMARIES,
    decision_writes,
)

T = TypeVar("T")

SCHEMA_VERSION = 2

MIGRATION_LOCK = 0x52454D4F5241  # "REMORA": the advisory lock key migrations serialize on

# Statements that take schema version v-1 to v (index v-1).  Never edit a released entry:
# append a new one and bump SCHEMA_VERSION.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE remora_partition (
            partition integer PRIMARY KEY CHECK (partition >= 0),
            epoch bigint NOT NULL CHECK (epoch >= 0),
            frontier bigint NOT NULL CHECK (frontier >= 0),
            next_seq bigint NOT NULL CHECK (next_seq >= 1))""",
        """CREATE TABLE remora_subject (
            partition integer NOT NULL, subject text NOT NULL, revision integer NOT NULL,
            status text NOT NULL, blocked boolean NOT NULL, body text,
            PRIMARY KEY (partition, subject))""",
        """CREATE TABLE remora_outbox (
            partition integer NOT NULL, seq bigint NOT NULL, subject text NOT NULL,
            version integer NOT NULL, op text NOT NULL, body text NOT NULL,
            "offset" bigint NOT NULL,
            PRIMARY KEY (partition, seq), UNIQUE (partition, "offset"))""",
        """CREATE TABLE remora_quarantine (
            partition integer NOT NULL, "offset" bigint NOT NULL, subject text,
            reason text NOT NULL, detail text NOT NULL,
            PRIMARY KEY (partition, "offset"))""",
        """CREATE TABLE remora_intent (
            partition integer NOT NULL, subject text NOT NULL, version integer NOT NULL,
            body text NOT NULL, "offset" bigint NOT NULL,
            PRIMARY KEY (partition, subject, version))""",
    ),
    # 2: the source identity per partition (remora.store.identity)
    (identity.CREATE_SQL,),
)

#: Columns added to released tables outside a versioned migration (none yet): added on
#: start when missing (:func:`remora.store.dialect.add_missing_columns`).
ADDED_COLUMNS: tuple[AddedColumn, ...] = ()

SCHEMA = Schema(
    version=SCHEMA_VERSION,
    version_table=("remora_meta", "key"),
    create=("CREATE TABLE IF NOT EXISTS remora_meta (key text PRIMARY KEY, value text NOT NULL)",),
    upgrades=MIGRATIONS,
    added=ADDED_COLUMNS,
)

# The one read of a process transaction: lock the partition row, read the subject with it.
LOCK_PARTITION_SQL = """
SELECT p.epoch, p.frontier, p.next_seq, s.revision, s.status, s.blocked, s.body
FROM remora_partition AS p
LEFT JOIN remora_subject AS s ON s.partition = p.partition AND s.subject = %s
WHERE p.partition = %s
FOR UPDATE OF p"""

CLAIM_SQL = """
INSERT INTO remora_partition AS p (partition, epoch, frontier, next_seq)
VALUES (%s, 1, 0, 1)
ON CONFLICT (partition) DO UPDATE SET epoch = p.epoch + 1
RETURNING p.epoch, p.frontier"""

DEFAULT_LOCK_TIMEOUT = 5.0
DEFAULT_CONNECT_TIMEOUT = 5.0
CANCEL_TIMEOUT = 5.0
SETTLE_GRACE = 0.1  # seconds an orphaned session may stay idle in its transaction

# Run once per new connection: the session settings, and the server session's identity for
# settling a lost COMMIT (a pid alone could be reused by a later session).  Settings are
# made with set_config rather than startup options, which some poolers reject.  A session
# orphaned inside a transaction (its client vanished without closing the socket) holds the
# partition row lock until the server ends it: idle_in_transaction_session_timeout bounds
# that as lock_timeout bounds a wait.
SESSION_SQL = """
SELECT pg_backend_pid(),
       (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()),
       set_config('lock_timeout', %s, false),
       set_config('idle_in_transaction_session_timeout', %s, false)"""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (libpq's messages span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def parse_dsn(dsn: str) -> dict[str, Any]:
    """The DSN's parameters; :class:`InvalidInput` when it does not parse."""
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise InvalidInput(f"bad PostgreSQL DSN: {one_line(exc)}") from None


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, without its password (for messages and output)."""
    params = parse_dsn(dsn)
    parts = [f"{k}={params[k]}" for k in ("host", "port", "dbname", "user") if params.get(k)]
    return " ".join(parts) or "(libpq defaults)"


class PostgresBackend(Backend):
    """A :class:`~remora.store.base.Backend` on PostgreSQL (see the module docstring)."""

    #: The schema created or upgraded on start (the job runtime's backend has its own).
    schema: Schema = SCHEMA

    lock_sql = LOCK_PARTITION_SQL

    def __init__(
        self,
        dsn: str,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_idle: int = 8,
        migrate: bool = True,
        settle_timeout: float | None = None,
        settle_grace: float = SETTLE_GRACE,
        processing: Processing = AMENDMENTS,
    ) -> None:
        params = parse_dsn(dsn)
        self.processing = processing
        self.dsn = dsn
        self.where = describe_dsn(dsn)
        self._lock_ms = str(max(1, round(lock_timeout * 1000)))
        defaults: dict[str, Any] = {
            "connect_timeout": max(1, round(connect_timeout)),
            "application_name": "remora",
            # Notice a dead server or network within seconds, not the kernel's minutes: a
            # call blocked on a vanished peer must end (as Unavailable/UnknownResult).
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
            "tcp_user_timeout": 15000,
        }
        overrides = {k: v for k, v in defaults.items() if k not in params}
        self._conninfo = make_conninfo(dsn, **overrides)
        self.max_idle = max_idle
        self.settle_timeout = lock_timeout if settle_timeout is None else settle_timeout
        self.settle_grace = settle_grace
        self._lock = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []
        self._sessions: weakref.WeakKeyDictionary[psycopg.Connection[Any], tuple[Any, ...]]
        self._sessions = weakref.WeakKeyDictionary()
        self._closed = False
        self._statement_hook: Callable[[str], None] | None = None
        try:
            if migrate:
                self._migrate()
            else:
                self._require_schema()
        except BaseException:
            self.close()
            raise

    # -- connections ----------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.Connection.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise Unavailable(
                f"cannot connect to PostgreSQL ({self.where}): {one_line(exc)}"
            ) from None
        try:
            session = conn.execute(SESSION_SQL, (self._lock_ms, self._lock_ms)).fetchone()
        except psycopg.Error as exc:
            _close_quietly(conn)
            raise Unavailable(f"postgres connect: {one_line(exc)}") from None
        if session is not None and session[1] is not None:
            with self._lock:
                self._sessions[conn] = (session[0], session[1])
        if self._statement_hook is not None:
            conn.cursor_factory = _hooked_cursor(self)
        return conn

    def statement_hook(self, callback: Callable[[str], None] | None) -> None:
        """Call ``callback(sql)`` in the calling thread before every statement a connection
        of this backend sends, or no longer with None — how a test harness puts a
        scheduling point at each statement (:mod:`remora.sim.schedule`)."""
        with self._lock:
            self._statement_hook = callback
            idle = list(self._idle)
        for conn in idle:
            conn.cursor_factory = _hooked_cursor(self) if callback is not None else psycopg.Cursor

    def _take(self) -> psycopg.Connection[Any]:
        with self._lock:
            if self._closed:
                raise Unavailable("the PostgreSQL store is closed")
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
        return self._connect()

    def _give_back(self, conn: psycopg.Connection[Any], reusable: bool) -> None:
        if reusable and not conn.closed:
            with self._lock:
                if not self._closed and len(self._idle) < self.max_idle:
                    self._idle.append(conn)
                    return
        _close_quietly(conn)

    @contextmanager
    def _connection(self, ctx: Context | None) -> Iterator[psycopg.Connection[Any]]:
        """One connection for one call; the driver's cancel is wired to ``ctx``."""
        if ctx is not None:
            ctx.check()
        conn = self._take()
        unregister: Callable[[], None] = lambda: None  # noqa: E731
        reusable = False
        try:
            if ctx is not None:
                unregister = ctx.on_cancel(lambda: _cancel_quietly(conn))
            yield conn
            reusable = True
        finally:
            unregister()
            # A canceled call's connection may still receive the cancel request: drop it.
            canceled = ctx is not None and ctx.canceled
            ok = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            self._give_back(conn, reusable and ok and not canceled)

    # -- error mapping --------------------------------------------------------------
    def _failure(self, exc: psycopg.Error, ctx: Context | None, what: str) -> Exception:
        """Classify a failure that happened *before* any COMMIT could have been sent."""
        if isinstance(exc, pg_errors.QueryCanceled) and ctx is not None and ctx.canceled:
            return Canceled(f"postgres {what} canceled: {one_line(exc)}")
        if isinstance(exc, psycopg.OperationalError):  # incl. lock timeout, deadlock, 40001
            return Unavailable(f"postgres {what}: {one_line(exc)}")
        return StoreError(f"postgres {what}: {type(exc).__name__}: {one_line(exc)}")

    def _commit_failure(
        self, exc: psycopg.Error, conn: psycopg.Connection[Any], ctx: Context, what: str
    ) -> Exception:
        """Classify a failure of COMMIT itself.

        A reply from the server on a live connection is definitive: the transaction rolled
        back.  Without one — the connection broke while COMMIT was in flight — nobody here
        can know whether the server committed: :class:`UnknownResult`, after
        :meth:`_settle` made sure the server is done with that transaction, so that the
        caller's re-read decides."""
        if exc.sqlstate is not None and not conn.closed:
            return self._failure(exc, ctx, what)
        with self._lock:
            session = self._sessions.get(conn)
        settled = "session unknown" if session is None else self._settle(session, ctx)
        return UnknownResult(
            f"postgres {what}: connection lost during COMMIT, result unknown "
            f"({settled}): {one_line(exc)}"
        )

    def _settle(self, session: tuple[Any, ...], ctx: Context) -> str:
        """Wait until the server session whose connection broke during COMMIT has finished
        its transaction; returns how it ended, for the error message.

        A COMMIT can still be on its way to (or inside) the server when the client's
        connection breaks, so a re-read made at once could see "not committed" and the
        commit land a moment later.  This waits (at most ``settle_timeout``) until the
        session is gone or idle outside a transaction.  A session still *idle inside* the
        transaction after ``settle_grace`` never got the COMMIT: it is terminated, which
        makes "not committed" final.  Any failure here just ends the wait: the result stays
        unknown and the caller's fence keeps a late commit harmless."""
        pid, started = session
        give_up = time.monotonic() + self.settle_timeout
        grace = time.monotonic() + self.settle_grace
        try:
            with self._connection(None) as probe:
                while True:
                    row = probe.execute(
                        "SELECT state FROM pg_stat_activity WHERE pid = %s AND backend_start = %s",
                        (pid, started),
                    ).fetchone()
                    if row is None:
                        return "the server session ended"
                    state = row[0]
                    if state in ("idle", "idle in transaction (aborted)") or state is None:
                        return f"the server session is {state or 'not visible'}"
                    if state == "idle in transaction" and time.monotonic() >= grace:
                        probe.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                            "pid = %s AND backend_start = %s AND state = 'idle in transaction'",
                            (pid, started),
                        )
                    if time.monotonic() >= give_up or ctx.canceled:
                        return f"the server session is still {state}"
                    ctx.sleep(0.005)
        except (psycopg.Error, RemoraError) as exc:
            return f"could not check the server session: {one_line(exc)}"

    # -- write transactions ---------------------------------------------------------
    def _write(
        self,
        ctx: Context,
        commit: bool,
        what: str,
        body: Callable[[psycopg.Cursor[Any]], T],
    ) -> T:
        """Run ``body`` in one transaction, then COMMIT (or ROLLBACK when not ``commit``).

        Fenced/InvalidInput raised by ``body`` roll back and propagate unchanged."""
        with self._connection(ctx) as conn:
            committing = False  # True once COMMIT may have reached the server
            try:
                with conn.cursor() as cur:
                    cur.execute("BEGIN")
                    result = body(cur)
                    ctx.check()  # canceled while we worked: roll back rather than commit
                    if not commit:
                        cur.execute("ROLLBACK")
                        return result
                    committing = True
                    self._commit(cur)
                return result
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                if committing:
                    raise self._commit_failure(exc, conn, ctx, what) from exc
                raise self._failure(exc, ctx, what) from exc
            except BaseException:
                _rollback_quietly(conn)
                raise

    def _commit(self, cur: psycopg.Cursor[Any]) -> None:
        cur.execute("COMMIT")

    def _fence(self, partition: int, installed: Token, token: Token, record: SourceRecord) -> None:
        check_fence(partition, installed, token, record)

    # -- the Backend protocol -------------------------------------------------------
    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        def body(cur: psycopg.Cursor[Any]) -> Token:
            cur.execute(CLAIM_SQL, (partition,))
            row = cur.fetchone()
            assert row is not None
            return Token(int(row[0]), int(row[1]))

        return self._write(ctx, commit, "claim", body)

    def observe(self, partition: int, ctx: Context) -> Token:
        with self._connection(ctx) as conn:
            try:
                row = conn.execute(
                    "SELECT epoch, frontier FROM remora_partition WHERE partition = %s",
                    (partition,),
                ).fetchone()
            except psycopg.Error as exc:
                raise self._failure(exc, ctx, "observe") from exc
        return Token(0, 0) if row is None else Token(int(row[0]), int(row[1]))

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        def body(cur: psycopg.Cursor[Any]) -> Token:
            epoch, frontier, next_seq, current = self._locked_read(cur, partition, record)
            self._fence(partition, Token(epoch, frontier), token, record)
            decision = self.processing.apply(record, current, next_seq)
            self._write_decision(cur, partition, record, decision, next_seq)
            return Token(epoch, record.offset + 1)

        return self._write(ctx, commit, "process", body)

    def _locked_read(
        self, cur: psycopg.Cursor[Any], partition: int, record: SourceRecord
    ) -> tuple[int, int, int, SubjectState | None]:
        """The partition row, locked (:attr:`lock_sql`), and the record's subject:
        (epoch, frontier, next seq, subject state)."""
        subject = self.processing.key(record)
        cur.execute(self.lock_sql, (subject, partition))
        row = cur.fetchone()
        if row is None:
            return 0, 0, 1, None
        current = None
        if row[3] is not None and subject is not None:
            current = SubjectState(subject, row[3], row[4], row[5], row[6])
        return int(row[0]), int(row[1]), int(row[2]), current

    def _write_decision(
        self,
        cur: psycopg.Cursor[Any],
        partition: int,
        record: SourceRecord,
        decision: Decision,
        next_seq: int,
    ) -> None:
        """Send the statements that write ``decision`` and the frontier, pipelined."""
        with cur.connection.pipeline():
            for statement, params in decision_writes(
                partition, record, decision, next_seq, placeholder="%s", intent_offset=True
            ):
                cur.execute(statement, params)

    # -- observer reads (not modeled I/O): overrides of the Backend defaults -------------
    def outbox_after(self, partition: int, seq: int, limit: int) -> list[OutboxEntry]:
        with self._connection(None) as conn:
            try:
                rows = conn.execute(
                    f"{SELECT_OUTBOX} WHERE partition = %s AND seq > %s ORDER BY seq LIMIT %s",
                    (partition, seq, limit),
                ).fetchall()
            except psycopg.Error as exc:
                raise self._failure(exc, None, "outbox read") from exc
        return [_outbox_entry(r) for r in rows]

    def partition_row(self, partition: int) -> PartitionRow:
        def body(cur: psycopg.Cursor[Any]) -> PartitionRow:
            row = cur.execute(
                f"{SELECT_PARTITIONS} WHERE partition = %s AND epoch > 0", (partition,)
            ).fetchone()
            return PartitionRow(partition, 0, 0, 1) if row is None else _partition_row(row)

        return self._read("partition read", body)

    def partition_state(self, partition: int) -> PartitionState:
        def body(cur: psycopg.Cursor[Any]) -> PartitionState:
            def rows(sql: str) -> list[tuple[Any, ...]]:
                return cur.execute(sql, (partition,)).fetchall()

            row = rows(f"{SELECT_PARTITIONS} WHERE partition = %s AND epoch > 0")
            return PartitionState(
                _partition_row(row[0]) if row else PartitionRow(partition, 0, 0, 1),
                tuple(
                    map(_outbox_entry, rows(f"{SELECT_OUTBOX} WHERE partition = %s ORDER BY seq"))
                ),
                tuple(
                    map(
                        _quarantine_entry,
                        rows(f'{SELECT_QUARANTINE} WHERE partition = %s ORDER BY "offset"'),
                    )
                ),
                tuple(
                    Intent(*r)
                    for r in rows(f'{SELECT_INTENTS} WHERE partition = %s ORDER BY "offset"')
                ),
            )

        return self._read("partition read", body)

    def _read(self, what: str, body: Callable[[psycopg.Cursor[Any]], T]) -> T:
        """A consistent read-only snapshot across several statements."""
        with self._connection(None) as conn:
            try:
                with conn.cursor() as cur:
                    cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    result = body(cur)
                    cur.execute("COMMIT")
                return result
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                raise self._failure(exc, None, what) from exc

    def snapshot(self) -> StoreSnapshot:
        def body(cur: psycopg.Cursor[Any]) -> StoreSnapshot:
            def rows(sql: str) -> list[tuple[Any, ...]]:
                return cur.execute(sql).fetchall()

            parts = rows(f"{SELECT_PARTITIONS} WHERE epoch > 0 ORDER BY partition")
            outbox = rows(f"{SELECT_OUTBOX} ORDER BY partition, seq")
            quarantine = rows(f'{SELECT_QUARANTINE} ORDER BY partition, "offset"')
            intents = rows(f'{SELECT_INTENTS} ORDER BY partition, "offset"')
            subjects = rows(
                "SELECT partition, subject, revision, status, blocked, body FROM remora_subject "
                'ORDER BY partition, subject COLLATE "C"'
            )
            return StoreSnapshot(
                partitions=tuple(map(_partition_row, parts)),
                outbox=tuple(map(_outbox_entry, outbox)),
                quarantine=tuple(map(_quarantine_entry, quarantine)),
                intents=tuple(Intent(*r) for r in intents),
                subjects=tuple(
                    (r[0], SubjectState(r[1], r[2], r[3], bool(r[4]), r[5])) for r in subjects
                ),
            )

        return self._read("snapshot", body)

    def partition_summaries(self) -> list[PartitionSummary]:
        """Per-partition counters, computed by the server (cheap on a large store)."""

        def body(cur: psycopg.Cursor[Any]) -> list[PartitionSummary]:
            rows = cur.execute(SELECT_SUMMARIES).fetchall()
            return [PartitionSummary(*(int(v) for v in r)) for r in rows]

        return self._read("status", body)

    def schema_version(self) -> int | None:
        """The installed schema version, or None when the database has no Remora schema."""

        def body(cur: psycopg.Cursor[Any]) -> int | None:
            table, key = self.schema.version_table
            row = cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
            if row is None or not row[0]:
                return None
            found = cur.execute(
                f"SELECT value FROM {table} WHERE {key} = 'schema_version'"
            ).fetchone()
            return None if found is None else int(found[0])

        return self._read("schema check", body)

    def source_identities(self) -> dict[int, SourceIdentity]:
        def body(cur: psycopg.Cursor[Any]) -> dict[int, SourceIdentity]:
            rows = cur.execute(identity.SELECT_SQL).fetchall()
            return {i.partition: i for i in map(identity.from_row, rows)}

        return self._read("source identity read", body)

    def record_source_identity(self, source: SourceIdentity) -> None:
        with self._connection(None) as conn:
            try:
                with conn.cursor() as cur:
                    cur.execute("BEGIN")
                    cur.execute(identity.upsert_sql("%s"), identity.to_row(source))
                    cur.execute("COMMIT")
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                raise self._failure(exc, None, "source identity write") from exc

    # -- schema ---------------------------------------------------------------------
    def _require_schema(self) -> None:
        version = self.schema_version()
        if version is None:
            raise InvalidInput(f"{self.where}: no Remora schema in this database")
        if version != SCHEMA_VERSION:
            older = " (`remora run` upgrades it)" if version < SCHEMA_VERSION else ""
            raise InvalidInput(
                f"{self.where}: schema version {version}, this Remora uses {SCHEMA_VERSION}{older}"
            )

    def _lock_schema(self, cur: psycopg.Cursor[Any]) -> None:
        """Serialize migrations across processes (released at COMMIT/ROLLBACK)."""
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))

    def _migrate(self) -> None:
        """Create or upgrade the schema in one transaction; idempotent and safe to run from
        several processes at once (they serialize on an advisory lock)."""
        with self._connection(None) as conn:
            try:
                with conn.cursor() as cur:
                    cur.execute("BEGIN")
                    self._lock_schema(cur)
                    migrate(cur, POSTGRES, self.schema, self.where)
                    cur.execute("COMMIT")
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                raise self._failure(exc, None, f"{self.schema.label} migration") from exc
            except BaseException:
                _rollback_quietly(conn)
                raise

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            _close_quietly(conn)


def _hooked_cursor(backend: PostgresBackend) -> type[psycopg.Cursor[Any]]:
    """A cursor class that calls ``backend``'s statement hook (if it still has one) with
    each statement before sending it."""

    class HookedCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            hook = backend._statement_hook
            if hook is not None:
                hook(query if isinstance(query, str) else repr(query))
            return super().execute(query, *args, **kwargs)

    return HookedCursor


def _partition_row(r: tuple[Any, ...]) -> PartitionRow:
    return PartitionRow(*(int(v) for v in r))


def _outbox_entry(r: tuple[Any, ...]) -> OutboxEntry:
    return OutboxEntry(int(r[0]), int(r[1]), r[2], r[3], r[4], r[5], int(r[6]))


def _quarantine_entry(r: tuple[Any, ...]) -> QuarantineEntry:
    return QuarantineEntry(int(r[0]), int(r[1]), r[2], r[3], r[4])


def _cancel_quietly(conn: psycopg.Connection[Any]) -> None:
    """Ask the server to cancel whatever ``conn`` runs (called from another thread)."""
    # Nothing running, already closed, or the server is gone: nothing to cancel.
    with suppress(psycopg.Error, OSError):
        conn.cancel_safe(timeout=CANCEL_TIMEOUT)


def _rollback_quietly(conn: psycopg.Connection[Any]) -> None:
    if conn.closed:
        return
    try:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
    except psycopg.Error:
        _close_quietly(conn)


def _close_quietly(conn: psycopg.Connection[Any]) -> None:
    with suppress(psycopg.Error):
        conn.close()


class PostgresStore(StateStore):
    """A :class:`StateStore` over a PostgreSQL database (``dsn`` is a libpq DSN or URI)."""

    backend: PostgresBackend

    def __init__(
        self,
        dsn: str,
        hook: IOHook = NO_FAULTS,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        processing: Processing = AMENDMENTS,
    ) -> None:
        super().__init__(
            PostgresBackend(dsn, lock_timeout=lock_timeout, processing=processing), hook
        )


__all__ = [
    "ADDED_COLUMNS",
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "PartitionSummary",
    "PostgresBackend",
    "PostgresStore",
    "describe_dsn",
    "one_line",
    "parse_dsn",
]
