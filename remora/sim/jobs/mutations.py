"""Named mutations of the job runtime: planted bugs the job machine must kill.

Each mutation replaces one guard (a method of :class:`~remora.jobs.guards.Guards`), one
memory-coordination operation or one reconciler duty — in the *parts* the simulation builds
its runtime from (:class:`~remora.sim.jobs.simulation.Parts`): a :class:`Guards` subclass
the stores, the workers and the reconciler are given, a :class:`MemoryCoordination` or
:class:`Reconciler` subclass the simulation instantiates.  Nothing global is patched and no
production code learns it runs a mutant: the runtime is generic over those parts, the spec's
by default.  A job trace run against a mutation records its name (``config.mutation``), so
replaying or reducing it runs the same planted bug.  The campaign (``python -m
tests.jobs.job_campaign``) must kill every one under the ``ci`` profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from remora.errors import InvalidInput
from remora.jobs.coordination import MemoryCoordination, _Data
from remora.jobs.guards import Guards, age, stage_present
from remora.jobs.model import Outcome
from remora.jobs.reconciler import Reconciler
from remora.sim.jobs.simulation import SPEC_PARTS, Parts

Method = Callable[..., Any]
"""A replacement method: its first parameter is the instance (``self``)."""


class UnknownMutation(InvalidInput):
    """A trace or a command names a mutation this build does not have."""


def subclass(base: type[Any], methods: Mapping[str, Method], name: str) -> type[Any]:
    """``base`` with ``methods`` replaced (a class of its own: ``base`` is untouched)."""
    for attr in methods:
        if not callable(getattr(base, attr, None)):
            raise ValueError(f"{base.__name__} has no method {attr!r} to replace")
    return type(f"{base.__name__}[{name}]", (base,), dict(methods))


def planted_guards(name: str = "planted", **methods: Method) -> Guards:
    """The spec's guards with ``methods`` replaced (each takes the guards as ``self``)."""
    guards: Guards = subclass(Guards, methods, name)()
    return guards


@attrs.frozen
class JobMutation:
    name: str
    description: str
    #: Replaced methods of :class:`Guards`, :class:`Reconciler` and
    #: :class:`MemoryCoordination` (each takes the instance as ``self``).
    guards: Mapping[str, Method] = attrs.field(factory=dict)
    reconciler: Mapping[str, Method] = attrs.field(factory=dict)
    coordination: Mapping[str, Method] = attrs.field(factory=dict)

    def parts(self) -> Parts:
        """What the simulation builds its runtime from, with this bug planted."""
        return Parts(
            guards=planted_guards(self.name, **self.guards) if self.guards else SPEC_PARTS.guards,
            reconciler=subclass(Reconciler, self.reconciler, self.name)
            if self.reconciler
            else Reconciler,
            coordination=subclass(MemoryCoordination, self.coordination, self.name)
            if self.coordination
            else MemoryCoordination,
        )


class _Lenient(Guards):
    """Guards whose ``need`` ignores the conditions mentioning one of ``skip``."""

    def __init__(self, skip: tuple[str, ...]) -> None:
        self.skip = skip

    def need(self, cond: bool, why: str) -> None:
        if not any(s in why for s in self.skip):
            super().need(cond, why)


def unguarded(name: str, *skip: str) -> Method:
    """``Guards.<name>`` with the conditions whose reason mentions one of ``skip`` ignored —
    the one way a guard is planted with a hole (here and in ``tests/jobs/test_planted.py``)."""
    method = getattr(Guards, name)
    lenient = _Lenient(skip)

    def mutant(self: Guards, *args: Any, **kwargs: Any) -> Any:
        return method(lenient, *args, **kwargs)

    return mutant


def _true(self: Guards, *args: Any, **kwargs: Any) -> bool:
    return True


def _activate_without_authority(self: Guards, c: Any, a: Any, worker: str, rid: str) -> bool:
    r = c.reservations.get(a.job)
    return r is not None and r.worker == worker and r.rid == rid


def _renew_after_authority_lost(
    self: Guards, c: Any, a: Any, worker: str, tick_ms: int, limit: int
) -> bool:
    lease = c.leases.get(a)
    return (
        lease is not None
        and lease.live
        and lease.worker == worker
        and age(c.now_ms, lease.at_ms, tick_ms, limit) > 0
    )


def _report_after_cancel(self: Guards, c: Any, a: Any, progress: int) -> bool:
    lease = c.leases.get(a)
    current = c.progress.get(a.job)
    return (
        lease is not None
        and lease.live
        and (current is None or current.attempt != a or current.progress != progress)
    )


def _reap_live_lease(
    self: Guards, job: Any, attempts: Any, token: int, *, lease_live: bool, reserved: bool
) -> Any:
    return Guards.reap(self, job, attempts, token, lease_live=False, reserved=reserved)


def _expire_fresh_lease(self: Guards, c: Any, a: Any, tick_ms: int, limit: int) -> bool:
    lease = c.leases.get(a)
    return lease is not None and lease.live


def _reserve_beyond_capacity(self: Guards, c: Any, job: str, *args: Any) -> bool:
    return job in c.queued and job not in c.reservations


def _authorize_without_reservation(
    self: Guards,
    job: Any,
    attempts: Any,
    worker: str,
    rid: str,
    *,
    reserved: bool,
    worker_up: bool,
    owner_stopped: bool,
) -> Any:
    return Guards.authorize(
        self,
        job,
        attempts,
        worker,
        rid,
        reserved=True,
        worker_up=worker_up,
        owner_stopped=owner_stopped,
    )


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
        guards={"commit_eligible": lambda g, job, row, stage: row.pending is Outcome.SUCCESS},
    ),
    JobMutation(
        "activate-without-authority-check",
        "ActivateAttempt compares the reservation id but not the mirrored authority / cancel",
        guards={"can_activate": _activate_without_authority},
    ),
    JobMutation(
        "reap-before-lease-expiry",
        "ReapLostAttempt revokes an attempt whose lease is still live",
        guards={"reap": _reap_live_lease},
    ),
    JobMutation(
        "renew-after-losing-authority",
        "RenewLease renews without the mirrored authority (after a reap, a cancel, a retry)",
        guards={"can_renew": _renew_after_authority_lost},
    ),
    JobMutation(
        "keep-reservation-after-wipe",
        "LoseCoordinationState keeps the reservations (a partial wipe)",
        coordination={"wipe": _keep_reservations_on_wipe},
    ),
    JobMutation(
        "clean-winners-staging",
        "CleanupStage removes any staging, the committed attempt's included",
        guards={
            "cleanup_eligible": lambda g, job, row, stage, worker_up: stage_present(row, stage)
        },
    ),
    JobMutation(
        "accept-failure-after-cancel",
        "AcceptFailure commits a failure of any pending attempt (after a cancel, or stale)",
        guards={
            "failure_eligible": lambda g, job, row: (
                row.pending in (Outcome.RETRYABLE, Outcome.PERMANENT)
            )
        },
    ),
    JobMutation(
        "report-progress-after-cancel",
        "ReportProgress publishes progress without the mirrored authority / cancel check",
        guards={"can_report_progress": _report_after_cancel},
    ),
    JobMutation(
        "expire-fresh-lease",
        "ExpireLease expires a live lease before it aged out",
        guards={"can_expire_lease": _expire_fresh_lease},
    ),
    JobMutation(
        "reserve-beyond-capacity",
        "Reserve ignores the local and global capacity limits",
        guards={"can_reserve": _reserve_beyond_capacity},
    ),
    JobMutation(
        "authorize-without-reservation",
        "AuthorizeAttempt allocates a token without the worker holding the reservation",
        guards={"authorize": _authorize_without_reservation},
    ),
    JobMutation(
        "checkpoint-without-authority",
        "PersistCheckpoint accepts a checkpoint from an attempt that lost its authority",
        guards={
            "persist_checkpoint": unguarded(
                "persist_checkpoint", "current authority", "not Running"
            )
        },
    ),
    JobMutation(
        "retry-running-job",
        "ScheduleRetry re-queues a job whatever its phase",
        guards={"schedule_retry": unguarded("schedule_retry", "not RetryWait")},
    ),
    JobMutation(
        "release-running-lease",
        "ReleaseLease releases the lease of an attempt still running with authority",
        guards={"lease_releasable": _true},
    ),
    JobMutation(
        "skip-credential-cleanup",
        "the reconciler never finishes abandoned credential intents (secrets stay live)",
        reconciler={"clean_credentials": _skip_credential_cleanup},
    ),
    JobMutation(
        "never-declare-down",
        "the reconciler never declares an incarnation down whose heartbeat expired (a "
        "SIGKILLed worker's staging stays, its checkpoint is not resumed)",
        reconciler={"declare_down": _never_declare_down},
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


def parts(name: str | None) -> Parts:
    """The parts a simulation with mutation ``name`` planted builds its runtime from (None:
    the spec's)."""
    return SPEC_PARTS if name is None else mutation(name).parts()


__all__ = [
    "BY_NAME",
    "MUTATIONS",
    "JobMutation",
    "UnknownMutation",
    "mutation",
    "parts",
    "planted_guards",
    "subclass",
    "unguarded",
]
