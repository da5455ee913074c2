"""The job protocol's action vocabulary, spec-free: one :class:`Action` per spec action of
``Remora.tla`` the runtime performs or records, with its parameter signature
(:data:`PARAMS`: the names a :class:`~remora.jobs.io.StepRecord` carries and what each
names).

The runtime imports nothing of the spec port (:mod:`remora.protocol`); this enum is the one
place its action names are spelled.  ``Action`` is a ``str`` enum, so a record's action is
still the spec's name on the wire (JSON lines, the Lua scripts' log entries, the durable
transition log).  ``tests/jobs/test_action_vocabulary.py`` holds it to the spec port's
table and the Lua scripts' names to it.
"""

from __future__ import annotations

import enum

Kind = str
"""What a parameter names: ``job``, ``worker``, ``attempt`` (``job#token``), ``intent``
(``job/sequence``), ``service``, ``outcome`` or ``int``."""


class Action(enum.StrEnum):
    """A spec action, spelled as in ``Remora.tla``."""

    ENQUEUE = "Enqueue"
    RESERVE = "Reserve"
    AUTHORIZE_ATTEMPT = "AuthorizeAttempt"
    ACTIVATE_ATTEMPT = "ActivateAttempt"
    RENEW_LEASE = "RenewLease"
    TICK = "Tick"
    EXPIRE_LEASE = "ExpireLease"
    EXPIRE_RESERVATION = "ExpireReservation"
    LOSE_COORDINATION_STATE = "LoseCoordinationState"
    DROP_LINK = "DropLink"
    RESTORE_LINK = "RestoreLink"
    CRASH_WORKER = "CrashWorker"
    START_INCARNATION = "StartIncarnation"
    RELEASE_RESERVATION = "ReleaseReservation"
    REAP_LOST_ATTEMPT = "ReapLostAttempt"
    SCHEDULE_RETRY = "ScheduleRetry"
    REQUEST_CANCEL = "RequestCancel"
    FINALIZE_CANCEL = "FinalizeCancel"
    PUBLISH_CANCEL_NOTICE = "PublishCancelNotice"
    COOPERATIVE_STOP = "CooperativeStop"
    RELEASE_LEASE = "ReleaseLease"
    CLEAR_STALE_LIVE_PROGRESS = "ClearStaleLiveProgress"
    CLEAN_TERMINAL_COORDINATION = "CleanTerminalCoordination"
    ADVANCE_ATTEMPT = "AdvanceAttempt"
    PERSIST_CHECKPOINT = "PersistCheckpoint"
    INVALIDATE_CHECKPOINT = "InvalidateCheckpoint"
    REPORT_PROGRESS = "ReportProgress"
    SEND_OUTCOME = "SendOutcome"
    ACCEPT_SUCCESS = "AcceptSuccess"
    ACCEPT_PERMANENT_FAILURE = "AcceptPermanentFailure"
    ACCEPT_RETRYABLE_FAILURE_WITH_BUDGET = "AcceptRetryableFailureWithBudget"
    ACCEPT_RETRYABLE_FAILURE_EXHAUSTED = "AcceptRetryableFailureExhausted"
    REJECT_OUTCOME = "RejectOutcome"
    CLEANUP_STAGE = "CleanupStage"
    PREPARE_CREDENTIAL_INTENT = "PrepareCredentialIntent"
    BEGIN_CREDENTIAL_WRITE = "BeginCredentialWrite"
    COMPLETE_CREDENTIAL_WRITE = "CompleteCredentialWrite"
    RECORD_CREDENTIAL_WRITE = "RecordCredentialWrite"
    FENCE_FAILED_CREDENTIAL_WRITE = "FenceFailedCredentialWrite"
    COMMIT_CREDENTIAL_VERSION = "CommitCredentialVersion"
    CLAIM_CREDENTIAL_CLEANUP = "ClaimCredentialCleanup"
    DESTROY_CLAIMED_CREDENTIAL_SECRET = "DestroyClaimedCredentialSecret"
    ABANDON_FENCED_CREDENTIAL_INTENT = "AbandonFencedCredentialIntent"


PARAMS: dict[Action, tuple[tuple[str, Kind], ...]] = {
    Action.ENQUEUE: (("j", "job"),),
    Action.RESERVE: (("j", "job"), ("w", "worker")),
    Action.AUTHORIZE_ATTEMPT: (("j", "job"), ("w", "worker")),
    Action.ACTIVATE_ATTEMPT: (("a", "attempt"),),
    Action.RENEW_LEASE: (("a", "attempt"),),
    Action.TICK: (),
    Action.EXPIRE_LEASE: (("a", "attempt"),),
    Action.EXPIRE_RESERVATION: (("j", "job"),),
    Action.LOSE_COORDINATION_STATE: (),
    Action.DROP_LINK: (("w", "worker"), ("service", "service")),
    Action.RESTORE_LINK: (("w", "worker"), ("service", "service")),
    Action.CRASH_WORKER: (("w", "worker"),),
    Action.START_INCARNATION: (("w", "worker"),),
    Action.RELEASE_RESERVATION: (("j", "job"),),
    Action.REAP_LOST_ATTEMPT: (("a", "attempt"),),
    Action.SCHEDULE_RETRY: (("j", "job"),),
    Action.REQUEST_CANCEL: (("j", "job"),),
    Action.FINALIZE_CANCEL: (("j", "job"),),
    Action.PUBLISH_CANCEL_NOTICE: (("j", "job"),),
    Action.COOPERATIVE_STOP: (("a", "attempt"),),
    Action.RELEASE_LEASE: (("a", "attempt"),),
    Action.CLEAR_STALE_LIVE_PROGRESS: (("j", "job"),),
    Action.CLEAN_TERMINAL_COORDINATION: (("j", "job"),),
    Action.ADVANCE_ATTEMPT: (("a", "attempt"), ("amount", "int")),
    Action.PERSIST_CHECKPOINT: (("a", "attempt"),),
    Action.INVALIDATE_CHECKPOINT: (("j", "job"),),
    Action.REPORT_PROGRESS: (("a", "attempt"),),
    Action.SEND_OUTCOME: (("a", "attempt"), ("outcome", "outcome")),
    Action.ACCEPT_SUCCESS: (("a", "attempt"),),
    Action.ACCEPT_PERMANENT_FAILURE: (("a", "attempt"),),
    Action.ACCEPT_RETRYABLE_FAILURE_WITH_BUDGET: (("a", "attempt"),),
    Action.ACCEPT_RETRYABLE_FAILURE_EXHAUSTED: (("a", "attempt"),),
    Action.REJECT_OUTCOME: (("a", "attempt"),),
    Action.CLEANUP_STAGE: (("a", "attempt"),),
    Action.PREPARE_CREDENTIAL_INTENT: (("c", "intent"),),
    Action.BEGIN_CREDENTIAL_WRITE: (("c", "intent"),),
    Action.COMPLETE_CREDENTIAL_WRITE: (("c", "intent"),),
    Action.RECORD_CREDENTIAL_WRITE: (("c", "intent"),),
    Action.FENCE_FAILED_CREDENTIAL_WRITE: (("c", "intent"),),
    Action.COMMIT_CREDENTIAL_VERSION: (("c", "intent"),),
    Action.CLAIM_CREDENTIAL_CLEANUP: (("c", "intent"),),
    Action.DESTROY_CLAIMED_CREDENTIAL_SECRET: (("c", "intent"),),
    Action.ABANDON_FENCED_CREDENTIAL_INTENT: (("c", "intent"),),
}
"""Each action's parameters, in the spec's order: ``(record key, kind)``."""


__all__ = ["PARAMS", "Action", "Kind"]
