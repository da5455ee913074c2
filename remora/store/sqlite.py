"""The SQLite backend: Remora's embedded default, with real transactions.

Each write is one ``BEGIN IMMEDIATE`` transaction that takes SQLite's write lock, checks the
fence against the partition row, applies the fold and commits.  ``commit=False`` executes
the same statements and rolls them back.  ``Lifecycle.stop()`` interrupts a running
statement through :meth:`sqlite3.Connection.interrupt`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from remora.context import Context
from remora.domain import (
    AMENDMENTS,
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
    StorageFailed,
    StoreNotWritable,
    Unavailable,
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
from remora.store.dialect import SQLITE, AddedColumn, Schema, migrate
from remora.store.identity import SourceIdentity
from remora.store.sql import (
    SELECT_INTENTS,
    SELECT_OUTBOX,
    SELECT_PARTITIONS,
    SELECT_QUARANTINE,
    SELECT_SUMMARIES,
    Statement,
    decision_writes,
)

SCHEMA_VERSION = 2
"""1: partitions, subjects, outbox, quarantine, intents.  2: ``remora_source`` (the source
identity per partition, :mod:`remora.store.identity`); a version-1 file is upgraded in place
on open (the table is added; identities are recorded by the next run)."""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS remora_meta (
    key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS remora_partition (
    partition INTEGER PRIMARY KEY, epoch INTEGER NOT NULL, frontier INTEGER NOT NULL,
    next_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS remora_subject (
    partition INTEGER NOT NULL, subject TEXT NOT NULL, revision INTEGER NOT NULL,
    status TEXT NOT NULL, blocked INTEGER NOT NULL, body TEXT,
    PRIMARY KEY (partition, subject));
CREATE TABLE IF NOT EXISTS remora_outbox (
    partition INTEGER NOT NULL, seq INTEGER NOT NULL, subject TEXT NOT NULL,
    version INTEGER NOT NULL, op TEXT NOT NULL, body TEXT NOT NULL, "offset" INTEGER NOT NULL,
    PRIMARY KEY (partition, seq));
CREATE UNIQUE INDEX IF NOT EXISTS remora_outbox_offset ON remora_outbox (partition, "offset");
CREATE TABLE IF NOT EXISTS remora_quarantine (
    partition INTEGER NOT NULL, "offset" INTEGER NOT NULL, subject TEXT,
    reason TEXT NOT NULL, detail TEXT NOT NULL,
    PRIMARY KEY (partition, "offset"));
CREATE TABLE IF NOT EXISTS remora_intent (
    partition INTEGER NOT NULL, subject TEXT NOT NULL, version INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (partition, subject, version));
"""
    + identity.CREATE_SQL
    + ";\n"
)

#: Columns added to the tables above after their first release (none yet): an older file
#: gets them on open (:func:`remora.store.dialect.add_missing_columns`).
ADDED_COLUMNS: tuple[AddedColumn, ...] = ()

SCHEMA = Schema(
    version=SCHEMA_VERSION,
    version_table=("remora_meta", "key"),
    create=tuple(s for s in _SCHEMA.split(";") if s.strip()),
    added=ADDED_COLUMNS,
)


class _Rollback(Exception):
    pass


def _locked(exc: sqlite3.OperationalError) -> bool:
    """SQLite's "database is locked" / "database is busy" (another connection's lock)."""
    return "locked" in str(exc) or "busy" in str(exc)


def _why_unwritable(path: str) -> str | None:
    """Why the database file (or its folder, for the journal files) cannot be written:
    ``read-only filesystem`` or ``permission denied``; None when it looks writable."""
    if path == ":memory:" or path.startswith("file:"):
        return None
    target = Path(path)
    folder = target.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "read-only filesystem"
    except OSError:
        return None
    files = [target, Path(f"{path}-wal"), Path(f"{path}-shm")]
    if any(f.exists() and not os.access(f, os.W_OK) for f in files):
        return "permission denied"
    if not all(f.exists() for f in files) and not os.access(folder, os.W_OK):
        return "permission denied"
    return None


def _no_space(path: str) -> bool:
    try:
        return os.statvfs(Path(path).parent).f_bavail == 0
    except OSError:
        return False


def storage_error(path: str, exc: sqlite3.Error) -> RemoraError | None:
    """The storage failure behind an SQLite error, named with the file and the cause
    (:class:`StorageFailed`: no space left on device, an I/O error;
    :class:`StoreNotWritable`: read-only filesystem, permission denied) — or None when it
    is not one (a lock, an interrupt, a damaged file)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    detail = f"(sqlite: {exc})"
    if code == sqlite3.SQLITE_FULL:
        return StorageFailed(f"{path}: cannot write: no space left on device {detail}")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR):
        why = _why_unwritable(path)
        if why is not None:
            return StoreNotWritable(f"{path}: cannot write: {why} {detail}")
        if code == sqlite3.SQLITE_IOERR:
            cause = "no space left on device" if _no_space(path) else "I/O error"
            return StorageFailed(f"{path}: cannot write: {cause} {detail}")
    return None


def connect_read_only(path: str | Path) -> sqlite3.Connection:
    """A read-only connection (URI ``mode=ro``: never creates, migrates or writes the file,
    not even its journal mode).  On a read-only filesystem, where SQLite cannot create the
    ``-shm`` index a WAL database needs, the file is opened ``immutable`` — nobody can
    change it there — unless its ``-wal`` holds commits (refused: immutable would not see
    them)."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        if _why_unwritable(str(path)) != "read-only filesystem":
            raise
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            # Committed records may live only in the WAL, which immutable would ignore.
            raise StoreNotWritable(
                f"{path}: cannot read on a read-only filesystem: its write-ahead log "
                f"{wal.name} holds commits not yet in the file (open it once where it can "
                "be written)"
            ) from None
    return sqlite3.connect(
        f"{uri}&immutable=1", uri=True, isolation_level=None, check_same_thread=False
    )


class SqliteBackend(Backend):
    """An SQLite database file (or ``:memory:``) on one connection (module docstring)."""

    #: The schema created or upgraded on open (the job runtime's store has its own).
    schema: Schema = SCHEMA

    def __init__(
        self,
        path: str | Path = ":memory:",
        lock_timeout: float = 5.0,
        processing: Processing = AMENDMENTS,
        *,
        read_only: bool = False,
    ) -> None:
        self.path = str(path)
        self.processing = processing
        self.lock_timeout = lock_timeout
        self.read_only = read_only
        self._lock = threading.Lock()
        # No busy handler: _begin polls for the write lock itself so that cancellation can
        # end the wait (sqlite3's interrupt() does not interrupt a busy wait).
        try:
            if read_only:
                self._conn = connect_read_only(self.path)
            else:
                self._conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=0.0
                )
        except sqlite3.Error as exc:  # e.g. a directory, a folder that does not exist
            raise storage_error(self.path, exc) or InvalidInput(
                f"{self.path}: not a usable Remora database ({exc})"
            ) from None
        try:
            self._open()
        except sqlite3.OperationalError as exc:
            self._conn.close()
            failure = storage_error(self.path, exc)
            if failure is not None:  # a full disk, a read-only filesystem: say so
                raise failure from None
            if _locked(exc):  # another process holds the file: transient, not bad input
                raise Unavailable(
                    f"{self.path}: database is locked by another connection (waited "
                    f"{self.lock_timeout:g} s)"
                ) from None
            raise InvalidInput(f"{self.path}: not a usable Remora database ({exc})") from None
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise InvalidInput(f"{self.path}: not a usable Remora database ({exc})") from None
        except InvalidInput:  # a newer schema: refused, and the file not left open
            self._conn.close()
            raise

    def _open(self) -> None:
        """Journal mode, then the schema — retrying a lock another process holds (while it
        creates or migrates the same file) for up to ``lock_timeout`` seconds."""
        if self.read_only:
            self._check_schema()
            return
        give_up = time.monotonic() + self.lock_timeout
        pause = 0.001
        while True:
            try:
                if self.path != ":memory:":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._migrate()
                return
            except sqlite3.OperationalError as exc:
                if not _locked(exc) or time.monotonic() >= give_up:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def _check_schema(self) -> None:
        """A read-only open: the file must hold a Remora schema this version reads."""
        try:
            row = self._conn.execute(
                "SELECT value FROM remora_meta WHERE key = 'schema_version'"
            ).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            row = None
        if row is None:
            raise InvalidInput(f"{self.path}: no Remora schema in this database")
        if int(row[0]) > SCHEMA_VERSION:
            raise InvalidInput(
                f"{self.path}: schema version {row[0]} is newer than this Remora "
                f"supports ({SCHEMA_VERSION})"
            )

    def _begin(self, ctx: Context | None) -> None:
        """``BEGIN IMMEDIATE``, waiting for another writer's lock at most ``lock_timeout``
        seconds and no longer than the context stays live."""
        give_up = time.monotonic() + self.lock_timeout
        pause = 0.001
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if ctx is not None:
                    ctx.check()
                if time.monotonic() >= give_up:
                    raise
                if ctx is not None:
                    ctx.sleep(pause)
                else:
                    time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def _migrate(self) -> None:
        """Create or upgrade the schema in one transaction; idempotent
        (:func:`remora.store.dialect.migrate`)."""
        with self._lock:
            self._begin(None)
            try:
                migrate(self._conn, SQLITE, self.schema, self.path)
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        """End the open transaction, if any.  An interrupt (a stop) that lands while the
        ROLLBACK runs cuts it short and would leave the transaction — and SQLite's write
        lock — held; the interrupt is spent by then, so the ROLLBACK is run again."""
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.OperationalError:
                if self._conn.in_transaction:  # else it was done when the interrupt came
                    self._conn.execute("ROLLBACK")

    @contextmanager
    def _transaction(self, ctx: Context, commit: bool) -> Iterator[sqlite3.Connection]:
        with self._lock:
            unregister = ctx.on_cancel(self._conn.interrupt)
            try:
                ctx.check()
                try:
                    # Inside: a BEGIN interrupted after it opened the transaction (SQLite
                    # reports the interrupt as the statement ends) must still roll back,
                    # or the connection stays in a transaction holding the write lock.
                    self._begin(ctx)
                    yield self._conn
                    if not commit:
                        raise _Rollback
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
            except _Rollback:
                pass
            except sqlite3.OperationalError as exc:
                if ctx.canceled or "interrupt" in str(exc):
                    raise Canceled(f"sqlite statement interrupted: {exc}") from exc
                failure = storage_error(self.path, exc)
                if failure is not None:  # rolled back: no effect, but retrying won't help
                    raise failure from exc
                raise Unavailable(f"sqlite: {exc}") from exc
            finally:
                unregister()

    @staticmethod
    def _installed(conn: sqlite3.Connection, partition: int) -> tuple[int, int, int]:
        row = conn.execute(
            "SELECT epoch, frontier, next_seq FROM remora_partition WHERE partition = ?",
            (partition,),
        ).fetchone()
        return (0, 0, 1) if row is None else (int(row[0]), int(row[1]), int(row[2]))

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        with self._transaction(ctx, commit) as conn:
            epoch, frontier, _ = self._installed(conn, partition)
            token = Token(epoch + 1, frontier)
            conn.execute(
                "INSERT INTO remora_partition(partition, epoch, frontier, next_seq) "
                "VALUES (?, 1, 0, 1) "
                "ON CONFLICT(partition) DO UPDATE SET epoch = epoch + 1",
                (partition,),
            )
        return token

    def observe(self, partition: int, ctx: Context) -> Token:
        with self._lock:
            ctx.check()
            epoch, frontier, _ = self._installed(self._conn, partition)
        return Token(epoch, frontier)

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        with self._transaction(ctx, commit) as conn:
            epoch, frontier, next_seq = self._installed(conn, partition)
            check_fence(partition, Token(epoch, frontier), token, record)
            for statement, params in self._decision(conn, partition, record, next_seq):
                conn.execute(statement, params)
            result = Token(epoch, record.offset + 1)
        return result

    def _decision(
        self, conn: sqlite3.Connection, partition: int, record: SourceRecord, next_seq: int
    ) -> list[Statement]:
        """Read the record's subject, fold, and return the statements that write the
        decision and the frontier (inside the caller's transaction)."""
        subject = self.processing.key(record)
        current = None
        if subject is not None:
            row = conn.execute(
                "SELECT revision, status, blocked, body FROM remora_subject "
                "WHERE partition = ? AND subject = ?",
                (partition, subject),
            ).fetchone()
            if row is not None:
                current = SubjectState(subject, row[0], row[1], bool(row[2]), row[3])
        decision = self.processing.apply(record, current, next_seq)
        return decision_writes(partition, record, decision, next_seq, placeholder="?")

    # -- observer reads (not modeled I/O): overrides of the Backend defaults -------------
    def partition_row(self, partition: int) -> PartitionRow:
        with self._lock:
            row = self._conn.execute(
                f"{SELECT_PARTITIONS} WHERE partition = ? AND epoch > 0", (partition,)
            ).fetchone()
        return PartitionRow(partition, 0, 0, 1) if row is None else PartitionRow(*row)

    def partition_state(self, partition: int) -> PartitionState:
        with self._lock:
            c = self._conn
            c.execute("BEGIN")  # one consistent read
            try:
                row = c.execute(
                    f"{SELECT_PARTITIONS} WHERE partition = ? AND epoch > 0", (partition,)
                ).fetchone()
                outbox = c.execute(
                    f"{SELECT_OUTBOX} WHERE partition = ? ORDER BY seq", (partition,)
                ).fetchall()
                quarantine = c.execute(
                    f'{SELECT_QUARANTINE} WHERE partition = ? ORDER BY "offset"', (partition,)
                ).fetchall()
                intents = c.execute(
                    f"{SELECT_INTENTS} WHERE partition = ? ORDER BY rowid", (partition,)
                ).fetchall()
            finally:
                c.execute("COMMIT")
        return PartitionState(
            PartitionRow(partition, 0, 0, 1) if row is None else PartitionRow(*row),
            tuple(OutboxEntry(*r) for r in outbox),
            tuple(QuarantineEntry(*r) for r in quarantine),
            tuple(Intent(*r) for r in intents),
        )

    def outbox_after(self, partition: int, seq: int, limit: int) -> list[OutboxEntry]:
        with self._lock:
            rows = self._conn.execute(
                f"{SELECT_OUTBOX} WHERE partition = ? AND seq > ? ORDER BY seq LIMIT ?",
                (partition, seq, limit),
            ).fetchall()
        return [OutboxEntry(*r) for r in rows]

    def partition_summaries(self) -> list[PartitionSummary]:
        """Counted by SQLite (on the primary-key indexes), not loaded."""
        with self._lock:
            rows = self._conn.execute(SELECT_SUMMARIES).fetchall()
        return [PartitionSummary(*r) for r in rows]

    def snapshot(self) -> StoreSnapshot:
        with self._lock:
            c = self._conn
            parts = c.execute(f"{SELECT_PARTITIONS} WHERE epoch > 0 ORDER BY partition").fetchall()
            outbox = c.execute(f"{SELECT_OUTBOX} ORDER BY partition, seq").fetchall()
            quarantine = c.execute(f'{SELECT_QUARANTINE} ORDER BY partition, "offset"').fetchall()
            intents = c.execute(f"{SELECT_INTENTS} ORDER BY partition, rowid").fetchall()
            subjects = c.execute(
                "SELECT partition, subject, revision, status, blocked, body FROM remora_subject "
                "ORDER BY partition, subject"
            ).fetchall()
        return StoreSnapshot(
            partitions=tuple(PartitionRow(*r) for r in parts),
            outbox=tuple(OutboxEntry(*r) for r in outbox),
            quarantine=tuple(QuarantineEntry(*r) for r in quarantine),
            intents=tuple(Intent(*r) for r in intents),
            subjects=tuple(
                (r[0], SubjectState(r[1], r[2], r[3], bool(r[4]), r[5])) for r in subjects
            ),
        )

    def source_identities(self) -> dict[int, SourceIdentity]:
        with self._lock:
            rows = self._conn.execute(identity.SELECT_SQL).fetchall()
        return {i.partition: i for i in map(identity.from_row, rows)}

    def record_source_identity(self, source: SourceIdentity) -> None:
        with self._lock:
            try:
                self._begin(None)
                self._conn.execute(identity.upsert_sql("?"), identity.to_row(source))
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, sqlite3.Error):
                    failure = storage_error(self.path, exc)
                    if failure is not None:
                        raise failure from None
                    raise Unavailable(f"sqlite: {exc}") from None
                raise

    def statement_hook(self, callback: Callable[[str], None] | None) -> None:
        """Call ``callback(sql)`` in the calling thread before every statement this
        backend's connection runs (SQLite's trace callback), or no longer with None — how a
        test harness puts a scheduling point at each statement (:mod:`remora.sim.schedule`).
        The callback must not use this connection; its exceptions are ignored."""
        self._conn.set_trace_callback(callback)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class SqliteStore(StateStore):
    """A :class:`StateStore` over an SQLite database file (or ``:memory:``)."""

    backend: SqliteBackend

    def __init__(
        self,
        path: str | Path = ":memory:",
        hook: IOHook = NO_FAULTS,
        processing: Processing = AMENDMENTS,
        *,
        read_only: bool = False,
    ) -> None:
        super().__init__(SqliteBackend(path, processing=processing, read_only=read_only), hook)


__all__ = [
    "ADDED_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "storage_error",
    "connect_read_only",
    "SqliteBackend",
    "SqliteStore",
]
