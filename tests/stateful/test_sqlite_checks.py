"""The SQLite file rules (:mod:`tests.stateful.sqlite_checks`) shown catching planted bugs.

Each planted bug is a test-only :class:`SqliteBackend` subclass with one wrong behaviour
(most copy a method of the real backend with one change); the real backend passes every
variant of every rule, and the file machine fails on a planted store."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.clock import LogicalClock
from remora.context import Context
from remora.errors import Canceled, InvalidInput, Unavailable
from remora.store import StateStore
from remora.store.sqlite import SCHEMA_VERSION, SqliteBackend, _Rollback
from remora.testing.machines import ScheduleFailure
from tests.common.planted import SOURCE
from tests.stateful import sqlite_checks
from tests.stateful.sqlite_checks import (
    LOCK_ENDINGS,
    OPENS,
    REOPENS,
    SqliteFileChecks,
    sqlite_file_store,
)

# -- planted bugs ------------------------------------------------------------------------------


class NoLockWait(SqliteBackend):
    """A held write lock fails the write at once (no wait within ``lock_timeout``)."""

    def _begin(self, ctx: Context | None) -> None:
        self._conn.execute("BEGIN IMMEDIATE")


class WaitOffTheClock(SqliteBackend):
    """The lock wait sleeps on the wall clock, not the context's (injected) clock: a stop
    cannot wake it and the simulation's time does not pass."""

    def _begin(self, ctx: Context | None) -> None:
        give_up = time.monotonic() + min(self.lock_timeout, 0.3)
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError:
                if time.monotonic() >= give_up:
                    raise
                time.sleep(0.001)


class BeginOutsideTry(SqliteBackend):
    """As on main before this branch: a BEGIN that an interrupt cuts short after it opened
    the transaction is not rolled back (the connection keeps the write lock)."""

    @contextmanager
    def _transaction(self, ctx: Context, commit: bool) -> Iterator[sqlite3.Connection]:
        with self._lock:
            unregister = ctx.on_cancel(self._conn.interrupt)
            try:
                ctx.check()
                self._begin(ctx)
                try:
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
                raise Unavailable(f"sqlite: {exc}") from exc
            finally:
                unregister()


class WaitIgnoresCancel(SqliteBackend):
    """The lock wait does not look at the context: a stop does not end it (it runs on to
    ``lock_timeout``, capped here at a few pauses)."""

    def _begin(self, ctx: Context | None) -> None:
        for _ in range(5):
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError:
                if ctx is not None:
                    ctx.sleep(0.001)
        self._conn.execute("BEGIN IMMEDIATE")


class ObserveIgnoresCancel(SqliteBackend):
    """observe reads under a canceled context."""

    def observe(self, partition: int, ctx: Context) -> Any:
        return super().observe(partition, Context(LogicalClock()))


class BeginOutsideRollback(SqliteBackend):
    """As on main before this branch: a BEGIN or a ROLLBACK an interrupt cuts short leaves
    the transaction (and the write lock) held."""

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


class NotWal(SqliteBackend):
    """A file store left in rollback-journal mode."""

    def _open(self) -> None:
        self._migrate()


class AcceptsNewerSchema(SqliteBackend):
    """A file of a newer schema is opened (and stamped down to this version)."""

    def _migrate(self) -> None:
        with self._lock:
            self._begin(None)
            for statement in sqlite_checks_schema():
                self._conn.execute(statement)
            self._conn.execute(
                "INSERT OR REPLACE INTO remora_meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            self._conn.execute("COMMIT")


class OnlyStampsNewFiles(SqliteBackend):
    """An existing file is never upgraded: a version-1 file stays version 1."""

    def _migrate(self) -> None:
        with self._lock:
            tables = {
                r[0]
                for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        if "remora_meta" not in tables:
            super()._migrate()


class LockedIsBadInput(SqliteBackend):
    """A file locked by another connection is reported as not a Remora database."""

    def __init__(self, path: str | Path = ":memory:", lock_timeout: float = 5.0) -> None:
        try:
            super().__init__(path, lock_timeout)
        except Unavailable as exc:
            raise InvalidInput(f"{path}: not a usable Remora database ({exc})") from None


class OpenNotRetried(SqliteBackend):
    """A lock another process holds while the store opens a fresh file is not waited for."""

    def _open(self) -> None:
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
        self._migrate()


class RawConnectError(SqliteBackend):
    """As on main before this branch: a path SQLite cannot open raises sqlite3's own error."""

    def __init__(self, path: str | Path = ":memory:", lock_timeout: float = 5.0) -> None:
        if Path(path).is_dir():
            raise sqlite3.OperationalError("unable to open database file")
        super().__init__(path, lock_timeout)


class IdentityKeepsTransaction(SqliteBackend):
    """A failed source-identity write is not rolled back (the write lock stays held)."""

    def record_source_identity(self, source: Any) -> None:
        from remora.store import identity

        with self._lock:
            self._begin(None)
            self._conn.execute(identity.upsert_sql("?"), identity.to_row(source))
            self._conn.execute("COMMIT")


class _NoClose:
    """A connection whose ``close`` does nothing."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


class RefusedFileLeftOpen(SqliteBackend):
    """A file the store refuses to open stays open (as a newer-schema file did on main)."""

    def _open(self) -> None:
        self._conn = _NoClose(self._conn)  # type: ignore[assignment]
        super()._open()


class SnapshotSubjectsMisread(SqliteBackend):
    """The snapshot reads a subject's status from the wrong column."""

    def snapshot(self) -> Any:
        snap = super().snapshot()
        subjects = tuple((p, attrs.evolve(s, status=str(s.blocked))) for p, s in snap.subjects)
        return attrs.evolve(snap, subjects=subjects)


def sqlite_checks_schema() -> list[str]:
    from remora.store.sqlite import _SCHEMA

    return [s for s in _SCHEMA.split(";") if s.strip()]


# -- a probe: the mixin's rules called on a filled file store ----------------------------------


class Probe(SqliteFileChecks):
    partitions = 3  # 0 and 1 claimed, 2 not
    failed = False

    def __init__(self, backend: SqliteBackend) -> None:
        class Sim:
            store = StateStore(backend)

        self.sim = Sim()

    def fail(self, failure: str, detail: str) -> None:
        raise ScheduleFailure(failure, detail, "", "sqlite")


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[[type[SqliteBackend]], Probe]]:
    made: list[SqliteBackend] = []

    def build(kind: type[SqliteBackend]) -> Probe:
        backend = kind(tmp_path / f"state-{len(made)}.sqlite3")
        made.append(backend)
        ctx = Context(LogicalClock())
        token = backend.claim(0, ctx, True)
        for record in SOURCE:
            token = backend.process(0, token, record, ctx, True)
        backend.claim(1, ctx, True)
        return Probe(backend)

    yield build
    for backend in made:
        backend.close()


def run_rule(probe: Probe, name: str, **args: Any) -> None:
    getattr(SqliteFileChecks, name)(probe, **args)


VARIANTS: list[tuple[str, dict[str, Any]]] = [
    *(("sqlite_lock_wait", {"partition": p, "ending": e}) for p in (0, 2) for e in LOCK_ENDINGS),
    *(("sqlite_interrupt", {"partition": p, "at": a}) for p in (0, 2) for a in range(0, 61, 3)),
    *(("sqlite_reopen", {"how": h}) for h in REOPENS),
    *(("sqlite_open_file", {"kind": k}) for k in OPENS),
    *(
        ("sqlite_record_identity", {"partition": p, "offset": o, "at": a})
        for p, o in ((0, 0), (1, 3))
        for a in range(0, 31, 2)
    ),
]


@pytest.mark.parametrize(("name", "args"), VARIANTS, ids=lambda v: str(v))
def test_the_real_backend_passes(
    make: Callable[[type[SqliteBackend]], Probe], name: str, args: dict[str, Any]
) -> None:
    run_rule(make(SqliteBackend), name, **args)


PLANTED: list[tuple[type[SqliteBackend], str, dict[str, Any], str]] = [
    (NoLockWait, "sqlite_lock_wait", {"partition": 0, "ending": "released"}, "returned"),
    (WaitOffTheClock, "sqlite_lock_wait", {"partition": 0, "ending": "released"}, "returned"),
    (WaitIgnoresCancel, "sqlite_lock_wait", {"partition": 0, "ending": "canceled"}, "pauses"),
    (ObserveIgnoresCancel, "sqlite_lock_wait", {"partition": 0, "ending": "canceled"}, "observe"),
    (BeginOutsideTry, "sqlite_interrupt", {"partition": 0, "at": 2}, "lock is still held"),
    (BeginOutsideRollback, "sqlite_interrupt", {"partition": 2, "at": 31}, "at rollback"),
    (NotWal, "sqlite_reopen", {"how": "plain"}, "journal delete"),
    (SnapshotSubjectsMisread, "sqlite_reopen", {"how": "plain"}, "are not the rows"),
    (AcceptsNewerSchema, "sqlite_open_file", {"kind": "newer"}, "not InvalidInput"),
    (OnlyStampsNewFiles, "sqlite_open_file", {"kind": "v1"}, "schema version 1"),
    (LockedIsBadInput, "sqlite_reopen", {"how": "budget"}, "locked past the budget"),
    (OpenNotRetried, "sqlite_open_file", {"kind": "fresh-released"}, "opening a fresh-released"),
    (RawConnectError, "sqlite_open_file", {"kind": "directory"}, "OperationalError"),
    (RefusedFileLeftOpen, "sqlite_open_file", {"kind": "newer"}, "still open"),
    (RefusedFileLeftOpen, "sqlite_open_file", {"kind": "conflict"}, "still open"),
    (RefusedFileLeftOpen, "sqlite_open_file", {"kind": "garbage"}, "still open"),
    (
        IdentityKeepsTransaction,
        "sqlite_record_identity",
        {"partition": 0, "offset": 0, "at": 8},
        "recording",
    ),
]


@pytest.mark.parametrize(("kind", "name", "args", "found"), PLANTED, ids=lambda p: str(p))
def test_a_planted_bug_is_reported(
    make: Callable[[type[SqliteBackend]], Probe],
    monkeypatch: pytest.MonkeyPatch,
    kind: type[SqliteBackend],
    name: str,
    args: dict[str, Any],
    found: str,
) -> None:
    monkeypatch.setattr(sqlite_checks, "BACKEND", kind)
    with pytest.raises(ScheduleFailure, match="ERROR sqlite-file") as failure:
        run_rule(make(kind), name, **args)
    assert found in str(failure.value), failure.value


def test_the_interrupt_fixes_hold_on_the_real_backend(tmp_path: Path) -> None:
    """The two defects the rules found, on the real backend: an interrupt that lands as
    BEGIN or ROLLBACK ends leaves no transaction open, and a directory is bad input."""
    backend = SqliteBackend(tmp_path / "s.sqlite3")
    for at in range(0, 40):
        calls = [0]

        def progress(at: int = at, calls: list[int] = calls) -> int:
            calls[0] += 1
            return 1 if calls[0] == at + 1 else 0

        backend._conn.set_progress_handler(progress, 1)
        try:
            backend.claim(0, Context(LogicalClock()), False)
        except Canceled:
            pass
        finally:
            backend._conn.set_progress_handler(None, 1)
        assert not backend._conn.in_transaction, at
    backend.close()
    with pytest.raises(InvalidInput, match="not a usable Remora database"):
        SqliteBackend(tmp_path)


def test_the_file_machine_fails_on_a_planted_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.stateful.store_machines import SqliteFileMachine

    monkeypatch.setattr(sqlite_checks, "BACKEND", NotWal)
    assert sqlite_file_store is SqliteFileMachine.store_factory
    with pytest.raises(ScheduleFailure, match="ERROR sqlite-file"):
        run_state_machine_as_test(
            SqliteFileMachine,
            settings=settings(
                max_examples=60,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            ),
        )
