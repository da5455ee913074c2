"""Named mutations of the job runtime's guards: planted bugs the job machine must kill.

Each mutation replaces one guard of :mod:`remora.jobs.guards` (or one coordination-store
operation, or one reconciler duty) for the duration of a run — by patching the module or
class attribute the runtime looks up at call time, never through a production flag.  A job
trace run against a mutation records its name (``config.mutation``), so replaying or
reducing it runs the same planted bug.  The campaign (``python -m tests.stateful.
job_campaign``) must kill every one under the ``ci`` profile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from remora.errors import InvalidInput
from remora.jobs import guards
from remora.jobs.coordination import MemoryCoordination, _Data
from remora.jobs.model import Outcome
from remora.jobs.reconciler import Reconciler


class UnknownMutation(InvalidInput):
    """A trace or a command names a mutation this build does not have."""


@attrs.frozen
class JobMutation:
    name: str
    description: str
    target: Any  # the module or class patched
    attribute: str
    replacement: Callable[..., Any]


def _true(*args: Any, **kwargs: Any) -> bool:
    return True


_real = {
    name: getattr(guards, name)
    for name in (
        "reap",
        "authorize",
        "can_reserve",
        "persist_checkpoint",
        "schedule_retry",
        "mirror_allows",
        "live_count",
    )
}


def unguarded(fn: Callable[..., Any], *skip: str) -> Callable[..., Any]:
    """``fn`` (a guard) with ``guards.need`` ignoring the conditions whose reason mentions
    one of ``skip`` — the one way a guard is planted with a hole (here and in
    ``tests/jobs/test_planted.py``)."""

    def mutant(*args: Any, **kwargs: Any) -> Any:
        real_need = guards.need

        def lenient(cond: bool, why: str) -> None:
            if not any(s in why for s in skip):
                real_need(cond, why)

        guards.need = lenient
        try:
            return fn(*args, **kwargs)
        finally:
            guards.need = real_need

    return mutant


def _unguarded(name: str, *skip: str) -> Callable[..., Any]:
    """``guards.<name>`` with the conditions mentioning ``skip`` ignored (:func:`unguarded`)."""
    return unguarded(_real[name], *skip)


def _activate_without_authority(c: Any, a: Any, worker: str, rid: str) -> bool:
    r = c.reservations.get(a.job)
    return r is not None and r.worker == worker and r.rid == rid


def _renew_after_authority_lost(c: Any, a: Any, worker: str, tick_ms: int, limit: int) -> bool:
    lease = c.leases.get(a)
    return (
        lease is not None
        and lease.live
        and lease.worker == worker
        and guards.age(c.now_ms, lease.at_ms, tick_ms, limit) > 0
    )


def _report_after_cancel(c: Any, a: Any, progress: int) -> bool:
    lease = c.leases.get(a)
    current = c.progress.get(a.job)
    return (
        lease is not None
        and lease.live
        and (current is None or current.attempt != a or current.progress != progress)
    )


def _reap_live_lease(
    job: Any, attempts: Any, token: int, *, lease_live: bool, reserved: bool
) -> Any:
    return _real["reap"](job, attempts, token, lease_live=False, reserved=reserved)


def _expire_fresh_lease(c: Any, a: Any, tick_ms: int, limit: int) -> bool:
    lease = c.leases.get(a)
    return lease is not None and lease.live


def _reserve_beyond_capacity(c: Any, job: str, *args: Any) -> bool:
    return job in c.queued and job not in c.reservations


def _keep_reservations_on_wipe(self: MemoryCoordination, actor: Any) -> None:
    def body(d: _Data, c: Any, now: int) -> bool:
        self._data = _Data(reservations=dict(d.reservations))
        return True

    self._op(actor, "LoseCoordinationState", {}, "", body)


def _skip_credential_cleanup(self: Reconciler, job: Any) -> int:
    return 0


def _never_declare_down(self: Reconciler, worker: str, **kwargs: Any) -> bool:
    return False


MUTATIONS: tuple[JobMutation, ...] = (
    JobMutation(
        "accept-success-without-token-compare",
        "AcceptSuccess commits any pending success, without comparing the attempt's token "
        "with the current authority (or the phase, the cancel, the stage)",
        guards,
        "commit_eligible",
        lambda job, row, stage: row.pending is Outcome.SUCCESS,
    ),
    JobMutation(
        "activate-without-authority-check",
        "ActivateAttempt compares the reservation id but not the mirrored authority / cancel",
        guards,
        "can_activate",
        _activate_without_authority,
    ),
    JobMutation(
        "reap-before-lease-expiry",
        "ReapLostAttempt revokes an attempt whose lease is still live",
        guards,
        "reap",
        _reap_live_lease,
    ),
    JobMutation(
        "renew-after-losing-authority",
        "RenewLease renews without the mirrored authority (after a reap, a cancel, a retry)",
        guards,
        "can_renew",
        _renew_after_authority_lost,
    ),
    JobMutation(
        "keep-reservation-after-wipe",
        "LoseCoordinationState keeps the reservations (a partial wipe)",
        MemoryCoordination,
        "wipe",
        _keep_reservations_on_wipe,
    ),
    JobMutation(
        "clean-winners-staging",
        "CleanupStage removes any staging, the committed attempt's included",
        guards,
        "cleanup_eligible",
        lambda job, row, stage, worker_up: guards.stage_present(row, stage),
    ),
    JobMutation(
        "accept-failure-after-cancel",
        "AcceptFailure commits a failure of any pending attempt (after a cancel, or stale)",
        guards,
        "failure_eligible",
        lambda job, row: row.pending in (Outcome.RETRYABLE, Outcome.PERMANENT),
    ),
    JobMutation(
        "report-progress-after-cancel",
        "ReportProgress publishes progress without the mirrored authority / cancel check",
        guards,
        "can_report_progress",
        _report_after_cancel,
    ),
    JobMutation(
        "expire-fresh-lease",
        "ExpireLease expires a live lease before it aged out",
        guards,
        "can_expire_lease",
        _expire_fresh_lease,
    ),
    JobMutation(
        "reserve-beyond-capacity",
        "Reserve ignores the local and global capacity limits",
        guards,
        "can_reserve",
        _reserve_beyond_capacity,
    ),
    JobMutation(
        "authorize-without-reservation",
        "AuthorizeAttempt allocates a token without the worker holding the reservation",
        guards,
        "authorize",
        lambda job, attempts, worker, rid, *, reserved, worker_up, owner_stopped: _real[
            "authorize"
        ](
            job,
            attempts,
            worker,
            rid,
            reserved=True,
            worker_up=worker_up,
            owner_stopped=owner_stopped,
        ),
    ),
    JobMutation(
        "checkpoint-without-authority",
        "PersistCheckpoint accepts a checkpoint from an attempt that lost its authority",
        guards,
        "persist_checkpoint",
        _unguarded("persist_checkpoint", "current authority", "not Running"),
    ),
    JobMutation(
        "retry-running-job",
        "ScheduleRetry re-queues a job whatever its phase",
        guards,
        "schedule_retry",
        _unguarded("schedule_retry", "not RetryWait"),
    ),
    JobMutation(
        "release-running-lease",
        "ReleaseLease releases the lease of an attempt still running with authority",
        guards,
        "lease_releasable",
        _true,
    ),
    JobMutation(
        "skip-credential-cleanup",
        "the reconciler never finishes abandoned credential intents (secrets stay live)",
        Reconciler,
        "clean_credentials",
        _skip_credential_cleanup,
    ),
    JobMutation(
        "never-declare-down",
        "the reconciler never declares an incarnation down whose heartbeat expired (a "
        "SIGKILLed worker's staging stays, its checkpoint is not resumed)",
        Reconciler,
        "declare_down",
        _never_declare_down,
    ),
)
BY_NAME = {m.name: m for m in MUTATIONS}


def mutation(name: str) -> JobMutation:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownMutation(
            f"unknown job mutation {name!r} (known: {', '.join(sorted(BY_NAME))})"
        ) from None


@contextmanager
def applied(name: str | None) -> Iterator[None]:
    """Plant mutation ``name`` (None: nothing) for the duration of the block."""
    if name is None:
        yield
        return
    m = mutation(name)
    saved = m.target.__dict__[m.attribute]
    setattr(m.target, m.attribute, m.replacement)
    try:
        yield
    finally:
        setattr(m.target, m.attribute, saved)


__all__ = [
    "BY_NAME",
    "MUTATIONS",
    "JobMutation",
    "UnknownMutation",
    "applied",
    "mutation",
    "unguarded",
]
