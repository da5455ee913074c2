"""SQLite's file-only behaviour checked by a state machine: lock waits, reopening and
migrating an existing file, refused opens and interrupted statements.

The worker machines over SQLite use one connection, so SQLite's lock waits, open and
migration errors and statement interrupts were out of their reach.  :class:`SqliteFileChecks`
is a mixin for a :class:`~remora.testing.machines.WorkerScheduleMachine` whose store is an
SQLite database *file* (:func:`sqlite_file_store`): between the lifecycle's steps its rules
bring a second connection or a second store onto the same file and check each observable
result as a postcondition —

* ``sqlite_lock_wait`` — another connection holds the write lock while the store writes
  (a ``commit=False`` claim, which changes nothing): released during the wait, the write
  goes on and returns the token the claim would install; past ``lock_timeout`` it is
  :class:`~remora.errors.Unavailable`; canceled during the wait it is
  :class:`~remora.errors.Canceled` at the next poll (no further pause).  Either way the
  durable state is unchanged and no lock or transaction is left behind.
* ``sqlite_interrupt`` — a statement of the write is interrupted (SQLite's interrupt, as
  a stop's ``interrupt()`` does, at a drawn step): in BEGIN, the read or the upsert it is
  :class:`~remora.errors.Canceled`; in the closing ROLLBACK, or after the last statement,
  the claim's token is returned.  Nothing changed, no transaction or lock left behind.
* ``sqlite_record_identity`` — a source identity recorded (possibly interrupted): recorded
  exactly and seen by another store, or refused leaving the identities as they were and
  no lock held (an interrupt SQLite reports as COMMIT ends may have committed).
* ``sqlite_reopen`` — a second lifetime's store on the same file (possibly while another
  connection holds the write lock for a moment, or past the budget) sees exactly the
  primary's durable state and source identities, in WAL mode at the current schema version;
  a lock held past the budget is ``Unavailable`` (never "not a usable database"); a closed
  store answers nothing.
* ``sqlite_open_file`` — opening other files: a copy downgraded to schema version 1 is
  upgraded in place (same state, version 2, the source table present); a copy at a newer
  version, a database whose table takes one of Remora's names, a file that is not a
  database, and a directory are refused with :class:`~remora.errors.InvalidInput` and left
  as they were (the schema's transaction rolled back, no lock held, the file not left
  open); a fresh file locked by
  another process is waited for (then created) or, past the budget, ``Unavailable``.

Failures are ``ERROR sqlite-file``.  ``tests/stateful/test_sqlite_checks.py`` shows each
check catching a planted bug.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import rule

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import SubjectState
from remora.errors import Canceled
from remora.sim.trace import SimConfig
from remora.store import StateStore
from remora.store.base import Token
from remora.store.identity import RecordMark, SourceIdentity
from remora.store.sqlite import SCHEMA_VERSION, SqliteBackend

LOCK_ENDINGS = ("released", "budget", "canceled")
INTERRUPTS = ("statement", "rollback", "finished")
REOPENS = ("plain", "released", "budget")
OPENS = ("v1", "newer", "conflict", "garbage", "directory", "fresh-released", "fresh-budget")

BACKEND: Callable[..., SqliteBackend] = SqliteBackend
"""What the checks open a second store with (a planted-bug test swaps it)."""


def sqlite_file_store(config: SimConfig) -> StateStore:
    """A fresh SQLite database file per run, in its own temporary directory (removed by
    :meth:`SqliteFileChecks.teardown`)."""
    where = tempfile.mkdtemp(prefix="remora-sqlite-machine-")
    return StateStore(BACKEND(Path(where) / "state.sqlite3"))


class _OnSleep(LogicalClock):
    """A logical clock that calls ``action`` at each sleep (a lock wait's pause)."""

    def __init__(self, action: Callable[[], None]) -> None:
        super().__init__()
        self.action = action
        self.sleeps = 0

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        self.sleeps += 1
        self.action()
        return super().sleep(seconds, wake)


def _connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0.0)


def _free(path: str) -> str | None:
    """None when nobody holds ``path``'s write lock; else what stops a writer."""
    conn = _connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return None
    except sqlite3.OperationalError as exc:
        return str(exc)
    finally:
        conn.close()


def _meta(path: str) -> tuple[str | None, str, set[str]]:
    """(schema version, journal mode, tables) of the file at ``path``, read directly."""
    conn = _connect(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = None
        if "remora_meta" in tables:
            row = conn.execute(
                "SELECT value FROM remora_meta WHERE key = 'schema_version'"
            ).fetchone()
            version = None if row is None else str(row[0])
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        return version, mode, tables
    finally:
        conn.close()


def _open_handles(path: Path) -> list[str]:
    """This process's file descriptors open on ``path`` (Linux ``/proc``; empty elsewhere)."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        return []
    found = []
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) == str(path):
                found.append(fd.name)
        except OSError:
            continue
    return found


def _raw_subjects(path: str) -> list[tuple[int, SubjectState]]:
    """The subject rows of the file, read directly by column name (not by the store)."""
    conn = _connect(path)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT * FROM remora_subject ORDER BY partition, subject").fetchall()
    finally:
        conn.close()
    return [
        (
            r["partition"],
            SubjectState(r["subject"], r["revision"], r["status"], bool(r["blocked"]), r["body"]),
        )
        for r in rows
    ]


def _release_later(conn: sqlite3.Connection, seconds: float = 0.01) -> threading.Timer:
    timer = threading.Timer(seconds, lambda: conn.execute("COMMIT"))
    timer.start()
    return timer


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result) or (error type name, message)."""
    try:
        return "ok", call()
    except Exception as exc:  # a raw exception is reported as such (a finding, not a crash)
        return type(exc).__name__, str(exc)


class SqliteFileChecks:
    """Mixin rules for a machine whose store is :func:`sqlite_file_store` (module
    docstring); list it before the machine class."""

    sqlite_reach: ClassVar[set[tuple[str, str]]]
    """(rule, variant) applied by this class's runs (the reach test reads it)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.sqlite_reach = set()

    # -- plumbing ---------------------------------------------------------------------------
    def _sqlite(self) -> SqliteBackend:
        sim = self.sim  # type: ignore[attr-defined]
        assert sim is not None
        backend = sim.store.backend
        assert isinstance(backend, SqliteBackend) and backend.path != ":memory:"
        return backend

    def _sqlite_fail(self, detail: str) -> None:
        self.fail("ERROR sqlite-file", detail)  # type: ignore[attr-defined]

    def _unchanged(self, backend: SqliteBackend, before: object, what: str) -> None:
        if backend.snapshot() != before:
            self._sqlite_fail(f"{what} changed the durable state")
        if (held := _free(backend.path)) is not None:
            self._sqlite_fail(f"after {what} the write lock is still held ({held})")

    def _scratch(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="remora-sqlite-check-"))

    # -- rules ------------------------------------------------------------------------------
    @rule(partition=st.integers(0, 7), ending=st.sampled_from(LOCK_ENDINGS))
    def sqlite_lock_wait(self, partition: int, ending: str) -> None:
        backend = self._sqlite()
        p = partition % self.partitions  # type: ignore[attr-defined]
        before = backend.snapshot()
        row = backend.partition_row(p)
        holder = _connect(backend.path)
        holder.execute("BEGIN IMMEDIATE")
        ctx: Context

        def at_sleep() -> None:
            if ending == "released" and holder.in_transaction:
                holder.execute("COMMIT")
            elif ending == "canceled":
                ctx.cancel(Canceled("canceled during the lock wait"))

        clock = _OnSleep(at_sleep)
        ctx = Context(clock)
        saved_timeout = backend.lock_timeout
        if ending == "budget":
            backend.lock_timeout = 0.0
        try:
            got = _outcome(lambda: backend.claim(p, ctx, False))
        finally:
            backend.lock_timeout = saved_timeout
            if holder.in_transaction:
                holder.execute("ROLLBACK")
            holder.close()
        want: tuple[str, Any] = {
            "released": ("ok", Token(row.epoch + 1, row.frontier)),
            "budget": ("Unavailable", None),
            "canceled": ("Canceled", None),
        }[ending]
        if got[0] != want[0] or (want[0] == "ok" and got[1] != want[1]):
            self._sqlite_fail(
                f"a claim of partition {p} waiting for another connection's lock "
                f"({ending}) returned {got}, not {want}"
            )
        if ending != "budget" and clock.sleeps == 0:
            self._sqlite_fail(f"a claim of partition {p} did not wait for the lock ({ending})")
        if ending == "canceled" and clock.sleeps != 1:  # the next poll sees the cancel
            self._sqlite_fail(f"a canceled lock wait went on for {clock.sleeps} pauses")
        if ending == "budget" and "locked" not in str(got[1]):
            self._sqlite_fail(f"a lock held past the budget reported {got[1]!r}")
        self._unchanged(backend, before, f"a claim under a held lock ({ending})")
        if ending == "canceled":  # a context already canceled: no read, no write at all
            for name, call in (
                ("observe", lambda: backend.observe(p, ctx)),
                ("claim", lambda: backend.claim(p, ctx, True)),
            ):
                if (late := _outcome(call))[0] != "Canceled":
                    self._sqlite_fail(f"{name} under a canceled context returned {late}")
            self._unchanged(backend, before, "calls under a canceled context")
        type(self).sqlite_reach.add(("lock-wait", ending))

    @rule(partition=st.integers(0, 7), at=st.integers(0, 60))
    def sqlite_interrupt(self, partition: int, at: int) -> None:
        backend = self._sqlite()
        p = partition % self.partitions  # type: ignore[attr-defined]
        before = backend.snapshot()
        row = backend.partition_row(p)
        calls = [0]
        running = [""]  # the statement being run (SQLite's trace callback)
        fired: list[str] = []  # the statement SQLite interrupted

        def progress() -> int:
            calls[0] += 1
            if calls[0] <= at or fired:
                return 0
            fired.append(running[0].strip().upper())
            return 1  # interrupt the running statement (as a stop's interrupt() does)

        def trace(statement: str) -> None:
            running[0] = statement

        backend._conn.set_trace_callback(trace)
        backend._conn.set_progress_handler(progress, 1)
        try:
            got = _outcome(lambda: backend.claim(p, ctx=Context(LogicalClock()), commit=False))
        finally:
            backend._conn.set_progress_handler(None, 1)
            backend._conn.set_trace_callback(None)
        # The claim runs BEGIN IMMEDIATE, a SELECT and an upsert, then (commit=False) a
        # ROLLBACK: an interrupt in any of the first three cancels the claim; one in the
        # closing ROLLBACK comes after the claim's (rolled-back) work, which still returns.
        where = "finished" if not fired else "rollback" if fired[0] == "ROLLBACK" else "statement"
        token = ("ok", Token(row.epoch + 1, row.frontier))
        if where == "statement" and got[0] != "Canceled":
            self._sqlite_fail(
                f"a claim of partition {p} whose statement {fired[0][:30]!r} was interrupted "
                f"returned {got}, not Canceled"
            )
        if where != "statement" and got != token:
            self._sqlite_fail(
                f"a claim of partition {p} interrupted at {where} returned {got}, not {token}"
            )
        self._unchanged(backend, before, f"an interrupted claim ({where})")
        type(self).sqlite_reach.add(("interrupt", where))

    @rule(partition=st.integers(0, 3), offset=st.integers(0, 5), at=st.integers(0, 30))
    def sqlite_record_identity(self, partition: int, offset: int, at: int) -> None:
        """Record a source identity (of a partition the schedule never uses), possibly with
        a statement interrupted: recorded exactly (and seen by another connection), or
        refused with everything as it was and no lock left behind."""
        backend = self._sqlite()
        p = 100 + partition
        before = backend.source_identities()
        last = None if offset == 0 else RecordMark(offset, f"digest-{offset}")
        mark = SourceIdentity(p, RecordMark(0, f"first-{offset}"), last)
        calls = [0]
        running = [""]
        fired: list[str] = []

        def progress() -> int:
            calls[0] += 1
            if calls[0] != at + 1:
                return 0
            fired.append(running[0].strip().upper())
            return 1

        def trace(statement: str) -> None:
            running[0] = statement

        if at < 30:
            backend._conn.set_trace_callback(trace)
            backend._conn.set_progress_handler(progress, 1)
        try:
            got = _outcome(lambda: backend.record_source_identity(mark))
        finally:
            backend._conn.set_progress_handler(None, 1)
            backend._conn.set_trace_callback(None)
        want = {**before, p: mark} if got[0] == "ok" else before
        if at == 30 and got[0] != "ok":
            self._sqlite_fail(f"recording {mark} failed: {got}")
        if got[0] != "ok" and fired == ["COMMIT"] and backend.source_identities() != want:
            want = {**before, p: mark}  # SQLite reports an interrupt as COMMIT ends: done
        if backend.source_identities() != want:
            self._sqlite_fail(f"recording {mark} ({got[0]}) left {backend.source_identities()}")
        second = BACKEND(backend.path)
        try:
            if second.source_identities() != want:
                self._sqlite_fail(f"another store sees other source identities after {mark}")
        finally:
            second.close()
        if (held := _free(backend.path)) is not None:
            self._sqlite_fail(f"after recording {mark} ({got[0]}) the lock is held ({held})")
        type(self).sqlite_reach.add(("identity", "recorded" if got[0] == "ok" else "refused"))

    @rule(how=st.sampled_from(REOPENS))
    def sqlite_reopen(self, how: str) -> None:
        backend = self._sqlite()
        before = backend.snapshot()
        identities = backend.source_identities()
        holder = _connect(backend.path)
        timer = None
        if how != "plain":
            holder.execute("BEGIN IMMEDIATE")
            if how == "released":
                timer = _release_later(holder)
        try:
            got = _outcome(
                lambda: BACKEND(backend.path, lock_timeout=0.0 if how == "budget" else 5.0)
            )
        finally:
            if timer is not None:
                timer.join()
            if holder.in_transaction:
                holder.execute("ROLLBACK")
            holder.close()
        if how == "budget":
            if got[0] != "Unavailable" or "locked by another connection" not in got[1]:
                self._sqlite_fail(f"reopening a file locked past the budget: {got}")
        elif got[0] != "ok":
            self._sqlite_fail(f"reopening the store's own file ({how}): {got}")
        else:
            second: SqliteBackend = got[1]
            try:
                seen = (second.snapshot(), second.source_identities())
            finally:
                second.close()
            if seen != (before, identities):
                self._sqlite_fail("a second store on the same file sees another state")
            try:
                second.partition_summaries()
            except sqlite3.ProgrammingError:
                pass
            else:
                self._sqlite_fail("a closed store still answers reads")
            if (raw := _raw_subjects(backend.path)) != list(before.subjects):
                self._sqlite_fail(
                    f"the snapshot's subjects {before.subjects} are not the rows {raw}"
                )
            version, mode, _ = _meta(backend.path)
            if (version, mode) != (str(SCHEMA_VERSION), "wal"):
                self._sqlite_fail(f"the reopened file: schema version {version}, journal {mode}")
        self._unchanged(backend, before, f"reopening the file ({how})")
        type(self).sqlite_reach.add(("reopen", how))

    @rule(kind=st.sampled_from(OPENS))
    def sqlite_open_file(self, kind: str) -> None:
        backend = self._sqlite()
        before = backend.snapshot()
        where = self._scratch()
        try:
            self._open_file(backend, before, kind, where)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        self._unchanged(backend, before, f"opening another file ({kind})")
        type(self).sqlite_reach.add(("open", kind))

    def _open_file(self, backend: SqliteBackend, before: object, kind: str, where: Path) -> None:
        path = where / "copy.sqlite3"
        if kind in ("v1", "newer"):
            source, copy = _connect(backend.path), _connect(str(path))
            try:
                source.backup(copy)
                if kind == "v1":
                    copy.execute("DROP TABLE remora_source")
                    stamp = "1"
                else:
                    stamp = str(SCHEMA_VERSION + 1)
                copy.execute(
                    "UPDATE remora_meta SET value = ? WHERE key = 'schema_version'", (stamp,)
                )
            finally:
                source.close()
                copy.close()
        elif kind == "conflict":  # someone else's database using one of Remora's names
            other = _connect(str(path))
            other.execute("CREATE TABLE remora_outbox_offset (x)")
            other.close()
        elif kind == "garbage":
            path.write_bytes(b"this is not an SQLite database, just some bytes\n" * 40)
        elif kind == "directory":
            path.mkdir()
        holder = None
        timer = None
        if kind.startswith("fresh"):
            holder = _connect(str(path))  # a rollback-journal file another process creates
            holder.execute("CREATE TABLE IF NOT EXISTS other (x)")
            holder.execute("BEGIN EXCLUSIVE")
            if kind == "fresh-released":
                timer = _release_later(holder)
        keep = path.is_file() and holder is None and kind != "conflict"  # WAL rewrites it
        original = path.read_bytes() if keep else None
        try:
            got = _outcome(
                lambda: BACKEND(
                    path, lock_timeout={"fresh-budget": 0.0, "conflict": 0.2}.get(kind, 5.0)
                )
            )
        finally:
            if timer is not None:
                timer.join()
            if holder is not None:
                if holder.in_transaction:
                    holder.execute("ROLLBACK")
                holder.close()
        if got[0] == "ok":
            opened: SqliteBackend = got[1]
            try:
                state = opened.snapshot()
            finally:
                opened.close()
        if kind in ("v1", "fresh-released"):
            if got[0] != "ok":
                self._sqlite_fail(f"opening a {kind} file: {got}")
                return
            version, mode, tables = _meta(str(path))
            if (version, mode) != (str(SCHEMA_VERSION), "wal") or "remora_source" not in tables:
                self._sqlite_fail(
                    f"a {kind} file after opening: schema version {version}, journal {mode}, "
                    f"tables {sorted(tables)}"
                )
            if kind == "v1" and state != before:
                self._sqlite_fail("upgrading a version-1 copy changed its state")
            return
        want = "Unavailable" if kind == "fresh-budget" else "InvalidInput"
        text = "locked by another connection" if want == "Unavailable" else "not a usable"
        if kind == "newer":
            text = f"schema version {SCHEMA_VERSION + 1} is newer"
        if got[0] != want or text not in str(got[1]):
            self._sqlite_fail(f"opening a {kind} file returned {got}, not {want} ({text!r})")
        if kind != "directory" and (fds := _open_handles(path.resolve())):
            self._sqlite_fail(f"a refused {kind} file is still open (descriptors {fds})")
        if kind == "newer":
            version, _, _ = _meta(str(path))
            if version != str(SCHEMA_VERSION + 1):
                self._sqlite_fail(f"a refused newer file now says schema version {version}")
            if (held := _free(str(path))) is not None:
                self._sqlite_fail(f"a refused newer file stays locked ({held})")
        if kind == "conflict" and (tables := _meta(str(path))[2]) != {"remora_outbox_offset"}:
            self._sqlite_fail(f"a refused conflicting file now holds the tables {sorted(tables)}")
        if original is not None and path.read_bytes() != original:
            self._sqlite_fail(f"a refused {kind} file was changed")

    def teardown(self) -> None:
        sim = self.sim  # type: ignore[attr-defined]
        path = None if sim is None else getattr(sim.store.backend, "path", None)
        try:
            super().teardown()  # type: ignore[misc]
        finally:
            if path is not None and path != ":memory:":
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
