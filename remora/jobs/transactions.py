"""The durable store's transaction protocol: one spec action, one transaction, and a lost
COMMIT reply resolved by re-reading the log — never a blind retry.

Every durable spec action (:meth:`Transactions.transact`) is **one transaction**:

1. lock the job's row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE``
   takes the database write lock), read its attempts and intents
   (:func:`remora.jobs.sql.read_locked`);
2. evaluate the spec's guard on the locked rows — a method of
   :class:`~remora.jobs.guards.Guards` — together with any fact of another store the
   action needs, read while the lock is held (e.g. ``AcceptSuccess`` reads the attempt's
   staging);
3. write the new rows, bump the job's ``version`` and append the log row
   ``(job, version, action, params, actor, actor_seq)``; COMMIT
   (:func:`remora.jobs.sql.apply_change`).

So each step is a compare-and-swap whose condition is the guard, and the log's per-job
``version`` order is the commit order.  A COMMIT whose reply is lost raises
:class:`~remora.errors.UnknownResult` from the backend (or the fault seam);
:meth:`Transactions.transact` resolves it by re-reading the log for the call's ``(actor,
actor_seq)``: found — it committed, and the caller gets what the log says (the action, its
parameters and result; the rows are read again by whoever needs them); absent — it did not
(PostgreSQL settles the lost session first, see :mod:`remora.store.postgres`), and
:class:`~remora.errors.Unavailable` tells the caller it may try again.  The resolution is
the same whatever backend runs below: it never asks what the backend wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from remora.clock import Clock
from remora.context import Context
from remora.errors import NotEnabled, Unavailable, UnknownResult
from remora.jobs.guards import Change
from remora.jobs.io import Actor, JobOperation, io_call, resolved_call
from remora.jobs.model import JobRow, LogEntry, UnknownJob
from remora.jobs.sql import (
    Also,
    Locked,
    advanced,
    apply_change,
    job_row,
    lock_job_sql,
    read_locked,
    stamp,
)
from remora.store.dialect import Dialect

T = TypeVar("T")
L = TypeVar("L", Locked, JobRow)
"""What a job lock read: the full locked read or the row alone."""

Decide = Callable[[Locked], Change]
Prepare = Callable[[Any, Locked], Locked]
"""A write of another store in the durable store's database, made in a fused transaction
after the job's lock and before its spec steps are decided (:meth:`Transactions.
transact_steps`): it returns the locked read the steps then see (its ``also`` replaced)."""


@attrs.frozen
class Batched:
    """One row of a batched transaction (:meth:`Transactions.transact_batch`): a job's
    spec steps, with what :meth:`Transactions.transact_steps` takes for them."""

    job_id: str
    decides: tuple[Decide, ...]
    also: Also | None = None
    prepare: Prepare | None = None
    prepared: tuple[str, dict[str, Any]] | None = None


Refused = NotEnabled
"""A batched row whose guard was false (its steps rolled back, the others' kept)."""

#: The savepoint each batched row runs under (released or rolled back before the next).
ROW_SAVEPOINT = "remora_row"


class Backend(Protocol):
    """A SQL engine: one transaction per write, consistent reads."""

    #: How this engine spells the SQL (:mod:`remora.store.dialect`).
    dialect: Dialect
    where: str

    def read_one(self, what: str, sql: str, params: Any) -> Any: ...

    def read_all(self, what: str, sql: str, params: Any) -> list[Any]: ...

    def write(self, ctx: Context, commit: bool, what: str, body: Callable[[Any], T]) -> T: ...

    def read(self, what: str, body: Callable[[Any], T]) -> T: ...

    def close(self) -> None: ...


class Transactions:
    """The transaction protocol over a :class:`Backend` (module docstring): the base of the
    durable store's parts."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.dialect = backend.dialect
        self.where = backend.where
        #: The job row's lock, built once.
        self._lock_job_sql = lock_job_sql(self.dialect)
        #: The injected clock, for an engine without a clock of its own (SQLite, or a
        #: simulation on PostgreSQL): the times of transitions (:func:`remora.jobs.sql.stamp`,
        #: the log's ``at``) and a delayed job's due test.  Given by
        #: :class:`~remora.jobs.stores.Stores` (its clock) unless set before.
        self.clock: Clock | None = None

    def _q(self, sql: str) -> str:
        return self.dialect.q(sql)

    def injected_now(self) -> float:
        """The injected clock's reading (0 without one; unused when the engine has a clock
        of its own)."""
        return self.clock.now() if self.clock is not None else 0.0

    def durable_now(self, cur: Any) -> float:
        """The durable store's clock, inside a transaction: the server's, or the injected."""
        if self.dialect.clock_sql is None:
            return self.injected_now()
        return float(cur.execute(f"SELECT {self.dialect.clock_sql}").fetchone()[0])

    # -- one spec action, one transaction ------------------------------------------------------
    def transact(
        self, actor: Actor, job_id: str, decide: Decide, *, also: Also | None = None
    ) -> Change:
        """One durable spec action on ``job_id``: lock, ``decide`` (raises
        :class:`~remora.errors.NotEnabled` when the guard is false), write, log, commit.
        The action is recorded for ``actor``; an unknown result is resolved by re-reading
        the log: the change returned is then what the log says (no rows: ``job`` is None,
        the caller re-reads what it needs).  ``also``: an extra read under the lock, handed
        to ``decide`` as ``Locked.also``."""
        seq = actor.next_seq()

        def body(cur: Any) -> tuple[Change, int]:
            now = self.injected_now()
            locked = read_locked(cur, self.dialect, job_id, also=also, now=now)
            change = stamp(locked, decide(locked))
            version = apply_change(cur, self.dialect, locked, change, actor.name, seq)
            return change, version

        try:
            change, version = io_call(
                actor,
                JobOperation.DURABLE_WRITE,
                job_id,
                lambda commit: self.backend.write(actor.ctx, commit, "job transition", body),
            )
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

    # -- several spec actions, one transaction (refinement by reduction) ----------------------
    def transact_steps(
        self,
        actor: Actor,
        job_id: str,
        decides: Sequence[Decide],
        *,
        also: Also | None = None,
        prepare: Prepare | None = None,
        prepared: tuple[str, dict[str, Any]] | None = None,
    ) -> list[Change]:
        """Several durable spec actions of ``actor`` on ``job_id`` in **one** transaction:
        lock once, then for each ``decide`` in order evaluate its guard on the rows as the
        previous steps left them, write them and append its own log row (its own version
        and ``actor_seq``); one COMMIT.  ``prepare`` (optional) runs right after the lock:
        another store's write in this database (the stage write), made before the steps;
        ``prepared`` is its spec action and parameters, recorded first once it committed.

        Why this is still the spec's steps (docs/jobs.md, *Fused transactions*): the job's
        row lock is held from the first read to the COMMIT, so no other actor's durable
        step on the job can come between the steps, and no other transaction sees the
        intermediate rows (they are never committed on their own) — the steps are
        executed atomically, which a sequence of spec steps may always be (Lipton's
        reduction: the lock acquisition moves right, the COMMIT left).  Each step is still
        decided by its own guard and logged and recorded in order, so the refinement
        checker validates each, and the invariants of the intermediate state.  A step
        that writes the coordination store never joins one (the two stores do not share
        a transaction).

        Any step's guard failing (:class:`~remora.errors.NotEnabled`) rolls every step
        back.  A lost COMMIT reply is resolved by re-reading the log for the first
        step's ``(actor, actor_seq)``: all committed or none did."""
        first = actor.next_seq() if prepared is not None else 0
        seqs = [actor.next_seq() for _ in decides]

        def body(cur: Any) -> list[tuple[Change, int]]:
            locked = read_locked(cur, self.dialect, job_id, also=also, now=self.injected_now())
            if prepare is not None:
                locked = prepare(cur, locked)
            done: list[tuple[Change, int]] = []
            for decide, seq in zip(decides, seqs, strict=True):
                change = stamp(locked, decide(locked))
                version = apply_change(cur, self.dialect, locked, change, actor.name, seq)
                done.append((change, version))
                locked = advanced(locked, change, version)
            return done

        try:
            done = io_call(
                actor,
                JobOperation.DURABLE_WRITE,
                job_id,
                lambda commit: self.backend.write(actor.ctx, commit, "job transitions", body),
            )
        except UnknownResult:
            done = self.resolve_steps(actor, job_id, seqs)
        if prepared is not None:
            actor.record(first, prepared[0], prepared[1])
        for seq, (change, version) in zip(seqs, done, strict=True):
            actor.record(
                seq,
                change.action,
                change.params,
                store="durable",
                key=job_id,
                version=version,
                facts=change.facts,
            )
        return [change for change, _ in done]

    def resolve_steps(
        self, actor: Actor, job_id: str, seqs: Sequence[int]
    ) -> list[tuple[Change, int]]:
        """A fused transaction whose COMMIT reply was lost, resolved from the log: every
        step (what the log says it did, at its version) when the first one committed —
        one transaction, so all did — else :class:`~remora.errors.Unavailable`."""
        if self.find_log(actor.name, seqs[0]) is None:
            raise Unavailable(
                f"{job_id}: the transitions' COMMIT reply was lost and a re-read shows "
                "they did not commit"
            )
        done = []
        for seq in seqs:
            found = self.find_log(actor.name, seq)
            if found is None:
                raise AssertionError(f"{job_id}: one transaction, yet step {seq} is not logged")
            entry, result = found
            done.append((Change(entry.action, entry.params, result=result), entry.version))
        return done

    # -- several jobs' steps, one transaction, each row guarded on its own ---------------------
    def transact_batch(
        self, actor: Actor, items: Sequence[Batched]
    ) -> list[list[Change] | Refused]:
        """Several jobs' durable spec steps of ``actor`` in **one** transaction (a batch:
        a worker authorizing the N jobs it reserved, a completer settling K finished
        attempts).  The jobs are locked in job-id order (two batches never wait on each
        other in a cycle); each row — one job's steps, as :meth:`transact_steps` runs them,
        its ``prepare`` included — runs under a savepoint of its own: a row whose guard is
        false (:class:`~remora.errors.NotEnabled`) is rolled back to it and reported as
        refused, the other rows still commit (a batch of one row needs no savepoint: its
        refusal rolls the transaction back).  So every row is guarded by its own
        condition (its own attempt token, its own reservation): a stale attempt in a batch
        changes nothing.  Each step is logged with its own version and ``actor_seq`` and
        recorded in commit order, so the refinement checker validates each.

        Returns, per item (in the items' order), its changes or the refusal.  A lost COMMIT
        reply is resolved from the log for every row (:meth:`resolve_batch`)."""
        if len({item.job_id for item in items}) != len(items):
            raise ValueError("a batch takes each job once")
        order = sorted(range(len(items)), key=lambda i: items[i].job_id)
        firsts: dict[int, int] = {}
        seqs: dict[int, list[int]] = {}
        for i in order:
            firsts[i] = actor.next_seq() if items[i].prepared is not None else 0
            seqs[i] = [actor.next_seq() for _ in items[i].decides]

        def row(cur: Any, i: int) -> list[tuple[Change, int]]:
            item = items[i]
            now = self.injected_now()
            locked = read_locked(cur, self.dialect, item.job_id, also=item.also, now=now)
            if item.prepare is not None:
                locked = item.prepare(cur, locked)
            done: list[tuple[Change, int]] = []
            for decide, seq in zip(item.decides, seqs[i], strict=True):
                change = stamp(locked, decide(locked))
                version = apply_change(cur, self.dialect, locked, change, actor.name, seq)
                done.append((change, version))
                locked = advanced(locked, change, version)
            return done

        def body(cur: Any) -> dict[int, list[tuple[Change, int]] | Refused]:
            if len(order) == 1:  # one row: its refusal rolls the transaction back
                return {order[0]: row(cur, order[0])}
            out: dict[int, list[tuple[Change, int]] | Refused] = {}
            for i in order:
                cur.execute(f"SAVEPOINT {ROW_SAVEPOINT}")
                try:
                    out[i] = row(cur, i)
                except NotEnabled as exc:
                    cur.execute(f"ROLLBACK TO SAVEPOINT {ROW_SAVEPOINT}")
                    out[i] = exc
                cur.execute(f"RELEASE SAVEPOINT {ROW_SAVEPOINT}")
            return out

        jobs = ",".join(items[i].job_id for i in order)
        try:
            done = io_call(
                actor,
                JobOperation.DURABLE_WRITE,
                jobs,
                lambda commit: self.backend.write(actor.ctx, commit, "batched transitions", body),
            )
        except NotEnabled as exc:  # the only row was refused (no savepoint: all rolled back)
            done = {order[0]: exc}
        except UnknownResult:
            done = self.resolve_batch(actor, jobs, {i: seqs[i] for i in order})
        results: list[list[Change] | Refused] = [NotEnabled("not run")] * len(items)
        for i in order:
            got = done[i]
            if isinstance(got, NotEnabled):
                results[i] = got
                continue
            prepared = items[i].prepared
            if prepared is not None:
                actor.record(firsts[i], prepared[0], prepared[1])
            for seq, (change, version) in zip(seqs[i], got, strict=True):
                actor.record(
                    seq,
                    change.action,
                    change.params,
                    store="durable",
                    key=items[i].job_id,
                    version=version,
                    facts=change.facts,
                )
            results[i] = [change for change, _ in got]
        return results

    def resolve_batch(
        self, actor: Actor, jobs: str, seqs: dict[int, list[int]]
    ) -> dict[int, list[tuple[Change, int]] | Refused]:
        """A batch whose COMMIT reply was lost, resolved from the log row by row: a row
        whose first step is logged committed all its steps (:meth:`resolve_steps`); when
        any row committed the transaction did, so a row not logged was refused; when none
        is logged, either the transaction did not commit or every row was refused — the
        caller may try again (:class:`~remora.errors.Unavailable`): a retried row that did
        commit is refused by its guard, never applied twice."""
        out: dict[int, list[tuple[Change, int]] | Refused] = {}
        for i, row in seqs.items():
            if not row or self.find_log(actor.name, row[0]) is None:
                out[i] = NotEnabled(f"a row of the batch {jobs} was refused (read from the log)")
                continue
            out[i] = self.resolve_steps(actor, jobs, row)
        if all(isinstance(got, NotEnabled) for got in out.values()):
            raise Unavailable(
                f"{jobs}: the batch's COMMIT reply was lost and a re-read shows none of its "
                "rows committed"
            )
        return out

    def resolved_write(
        self,
        actor: Actor,
        seq: int,
        key: str,
        body: Callable[[Any], T],
        reread: Callable[[], T],
    ) -> T:
        """A logged durable write other than a job transition (a submit, an incarnation's
        row): its lost reply resolved from the log like :meth:`transact`'s."""
        return resolved_call(
            actor,
            JobOperation.DURABLE_WRITE,
            key,
            lambda commit: self.backend.write(actor.ctx, commit, "job write", body),
            lambda: self.find_log(actor.name, seq) is not None,
            reread,
        )

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

    # -- holding a job's lock ------------------------------------------------------------------
    def with_lock(self, actor: Actor, job_id: str, block: Callable[[Locked], T]) -> T:
        """Run ``block(locked)`` while holding ``job_id``'s lock (no durable change is made):
        the reconciler's cross-store steps.  No durable transition of the job can commit
        while ``block`` runs, so the row it sees is the job's durable state throughout."""

        return self._holding(
            actor,
            job_id,
            lambda cur: read_locked(cur, self.dialect, job_id, now=self.injected_now()),
            block,
        )

    def with_job_lock(self, actor: Actor, job_id: str, block: Callable[[JobRow], T]) -> T:
        """:meth:`with_lock` for a ``block`` that needs only the job's row: the row lock is
        the only read (on PostgreSQL one statement fewer than the locked read of the job's
        attempts, intents and the workers down).  The steps whose guard is a fact of the
        job row alone (``CleanTerminalCoordination``, ``PublishCancelNotice``, …) use it."""

        def lock_row(cur: Any) -> JobRow:
            row = cur.execute(self._lock_job_sql, (job_id,)).fetchone()
            if row is None:
                raise UnknownJob(f"no job {job_id!r}")
            return job_row(tuple(row))

        return self._holding(actor, job_id, lock_row, block)

    def with_job_locks(
        self, actor: Actor, job_ids: Iterable[str], block: Callable[[dict[str, JobRow]], T]
    ) -> T:
        """:meth:`with_job_lock` for several jobs in **one** transaction (a reconcile
        pass's ``CleanTerminalCoordination`` of every terminal job it found): the rows are
        locked in job-id order (two such transactions never wait on each other in a cycle,
        nor on a batch of :meth:`transact_batch`), ``block`` runs on ``{job: row}`` (a job
        with no row is left out) with ``actor.held`` naming every locked job's version, and
        the transaction writes nothing.  On PostgreSQL the locks travel in one round trip
        (pipeline mode: every statement is sent before the first reply is read; the server
        still takes the locks in order)."""
        ordered = sorted(set(job_ids))

        def body(cur: Any) -> T:
            if self.dialect.folds:
                sent = []
                for job in ordered:
                    one = cur.connection.cursor()
                    one.execute(self._lock_job_sql, (job,))
                    sent.append(one)
                found = [one.fetchone() for one in sent]
            else:
                found = [cur.execute(self._lock_job_sql, (job,)).fetchone() for job in ordered]
            pairs = zip(ordered, found, strict=True)
            rows = {job: job_row(tuple(r)) for job, r in pairs if r is not None}
            actor.held = {job: row.version for job, row in rows.items()}
            try:
                return block(rows)
            finally:
                actor.held = None

        return io_call(
            actor,
            JobOperation.DURABLE_READ,
            ordered[0] if ordered else "",
            lambda commit: self.backend.write(actor.ctx, False, "job locks", body),
        )

    def _holding(
        self, actor: Actor, job_id: str, lock: Callable[[Any], L], block: Callable[[L], T]
    ) -> T:
        """Take the job's lock with ``lock`` (in a transaction that writes nothing), run
        ``block`` on what it read, with ``actor.held`` naming the job's version meanwhile."""

        def body(cur: Any) -> T:
            held = lock(cur)
            row = held.job if isinstance(held, Locked) else held
            assert isinstance(row, JobRow)
            actor.held = {job_id: row.version}
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

    def read_locked(self, actor: Actor, job_id: str) -> Locked:
        """The job's rows (a consistent read; no lock is kept)."""
        return io_call(
            actor,
            JobOperation.DURABLE_READ,
            job_id,
            lambda commit: self.backend.read(
                "job read",
                lambda cur: read_locked(
                    cur, self.dialect, job_id, lock=False, now=self.injected_now()
                ),
            ),
        )

    def close(self) -> None:
        self.backend.close()


__all__ = ["ROW_SAVEPOINT", "Backend", "Batched", "Decide", "Prepare", "Refused", "Transactions"]
