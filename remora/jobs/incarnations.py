"""The durable store's incarnation rows: a worker incarnation starts (``StartIncarnation``),
renews its heartbeat, goes down cleanly or is declared down by another one
(``CrashWorker``).

Why a part of its own: an incarnation's row is not a job's — its writes lock the worker row,
log under the subject ``worker:<id>``, and read the durable store's clock (PostgreSQL's own,
so hosts need no synchronized clocks; the injected one otherwise,
:meth:`~remora.store.dialect.Dialect.now_sql`).  The guard of a declaration is the caller's
(:meth:`remora.jobs.guards.Guards.declare_down`), evaluated under the worker row's lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remora.errors import InvalidInput, NotEnabled
from remora.jobs.actions import Action
from remora.jobs.io import Actor, JobOperation, io_call
from remora.jobs.sql import insert_log
from remora.jobs.transactions import Transactions

DeclareGuard = Callable[..., None]
"""The guard of ``CrashWorker(w)`` declared by another incarnation
(:meth:`remora.jobs.guards.Guards.declare_down`'s signature)."""


class Incarnations(Transactions):
    """Worker incarnation rows (module docstring)."""

    def register_worker(self, actor: Actor, worker_id: str, now: float = 0.0) -> None:
        """``StartIncarnation(w)``: a fresh incarnation id (an id is never reused); its
        heartbeat starts now (``now``: the injected clock, unless the server has one)."""
        seq = actor.next_seq()
        subject = f"worker:{worker_id}"
        d = self.dialect

        def body(cur: Any) -> None:
            exists = cur.execute(
                self._q("SELECT 1 FROM remora_jobs_worker WHERE id = ?"), (worker_id,)
            ).fetchone()
            if exists is not None:
                raise InvalidInput(f"worker incarnation {worker_id!r} was used before")
            cur.execute(
                self._q(
                    "INSERT INTO remora_jobs_worker (id, up, version, seen) "
                    f"VALUES (?, 1, 1, {d.now_sql()})"
                ),
                (worker_id, *d.now_params(now)),
            )
            insert_log(
                cur,
                d,
                subject,
                1,
                Action.START_INCARNATION,
                {"w": worker_id},
                actor.name,
                seq,
                "",
                now=now,
            )

        self.resolved_write(actor, seq, subject, body, lambda: None)
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
                + self.dialect.lock_clause,
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
            insert_log(
                cur,
                self.dialect,
                subject,
                2,
                Action.CRASH_WORKER,
                {"w": worker_id},
                actor.name,
                seq,
                "",
                now=self.injected_now(),
            )

        self.resolved_write(actor, seq, subject, body, lambda: None)
        actor.record(
            seq, Action.CRASH_WORKER, {"w": worker_id}, store="durable", key=subject, version=2
        )

    def heartbeat(self, actor: Actor, worker_id: str, now: float = 0.0) -> bool:
        """Renew the incarnation's heartbeat (``seen``) — not a spec step, one statement in
        a transaction, taken every few ticks by the worker, never per job.  False when the
        incarnation is down (declared down by another one, or shut down): it must stop."""
        d = self.dialect

        def body(cur: Any) -> bool:
            row = cur.execute(
                self._q(
                    f"UPDATE remora_jobs_worker SET seen = {d.now_sql()} "
                    "WHERE id = ? AND up = 1 RETURNING 1"
                ),
                (*d.now_params(now), worker_id),
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
        clock = self.dialect.clock_sql
        now_sql = clock if clock is not None else repr(float(now))

        def body(cur: Any) -> tuple[float, list[tuple[str, bool, float]]]:
            rows = cur.execute(
                f"SELECT id, up, seen, {now_sql} FROM remora_jobs_worker WHERE up = 1"
            ).fetchall()
            if rows:
                at = float(rows[0][3])
            elif self.dialect.clock_sql is not None:  # nobody up: ask the clock itself
                at = float(cur.execute(f"SELECT {clock}").fetchone()[0])
            else:
                at = now
            return at, [(r[0], bool(r[1]), float(r[2])) for r in rows]

        return self.backend.read("liveness", body)

    def worker_up(self, worker_id: str) -> bool:
        row = self.backend.read(
            "worker",
            lambda cur: cur.execute(
                self._q("SELECT up FROM remora_jobs_worker WHERE id = ?"), (worker_id,)
            ).fetchone(),
        )
        return row is not None and bool(row[0])

    def declare_down(
        self,
        actor: Actor,
        worker_id: str,
        by: str,
        down_after: float,
        now: float = 0.0,
        *,
        guard: DeclareGuard,
    ) -> None:
        """``CrashWorker(w)`` declared by ``by``, when ``guard`` holds (``w`` is up, another
        incarnation is up, ``w``'s heartbeat is ``down_after`` seconds old — on the durable
        store's clock, read in this transaction).  The worker's row is locked, so a
        heartbeat serializes with the declaration; the log row ``(worker:w, 2,
        CrashWorker)`` is the same a clean shutdown writes, so at most one of them commits.
        The caller raises the coordination and target fences *before* (see
        :meth:`Reconciler.declare_down`).  Raises :class:`NotEnabled` when the guard is
        false."""
        seq = actor.next_seq()
        subject = f"worker:{worker_id}"
        d = self.dialect

        def body(cur: Any) -> None:
            row = cur.execute(
                self._q(f"SELECT up, seen, {d.now_sql()} FROM remora_jobs_worker WHERE id = ?")
                + d.lock_clause,
                (*d.now_params(now), worker_id),
            ).fetchone()
            others = cur.execute(
                self._q("SELECT count(*) FROM remora_jobs_worker WHERE up = 1 AND id <> ?"),
                (worker_id,),
            ).fetchone()
            guard(
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
            insert_log(
                cur,
                d,
                subject,
                2,
                Action.CRASH_WORKER,
                {"w": worker_id},
                actor.name,
                seq,
                "",
                now=now,
            )

        self.resolved_write(actor, seq, subject, body, lambda: None)
        actor.record(
            seq, Action.CRASH_WORKER, {"w": worker_id}, store="durable", key=subject, version=2
        )


__all__ = ["DeclareGuard", "Incarnations"]
