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
from remora.jobs.coordination import Coordination
from remora.jobs.durable import DurableStore, Locked
from remora.jobs.guards import SPEC_GUARDS, Change, Guards
from remora.jobs.io import Actor
from remora.jobs.model import AttemptId, JobRow, JobsConfig, Phase
from remora.jobs.target import Target, Vault, check_id


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
        timeout: float = 0.0,
    ) -> JobRow:
        """Durably accept a job.  With ``enqueue`` the submitter then takes the spec's
        ``Enqueue(j)`` step itself (:meth:`enqueue`), so a worker can reserve the job at
        once instead of after the next reconcile pass; best effort — if it fails (or the
        coordination store is wiped afterwards) the reconciler's ``Enqueue`` repairs it.
        Leave it off when the coordination store is private to another process (the
        embedded default): the job would be queued where no worker looks.  ``timeout``:
        seconds an attempt of the job may run (0: none; the handler's own timeout, if
        smaller, applies instead)."""
        check_id("job", job_id)
        if not (timeout == 0 or 0 < timeout < float("inf")):
            raise InvalidInput(f"job {job_id!r}: timeout must be a positive number of seconds")
        row = self.durable.submit(
            actor,
            job_id,
            handler,
            json.dumps(payload, sort_keys=True),
            self.config,
            timeout=float(timeout),
        )
        if enqueue:
            with contextlib.suppress(RemoraError):
                self.enqueue(actor, job_id)
        return row

    def enqueue(self, actor: Actor, job_id: str) -> bool:
        r"""``Enqueue(j)``: the coordination write, made while the job's durable lock is held
        (``phase = Queued /\ dispatchNeeded`` cannot change meanwhile); the reconciler's
        and the submitter's step.  The full locked read, not the row alone
        (:meth:`DurableStore.with_job_lock`): a refusal after a wipe republishes the down
        marks from it."""

        def act(lk: Locked) -> bool:
            row = lk.job
            if row.phase is not Phase.QUEUED or not row.dispatch_needed:
                return False
            coord = self.coordination
            if coord.enqueue(actor, job_id):
                return True
            # Refused: already queued or reserved, or the down marks were wiped — then
            # republish them (every incarnation the durable store holds down) and try again.
            if coord.is_marked(actor):
                return False
            coord.publish_down(actor, lk.workers_down)
            return coord.enqueue(actor, job_id)

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

        # A target in the durable store's database (PostgresTarget on the same DSN) is read
        # with the job's locked read, in its round trip; any other target by its own call.
        locked_info = getattr(self.target, "locked_info", None)
        also = None if locked_info is None else locked_info(self.durable, a)

        def decide(lk: Locked) -> Change:
            if also is None:
                stage = self.target.info(actor, a)
            else:
                stage = self.target.info_from(actor, a, lk.also)  # type: ignore[attr-defined]
            return self.guards.process_outcome(lk.job, lk.attempts, a.token, stage, error)

        return self.durable.transact(actor, a.job, decide, also=also)

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


__all__ = ["Stores"]
