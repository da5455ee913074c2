"""The planted spec mutations: each breaks ``Remora.tla``'s port in one place (a dropped
guard or a wrong update), as a subclass of :class:`Remora` overriding one action —
production code has no mutation switch.  :data:`CASES` pairs each with the invariant or
action property the explorer must report; :class:`NoCleanup` deadlocks.
"""

from __future__ import annotations

from typing import Any

from remora.protocol.spec import (
    AttemptCommitted,
    AttemptStopped,
    Failed,
    LeaseLive,
    NoAttempt,
    Remora,
    RetryWait,
    Running,
    StageComplete,
    State,
    TerminalPhases,
    VaultSecretLive,
    WantsRetryableFailure,
    WantsSuccess,
    _ex,
)


def _patch(s: State, **changes: Any) -> State:
    return s._replace(**changes)


# -- invariants -----------------------------------------------------------------------------------


class TickPastLeaseLimit(Remora):
    """Wrong update: Tick ages live leases without the ``< LeaseLimit`` cap."""

    def Tick(self, s: State) -> State | None:
        t = super().Tick(s)
        if t is None and not any(x == LeaseLive for x in s.leaseState):
            return None
        return _patch(
            t or s,
            leaseAge=tuple(
                s.leaseAge[a] + 1 if s.leaseState[a] == LeaseLive else s.leaseAge[a]
                for a in self.AttemptIds
            ),
        )


class CompleteWriteMarksDurable(Remora):
    def CompleteCredentialWrite(self, s: State, c: int) -> State | None:
        t = super().CompleteCredentialWrite(s, c)
        return (
            None
            if t is None
            else _patch(t, credentialVersionDurable=_ex(t.credentialVersionDurable, c, True))
        )


class DestroyLeavesSecretLive(Remora):
    def DestroyClaimedCredentialSecret(self, s: State, c: int) -> State | None:
        t = super().DestroyClaimedCredentialSecret(s, c)
        return (
            None
            if t is None
            else _patch(t, vaultSecretState=_ex(t.vaultSecretState, c, VaultSecretLive))
        )


class CancelForgetsRequest(Remora):
    def RequestCancel(self, s: State, j: int) -> State | None:
        t = super().RequestCancel(s, j)
        return None if t is None else _patch(t, cancelRequested=s.cancelRequested)


class AuthorizeLeavesAttemptUnused(Remora):
    def AuthorizeAttempt(self, s: State, j: int, w: int) -> State | None:
        t = super().AuthorizeAttempt(s, j, w)
        return (
            None
            if t is None
            else _patch(t, attemptState=s.attemptState, attemptWorker=s.attemptWorker)
        )


class ActivateOverstatesProgress(Remora):
    def ActivateAttempt(self, s: State, a: int) -> State | None:
        t = super().ActivateAttempt(s, a)
        j = self.JobOf(a)
        return (
            None
            if t is None
            else _patch(t, liveProgress=_ex(t.liveProgress, j, s.attemptProgress[a] + 1))
        )


class ActivateKeepsStaleProgressOwner(Remora):
    def ActivateAttempt(self, s: State, a: int) -> State | None:
        t = super().ActivateAttempt(s, a)
        return None if t is None else _patch(t, liveProgressAttempt=s.liveProgressAttempt)


class CapacityIgnoresLiveLeases(Remora):
    """Wrong helper: ``CapacityAvailable`` forgets ``Cardinality(LiveLeases)``."""

    def CapacityAvailable(self, s: State, w: int) -> bool:
        return (
            len(self.ReservedJobs(s)) < self.GlobalLimit
            and len(self.ReservedFor(s, w)) + len(self.ExecutingFor(s, w)) < self.LocalLimit
        )


class StopMarksCommitted(Remora):
    def CooperativeStop(self, s: State, a: int) -> State | None:
        t = super().CooperativeStop(s, a)
        if t is None:
            return None
        return _patch(t, attemptState=_ex(t.attemptState, a, AttemptCommitted))


class SuccessStopsInsteadOfCommitting(Remora):
    def AcceptSuccess(self, s: State, a: int) -> State | None:
        t = super().AcceptSuccess(s, a)
        if t is None:
            return None
        return _patch(t, attemptState=_ex(t.attemptState, a, AttemptStopped))


class SuccessIgnoresCancel(Remora):
    """Dropped guard ``~cancelRequested[j]`` of CommitEligible (and ``phase = Running``)."""

    def CommitEligible(self, s: State, a: int) -> bool:
        j = self.JobOf(a)
        if s.cancelRequested[j] and s.phase[j] not in TerminalPhases:
            hidden = _patch(
                s,
                cancelRequested=_ex(s.cancelRequested, j, False),
                phase=_ex(s.phase, j, Running),
            )
            return super().CommitEligible(hidden, a)
        return super().CommitEligible(s, a)


class ReserveIgnoresCapacity(Remora):
    def CapacityAvailable(self, s: State, w: int) -> bool:
        return True


class ResumeNotRecorded(Remora):
    def AuthorizeAttempt(self, s: State, j: int, w: int) -> State | None:
        t = super().AuthorizeAttempt(s, j, w)
        if t is None:
            return None
        a = t.authority[j]
        return _patch(t, resumedFromCheckpoint=_ex(t.resumedFromCheckpoint, a, False))


class InvalidateKeepsOwner(Remora):
    def InvalidateCheckpoint(self, s: State, j: int) -> State | None:
        t = super().InvalidateCheckpoint(s, j)
        return None if t is None else _patch(t, checkpointStageOwner=s.checkpointStageOwner)


class CleanupIgnoresAuthority(Remora):
    """Dropped guard ``~CurrentAuthority(a)`` of CleanupStage."""

    def CleanupStage(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        if not self.CurrentAuthority(s, a):
            return super().CleanupStage(s, a)
        hidden = _patch(s, authority=_ex(s.authority, j, NoAttempt))
        t = super().CleanupStage(hidden, a)
        return None if t is None else _patch(t, authority=s.authority)


# -- action properties ----------------------------------------------------------------------------


class RetryFromFailed(Remora):
    def ScheduleRetry(self, s: State, j: int) -> State | None:
        if s.phase[j] == Failed:
            return super().ScheduleRetry(_patch(s, phase=_ex(s.phase, j, RetryWait)), j)
        return super().ScheduleRetry(s, j)


class RetryRewindsToken(Remora):
    def ScheduleRetry(self, s: State, j: int) -> State | None:
        t = super().ScheduleRetry(s, j)
        return (
            None
            if t is None
            else _patch(t, currentToken=_ex(t.currentToken, j, t.currentToken[j] - 1))
        )


class StaleAttemptMayCommit(Remora):
    """Dropped guard ``CurrentAuthority(a)`` of CommitEligible."""

    def CommitEligible(self, s: State, a: int) -> bool:
        j = self.JobOf(a)
        return (
            s.pendingOutcome[a] == WantsSuccess
            and s.phase[j] == Running
            and not s.cancelRequested[j]
            and s.stageState[a] == StageComplete
        )


class RetryableAlwaysRetries(Remora):
    def AcceptFailure(self, s: State, a: int, outcome: int) -> State | None:
        t = super().AcceptFailure(s, a, outcome)
        if t is None or outcome != WantsRetryableFailure:
            return t
        j = self.JobOf(a)
        return _patch(t, phase=_ex(t.phase, j, RetryWait))


Case = tuple[str, type[Remora], str, dict[str, Any], tuple[str, ...] | None]

CASES: list[Case] = [
    ("TypeOK", TickPastLeaseLimit, "tiny", {}, None),
    ("CredentialLifecycleWellFormed", CompleteWriteMarksDurable, "credentials", {}, None),
    # NoOrphanSecrets is implied by CredentialLifecycleWellFormed (every intent state pins
    # the vault state), so it is checked alone here to show that it catches the orphan too.
    ("NoOrphanSecrets", DestroyLeavesSecretLive, "credentials", {}, ("NoOrphanSecrets",)),
    ("StateConsistency", CancelForgetsRequest, "tiny", {}, None),
    ("AllocatedTokensUsed", AuthorizeLeavesAttemptUnused, "tiny", {}, None),
    ("LiveProgressWellFormed", ActivateOverstatesProgress, "tiny", {}, None),
    ("LiveProgressCompatibleWithLiveLease", ActivateKeepsStaleProgressOwner, "retry", {}, None),
    # The reservation made beside a live lease breaks PermitSafety first, and the second live
    # lease comes with ActivateAttempt overwriting the live-progress owner (so
    # LiveProgressCompatibleWithLiveLease fires in the same state): AtMostOneLiveLeasePerJob
    # is checked alone to show that it catches the second lease.
    (
        "AtMostOneLiveLeasePerJob",
        CapacityIgnoresLiveLeases,
        "retry",
        {},
        ("AtMostOneLiveLeasePerJob",),
    ),
    ("AuthorityWellFormed", StopMarksCommitted, "tiny", {}, None),
    ("CommittedResultConsistent", SuccessStopsInsteadOfCommitting, "tiny", {}, None),
    # CancellationSafety is implied by StateConsistency (committed <=> Succeeded, Succeeded
    # => ~cancelRequested) and CommitIsFencedCAS catches the step itself, so it is checked
    # alone to show that it catches the commit too.
    ("CancellationSafety", SuccessIgnoresCancel, "tiny", {}, ("CancellationSafety",)),
    ("PermitSafety", ReserveIgnoresCapacity, "two-jobs", {}, None),
    ("ResumeValidity", ResumeNotRecorded, "retry", {}, None),
    ("CheckpointStagingOwnership", InvalidateKeepsOwner, "tiny", {}, None),
    ("StagingOwnership", CleanupIgnoresAuthority, "tiny", {}, None),
    ("TerminalStateIsImmutable", RetryFromFailed, "tiny", {}, None),
    ("FencingTokensMonotonic", RetryRewindsToken, "retry", {}, None),
    ("CommitIsFencedCAS", StaleAttemptMayCommit, "retry", {}, None),
    ("FailureDispositionHonored", RetryableAlwaysRetries, "tiny", {}, None),
]


class NoCleanup(Remora):
    def CleanupStage(self, s: State, a: int) -> State | None:
        return None
