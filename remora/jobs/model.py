"""Value objects of the job runtime, named after ``Remora.tla``.

Durable rows (:class:`JobRow`, :class:`AttemptRow`, :class:`WorkerRow`,
:class:`CredentialRow`) are what the durable store holds; :class:`CoordSnapshot` is what the
coordination store holds; :class:`StageInfo` what the target holds for one attempt.  All of
them are frozen: a transition builds new rows (see :mod:`remora.jobs.guards`).
"""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs

from remora.errors import JobError, NotEnabled, UnknownJob

DEFAULT_QUEUE = "default"
"""The queue of a job submitted without ``--queue``, and of a worker without ``--queue``."""


MAX_PRIORITY = 1_000_000
"""A job's priority is an integer from ``-MAX_PRIORITY`` to ``MAX_PRIORITY``."""


class Phase(enum.Enum):
    QUEUED = "Queued"
    RUNNING = "Running"
    RETRY_WAIT = "RetryWait"
    CANCELLING = "Cancelling"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})


class Outcome(enum.Enum):
    """A handler's outcome request (``OutcomeRequests`` less ``NoOutcome``)."""

    SUCCESS = "WantsSuccess"
    RETRYABLE = "WantsRetryableFailure"
    PERMANENT = "WantsPermanentFailure"


class Service(enum.Enum):
    COORDINATION = "Coordination"
    DURABLE = "Durable"
    TARGET = "Target"


class Stop(enum.Enum):
    """Why an attempt row is durably marked (``AttemptRow.stop``)."""

    NONE = ""
    FAILED = "failed"  # AcceptFailure: the attempt is stopped
    REVOKED = "revoked"  # ReapLostAttempt / FinalizeCancel: stopped if never activated


class CredentialState(enum.Enum):
    UNUSED = "CredentialIntentUnused"
    PREPARED = "CredentialIntentPrepared"
    WRITING = "CredentialIntentWriting"
    WRITTEN = "CredentialIntentWritten"
    COMMITTED = "CredentialIntentCommitted"
    ABANDONING = "CredentialIntentAbandoning"
    ABANDONED = "CredentialIntentAbandoned"


class SecretState(enum.Enum):
    ABSENT = "VaultSecretAbsent"
    LIVE = "VaultSecretLive"
    DESTROYED = "VaultSecretDestroyed"


@attrs.frozen(order=True)
class AttemptId:
    """``[job |-> j, token |-> t]``: an attempt's identity and its fencing token."""

    job: str
    token: int

    def __str__(self) -> str:
        return f"{self.job}#{self.token}"

    @classmethod
    def parse(cls, text: str) -> AttemptId:
        job, _, token = text.rpartition("#")
        if not job or not token.isdigit():
            raise ValueError(f"not an attempt id: {text!r}")
        return cls(job, int(token))


@attrs.frozen(order=True)
class IntentId:
    """``[job |-> j, sequence |-> q]``: a credential intent."""

    job: str
    sequence: int

    def __str__(self) -> str:
        return f"{self.job}/{self.sequence}"


@attrs.frozen
class JobsConfig:
    """Deployment-wide limits: the spec's constants as the runtime sees them.

    Ages are counted in ticks of ``tick_ms``: a lease (reservation) whose last renewal is
    ``lease_ticks`` (``reservation_ticks``) ticks old may be expired by the reaper.
    """

    max_attempts: int = 3
    max_progress: int = 100
    tick_ms: int = 1000
    lease_ticks: int = 10
    reservation_ticks: int = 10
    global_limit: int = 64
    max_credential_intents: int = 4
    #: An incarnation whose heartbeat is this many ticks old may be declared down
    #: (``CrashWorker``); 0: three lease periods (``3 * lease_ticks``).
    down_after_ticks: int = 0

    def __attrs_post_init__(self) -> None:
        for name in ("max_attempts", "max_progress", "tick_ms", "lease_ticks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.reservation_ticks < 1 or self.global_limit < 1:
            raise ValueError("reservation_ticks and global_limit must be at least 1")
        if self.down_after_ticks < 0:
            raise ValueError("down_after_ticks must not be negative")

    @property
    def down_after_s(self) -> float:
        """Seconds without a heartbeat after which an incarnation may be declared down."""
        ticks = self.down_after_ticks or 3 * self.lease_ticks
        return ticks * self.tick_ms / 1000

    def to_json(self) -> dict[str, int]:
        return attrs.asdict(self)


@attrs.frozen
class JobRow:
    """One job's durable authority (``durableVars`` restricted to the job)."""

    id: str
    seq: int
    handler: str
    payload: str
    max_attempts: int
    max_progress: int
    phase: Phase = Phase.QUEUED
    cancel_requested: bool = False
    current_token: int = 0
    authority: int = 0  # token of the authority attempt, 0 = NoAttempt
    dispatch_needed: bool = True
    committed: int = 0  # token of the committed attempt, 0 = NoAttempt
    checkpoint: int = 0
    checkpoint_owner: int = 0
    checkpoint_valid: bool = False
    version: int = 0
    error: str = ""
    #: The named queue the job waits in (``submit --queue``; workers serve queues).
    queue: str = DEFAULT_QUEUE
    #: Higher first among the queued jobs of a queue (``submit --priority``).
    priority: int = 0
    #: Not enqueued before this time on the durable store's clock (``submit --at/--in``);
    #: 0: no delay.
    due: float = 0.0
    # Times on the durable store's clock (seconds; PostgreSQL's ``clock_timestamp()``,
    # otherwise the injected clock), stamped by the transaction protocol
    # (:func:`remora.jobs.sql.stamp`); 0: not yet.
    submitted_at: float = 0.0
    #: The first ``AuthorizeAttempt``.
    started_at: float = 0.0
    #: The transition that made the job terminal.
    finished_at: float = 0.0
    #: When the job last became ``Queued`` (submitted, or a retry scheduled).
    queued_at: float = 0.0
    #: Seconds an attempt of this job may run before it ends as a retryable failure
    #: (``jobs submit --timeout``; the handler's own timeout too, the smaller wins); 0: none.
    #: Fixed at submit.
    timeout: float = 0.0

    def attempt(self, token: int) -> AttemptId:
        return AttemptId(self.id, token)

    def current_authority(self, token: int) -> bool:
        """``CurrentAuthority(a)`` for the attempt of this job with ``token``."""
        return token > 0 and self.authority == token and self.current_token == token


@attrs.frozen
class AttemptRow:
    """The durable facts of one attempt."""

    job: str
    token: int
    worker: str
    reservation: str
    initial_progress: int = 0
    resumed: bool = False
    adopted_from: int = 0  # the predecessor whose staging this attempt took over
    transferred: bool = False  # this attempt's staging was taken over by a successor
    stop: Stop = Stop.NONE
    stopped: bool = False  # the worker stopped it (CooperativeStop / gave it up), recorded
    committed: bool = False
    pending: Outcome | None = None  # pendingOutcome: the request in flight
    #: Its ``AuthorizeAttempt``, on the durable store's clock (seconds; 0: unknown).
    authorized_at: float = 0.0

    @property
    def id(self) -> AttemptId:
        return AttemptId(self.job, self.token)


@attrs.frozen
class WorkerRow:
    """A worker incarnation: ids are never reused."""

    id: str
    up: bool = True


@attrs.frozen
class CredentialRow:
    job: str
    sequence: int
    state: CredentialState = CredentialState.PREPARED
    durable: bool = False
    token: int = 0  # the attempt that prepared it (0: not from an attempt)

    @property
    def id(self) -> IntentId:
        return IntentId(self.job, self.sequence)


@attrs.frozen
class LogEntry:
    """One durable transition (``remora_jobs_log``): per job, in commit order."""

    key: str  # the job id, or "worker:<id>" for incarnation events
    version: int
    action: str
    params: dict[str, Any]
    actor: str
    actor_seq: int
    #: When it committed, on the durable store's clock (0: unknown, an older row).
    at: float = 0.0
    #: What the step observed beside the spec's parameters (an attempt's error, how long
    #: it had run; :attr:`remora.jobs.guards.Change.facts`).
    facts: dict[str, Any] = attrs.field(factory=dict)
    #: The recorded result (e.g. the token an ``AuthorizeAttempt`` allocated).
    result: str = ""


@attrs.frozen
class DurableSnapshot:
    jobs: tuple[JobRow, ...]
    attempts: tuple[AttemptRow, ...]
    workers: tuple[WorkerRow, ...]
    credentials: tuple[CredentialRow, ...]


# -- coordination ------------------------------------------------------------------------


@attrs.frozen
class Reservation:
    worker: str
    rid: str  # unique per Reserve call: Activate compares it, so a stale attempt cannot
    at_ms: int  # use a later reservation of the same worker


@attrs.frozen
class Lease:
    worker: str
    at_ms: int  # last activation/renewal
    live: bool


@attrs.frozen
class LiveProgress:
    attempt: AttemptId
    progress: int


@attrs.frozen
class CoordEntry:
    """One coordination transition (the coordination log, in the store's order)."""

    order: str  # the store's position (a Redis stream id, or a counter for memory)
    action: str
    params: dict[str, Any]
    actor: str
    actor_seq: int


@attrs.frozen
class CoordSnapshot:
    queued: frozenset[str]
    reservations: dict[str, Reservation]
    leases: dict[AttemptId, Lease]
    notices: frozenset[str]
    progress: dict[str, LiveProgress]
    floors: dict[str, int]  # mirror: tokens <= floor are revoked (raised before durable)
    cancels: frozenset[str]  # mirror: cancel requested (set before durable)
    now_ms: int
    #: mirror: incarnations declared down (marked before the durable declaration commits)
    down: frozenset[str] = frozenset()


# -- target ------------------------------------------------------------------------------


@attrs.frozen
class StageInfo:
    """What the target holds for one attempt identity."""

    progress: int
    cleaned: bool


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


__all__ = [
    "DEFAULT_QUEUE",
    "MAX_PRIORITY",
    "TERMINAL",
    "AttemptId",
    "AttemptRow",
    "CoordEntry",
    "CoordSnapshot",
    "CredentialRow",
    "CredentialState",
    "DurableSnapshot",
    "IntentId",
    "JobError",
    "JobRow",
    "JobsConfig",
    "Lease",
    "LiveProgress",
    "LogEntry",
    "NotEnabled",
    "Outcome",
    "Phase",
    "Reservation",
    "SecretState",
    "Service",
    "StageInfo",
    "Stop",
    "UnknownJob",
    "WorkerRow",
    "dumps",
]
