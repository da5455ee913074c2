"""Planted concurrency bugs in the job runtime's stores: each a test-only subclass of a real
store, wrong only when two actors race.

One step at a time never tells them from the real code: the sequential job machines — which
run every store call whole — do not kill them (``tests/jobs/test_parallel_jobs.py`` runs them
as the sequential machine's twin stores, in the same budget); the parallel job machines
(:mod:`remora.sim.jobs.parallel`) must.

==========================  ==========================================================
bug                         what is wrong
==========================  ==========================================================
``SplitTransition``         durable (SQLite): a job transition decides on the job's rows
                            read in one transaction and writes in a second one (a
                            transaction split in two: the guard is checked, then acted on)
``UnlockedHold``            durable (SQLite): the job lock the reconciler's and the
                            workers' coordination steps hold (``with_lock``, and
                            ``with_job_locks`` of a pass's batched clean) is a plain
                            read — the row lock dropped from the locked read
``CoordinationLockGap``     coordination (memory): an atomic script evaluated on a copy
                            under the lock, the lock let go and taken again to install
                            the copy (a check-then-act outside the store's lock)
==========================  ==========================================================

Every factory is at the top level of this module, so an exported example records it by
``module:qualname`` and ``remora sim-jobs --replay`` runs it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from remora.clock import LogicalClock
from remora.errors import Unavailable, UnknownResult
from remora.jobs.coordination import MemoryCoordination, _Data, copy_data
from remora.jobs.durable import DurableStore
from remora.jobs.guards import Change
from remora.jobs.io import Actor, JobOperation, io_call
from remora.jobs.model import CoordSnapshot, JobRow, JobsConfig
from remora.jobs.sql import Also, Locked, apply_change, job_row, read_locked, stamp
from remora.jobs.sqlite import SqliteJobsBackend
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget, MemoryVault
from remora.jobs.transactions import Decide, L

T = TypeVar("T")


class _SplitTransition(DurableStore):
    def transact(
        self, actor: Actor, job_id: str, decide: Decide, *, also: Also | None = None
    ) -> Change:
        seq = actor.next_seq()
        now = self.injected_now()

        def effect(commit: bool) -> tuple[Change, int]:
            # the guard, on a read in a transaction of its own ...
            stale = self.backend.read(
                "job rows", lambda cur: read_locked(cur, self.dialect, job_id, also=also, now=now)
            )
            decided = decide(stale)

            def body(cur: Any) -> tuple[Change, int]:  # ... acted on in a second one
                fresh = read_locked(cur, self.dialect, job_id, also=also, now=now)
                change = stamp(fresh, decided)
                return change, apply_change(cur, self.dialect, fresh, change, actor.name, seq)

            return self.backend.write(actor.ctx, commit, "job transition", body)

        try:
            change, version = io_call(actor, JobOperation.DURABLE_WRITE, job_id, effect)
        except UnknownResult:  # resolved from the log, as the real store does
            found = self.find_log(actor.name, seq)
            if found is None:
                raise Unavailable(
                    f"{job_id}: the transition's COMMIT reply was lost and a re-read shows it "
                    "did not commit"
                ) from None
            entry, result = found
            change = Change(entry.action, entry.params, result=result)
            version = entry.version
        actor.record(
            seq,
            change.action,
            change.params,
            store="durable",
            key=job_id,
            version=version,
            facts=change.facts,
        )
        return change


def split_transition(path: str | Path) -> DurableStore:
    return _SplitTransition(SqliteJobsBackend(path))


def split_transition_pg(dsn: str) -> DurableStore:
    """:func:`split_transition` on PostgreSQL (the backend imported when called: this
    module collects without psycopg)."""
    from remora.jobs.postgres import PostgresJobsBackend

    backend = PostgresJobsBackend(dsn, migrate=False)
    backend.dialect = backend.dialect.with_injected_clock()
    return _SplitTransition(backend)


class _UnlockedHold(DurableStore):
    def _holding(
        self, actor: Actor, job_id: str, lock: Callable[[Any], L], block: Callable[[L], T]
    ) -> T:
        held = self.backend.read("job lock", lock)  # read, then let go: no lock kept
        row = held.job if isinstance(held, Locked) else held
        actor.held = {job_id: row.version}
        try:
            return io_call(actor, JobOperation.DURABLE_READ, job_id, lambda commit: block(held))
        finally:
            actor.held = None

    def with_job_locks(
        self, actor: Actor, job_ids: Iterable[str], block: Callable[[dict[str, JobRow]], T]
    ) -> T:
        ordered = sorted(set(job_ids))

        def read(cur: Any) -> dict[str, JobRow]:
            found = [cur.execute(self._lock_job_sql, (j,)).fetchone() for j in ordered]
            pairs = zip(ordered, found, strict=True)
            return {j: job_row(tuple(r)) for j, r in pairs if r is not None}

        rows = self.backend.read("job locks", read)  # read, then let go: no lock kept
        actor.held = {j: r.version for j, r in rows.items()}
        try:
            return io_call(actor, JobOperation.DURABLE_READ, ordered[0], lambda c: block(rows))
        finally:
            actor.held = None


def unlocked_hold(path: str | Path) -> DurableStore:
    return _UnlockedHold(SqliteJobsBackend(path))


class CoordinationLockGap(MemoryCoordination):
    def _op(
        self,
        actor: Actor,
        action: str,
        params: dict[str, Any],
        key: str,
        body: Callable[[_Data, CoordSnapshot, int], Any],
    ) -> Any:
        seq = actor.next_seq()
        applied: list[str] = []

        def effect(commit: bool) -> Any:
            with self._lock:
                snap = self._snap()
                original = self._data
                copy = copy_data(original)
                result = body(copy, snap, snap.now_ms)
                if self._data is not original:  # the body replaced the store (a wipe)
                    if not commit:
                        self._data = original
                    elif result:
                        order = f"{len(self._log) + 1}-0"
                        self._log.append(_entry(order, action, params, actor.name, seq))
                        applied.append(order)
                    return result
            if not commit:
                return result
            with self._lock:  # taken again: whatever happened meanwhile is overwritten
                self._data = copy
                if result:
                    order = f"{len(self._log) + 1}-0"
                    self._log.append(_entry(order, action, params, actor.name, seq))
                    applied.append(order)
            return result

        try:
            result = io_call(actor, JobOperation.COORD_WRITE, key, effect)
        except UnknownResult:  # resolved from the log, as the real store does
            if not applied:
                raise Unavailable(f"memory {action or key}: not applied") from None
            result = True
        if result and applied:
            actor.record(seq, action, params, store="coordination", order=applied[0])
        return result


def _entry(order: str, action: str, params: dict[str, Any], actor: str, seq: int) -> Any:
    from remora.jobs.model import CoordEntry

    return CoordEntry(order, action, params, actor, seq)


def twin_stores(
    durable: Callable[[str], DurableStore] | None = None,
    coordination: type[MemoryCoordination] = MemoryCoordination,
) -> Callable[[LogicalClock, JobsConfig], Stores]:
    """A stores factory for the sequential machines' twin run: a planted store (an SQLite
    file of its own) where the real one would be."""
    from tempfile import mkdtemp

    def make(clock: LogicalClock, config: JobsConfig) -> Stores:
        path = str(Path(mkdtemp(prefix="remora-twin-")) / "durable.sqlite3")
        return Stores(
            durable=(durable or (lambda p: DurableStore(SqliteJobsBackend(p))))(path),
            coordination=coordination(clock, config),
            target=MemoryTarget(),
            vault=MemoryVault(),
            clock=clock,
            config=config,
        )

    return make
