"""The four stores a job deployment runs on, the guards they evaluate, and the steps more
than one actor takes: submit, ``Enqueue`` (submitter, reconciler), ``RequestCancel``,
``ProcessOutcome`` (the attempt's worker, or the reconciler for an outcome whose sender went
away)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import attrs

from remora.clock import Clock
from remora.context import Context
from remora.errors import InvalidInput, RemoraError
from remora.jobs.actions import Action
from remora.jobs.coordination import Coordination
from remora.jobs.durable import DurableStore, Locked
from remora.jobs.guards import SPEC_GUARDS, Change, Guards
from remora.jobs.io import Actor
from remora.jobs.model import (
    DEFAULT_QUEUE,
    MAX_PRIORITY,
    AttemptId,
    JobRow,
    JobsConfig,
    Phase,
)
from remora.jobs.sql import Also
from remora.jobs.target import Target, Vault, check_id
from remora.jobs.transactions import Decide

#: The outcomes that accept a failure: the error the attempt reported is a fact of the step.
FAILURES = frozenset(
    {
        Action.ACCEPT_PERMANENT_FAILURE,
        Action.ACCEPT_RETRYABLE_FAILURE_WITH_BUDGET,
        Action.ACCEPT_RETRYABLE_FAILURE_EXHAUSTED,
    }
)


@attrs.define
class Stores:
    """Durable authority, reconstructible coordination, target staging, vault; the clock,
    the deployment's limits (``config``, kept in the durable store) and the guards every
    step evaluates (the spec's; a simulation may supply planted ones — the coordination
    store evaluates the ones it was built with)."""

    durable: DurableStore
    coordination: Coordination
    target: Target
    vault: Vault
    clock: Clock
    config: JobsConfig
    guards: Guards = SPEC_GUARDS

    def __attrs_post_init__(self) -> None:
        # The durable store's injected clock (for an engine without its own) is ours.
        if self.durable.clock is None:
            self.durable.clock = self.clock

    def close(self) -> None:
        for store in (self.coordination, self.target, self.vault, self.durable):
            store.close()

    # -- client operations -----------------------------------------------------------------
    def submit(
        self,
        actor: Actor,
        job_id: str,
        handler: str,
        payload: Any = None,
        *,
        enqueue: bool = False,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        delay: float | None = None,
        due_at: float | None = None,
        timeout: float = 0.0,
    ) -> JobRow:
        """Durably accept a job in ``queue`` (a worker serves the queues it names) with
        ``priority`` (higher first); a delayed one (``delay`` seconds from now or at
        ``due_at``, on the durable store's clock) is not enqueued before it is due.  With
        ``enqueue`` the submitter then takes the spec's ``Enqueue(j)`` step itself
        (:meth:`enqueue`), so a worker can reserve the job at once instead of after the next
        reconcile pass; best effort — if it fails (or the coordination store is wiped
        afterwards, or the job is not due yet) the reconciler's ``Enqueue`` does it.
        Leave it off when the coordination store is private to another process (the
        embedded default): the job would be queued where no worker looks.  ``timeout``:
        seconds an attempt of the job may run (0: none; the handler's own timeout, if
        smaller, applies instead)."""
        check_id("job", job_id)
        if not (timeout == 0 or 0 < timeout < float("inf")):
            raise InvalidInput(f"job {job_id!r}: timeout must be a positive number of seconds")
        check_id("queue", queue)
        if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
            raise InvalidInput(f"priority {priority}: from {-MAX_PRIORITY} to {MAX_PRIORITY}")
        row = self.durable.submit(
            actor,
            job_id,
            handler,
            json.dumps(payload, sort_keys=True),
            self.config,
            queue=queue,
            priority=priority,
            delay=delay,
            due_at=due_at,
            timeout=float(timeout),
        )
        if enqueue and self.guards.is_due(row, row.submitted_at):
            with contextlib.suppress(RemoraError):
                self.enqueue(actor, job_id)
        return row

    def enqueue(self, actor: Actor, job_id: str) -> bool:
        r"""``Enqueue(j)``: the coordination write, made while the job's durable lock is held
        (``phase = Queued /\ dispatchNeeded`` cannot change meanwhile); the reconciler's
        and the submitter's step.  A delayed job is refused until it is due on the durable
        store's clock (:meth:`Guards.is_due`, read with the lock).  The job's queue and
        priority go with it (the order :meth:`Coordination.candidates` offers jobs in).
        The full locked read, not the row alone (:meth:`DurableStore.with_job_lock`): a
        refusal after a wipe republishes the down marks from it."""

        def act(lk: Locked) -> bool:
            row = lk.job
            if row.phase is not Phase.QUEUED or not row.dispatch_needed:
                return False
            if not self.guards.is_due(row, lk.now):
                return False
            coord = self.coordination

            def put() -> bool:
                return coord.enqueue(
                    actor, job_id, queue=row.queue, priority=row.priority, order=row.seq
                )

            if put():
                return True
            # Refused: already queued or reserved, or the down marks were wiped — then
            # republish them (every incarnation the durable store holds down) and try again.
            if coord.is_marked(actor):
                return False
            coord.publish_down(actor, lk.workers_down)
            return put()

        return bool(self.durable.with_lock(actor, job_id, act))

    def request_cancel(self, actor: Actor, job_id: str) -> JobRow:
        """``RequestCancel(j)``: mark cancel in the coordination mirror first (so no attempt
        activates or reports as Running afterwards), then the durable transition."""
        self.coordination.mark_cancel(actor, job_id)
        self.durable.transact(actor, job_id, lambda lk: self.guards.request_cancel(lk.job))
        return self.durable.job(job_id)

    def process_outcome(self, actor: Actor, a: AttemptId, error: str = "") -> Change:
        """``ProcessOutcome(a)`` (by the attempt's worker, or the reconciler for an outcome
        whose sender went away): the target's record of the attempt is read under the
        job's lock."""
        decide, also = self.outcome_decision(actor, a, error)
        return self.durable.transact(actor, a.job, decide, also=also)

    def outcome_decision(
        self, actor: Actor, a: AttemptId, error: str = ""
    ) -> tuple[Decide, Also | None]:
        """``ProcessOutcome(a)``'s guard as a decision on the locked rows, with the extra
        read it needs under the lock (alone: :meth:`process_outcome`; after ``SendOutcome``
        in one transaction: :meth:`remora.jobs.worker.Worker.complete`)."""

        # A target in the durable store's database (PostgresTarget on the same DSN) is read
        # with the job's locked read, in its round trip; any other target by its own call.
        locked_info = getattr(self.target, "locked_info", None)
        also = None if locked_info is None else locked_info(self.durable, a)

        def decide(lk: Locked) -> Change:
            if also is None:
                stage = self.target.info(actor, a)
            else:
                stage = self.target.info_from(actor, a, lk.also)  # type: ignore[attr-defined]
            change = self.guards.process_outcome(lk.job, lk.attempts, a.token, stage, error)
            if error and change.action in FAILURES:
                change = attrs.evolve(change, facts={**change.facts, "error": error})
            return change

        return decide, also

    def result(self, job_id: str) -> bytes | None:
        """The committed result: the winning attempt's staged output, or None."""
        job = self.durable.job(job_id)
        if job.phase is not Phase.SUCCEEDED:
            return None
        return self.staged_data(AttemptId(job.id, job.committed), job.max_progress)

    def staged_data(self, a: AttemptId, progress: int) -> bytes | None:
        """The staged snapshot of ``a`` at ``progress``, following a resumed attempt back to
        the staging it took over."""
        lk = self.durable.read_locked(Actor("reader", Context(self.clock)), a.job)
        token = a.token
        while token:
            data = self.target.data(AttemptId(a.job, token), progress)
            if data is not None:
                return data
            row = lk.attempts.get(token)
            token = row.adopted_from if row is not None else 0
        return None


__all__ = ["FAILURES", "Stores"]
