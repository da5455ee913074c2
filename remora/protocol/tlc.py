"""How TLC counts "states generated": evaluation branches of an enabled action.

TLC computes successors by walking each action's formula (``Tool.getNextStates``): a
disjunction (``\\/``) that appears as a conjunct is tried disjunct by disjunct, and a bounded
``\\E`` is tried binding by binding, each try continuing with the remaining conjuncts.  A
disjunctive *guard* whose several disjuncts hold therefore produces the *same* successor several
times, and every copy counts in TLC's "states generated" (not in its distinct states).  Negated
sub-formulas (``~(...)``), ``\\in``, ``#``, comparisons and function applications are evaluated
as plain booleans and never branch.

:func:`tlc_branches` returns, for an enabled action instance, how many copies of its successor
TLC generates: the product, over the branching conjuncts listed below, of the number of their
disjuncts (or ``\\E`` bindings) that hold.  Every other enabled action instance counts once.
This matters only for the "states generated" statistic; distinct states, depth and every
check are unaffected.
"""

from __future__ import annotations

from collections.abc import Callable

from remora.protocol.spec import (
    AttemptAuthorized,
    AttemptCommitted,
    AttemptStopped,
    Cancelling,
    DurableSvc,
    FailureOutcomes,
    LeaseExpired,
    LeaseLive,
    NoAttempt,
    NoWorker,
    Remora,
    StageComplete,
    State,
    Step,
    WorkerDown,
    WorkerUnused,
    WorkerUp,
)

BranchCounter = Callable[[Remora, State, tuple[int, ...]], int]


def _n(*conds: bool) -> int:
    return sum(1 for c in conds if c)


def _tick(m: Remora, s: State, p: tuple[int, ...]) -> int:
    # (\E a : ...) \/ (\E j : ...): one branch per satisfying binding of either quantifier.
    return sum(
        1 for a in m.AttemptIds if s.leaseState[a] == LeaseLive and s.leaseAge[a] < m.LeaseLimit
    ) + sum(
        1
        for j in m.Jobs
        if s.reservation[j] != NoWorker and s.reservationAge[j] < m.ReservationLimit
    )


def _crash_worker(m: Remora, s: State, p: tuple[int, ...]) -> int:
    # OtherCapacity(w) == \E w2 \in Workers : ...
    (w,) = p
    return sum(1 for w2 in m.Workers if w2 != w and s.workerState[w2] in (WorkerUp, WorkerUnused))


def _release_reservation(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (j,) = p
    w = s.reservation[j]
    return _n(
        m.Terminal(s, j),
        s.phase[j] == Cancelling,
        s.workerState[w] != WorkerUp,
        s.authority[j] != NoAttempt and s.attemptState[s.authority[j]] != AttemptAuthorized,
    )


def _reap_lost_attempt(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (a,) = p
    return _n(s.attemptState[a] != AttemptAuthorized, s.reservation[m.JobOf(a)] == NoWorker)


def _cooperative_stop(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (a,) = p
    j = m.JobOf(a)
    w = s.attemptWorker[a]
    return _n(
        s.leaseState[a] == LeaseExpired,
        s.cancelNotice[j],
        m.CanReach(s, w, DurableSvc) and s.cancelRequested[j],
        not m.CurrentAuthority(s, a),
    )


def _release_lease(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (a,) = p
    return _n(
        s.attemptState[a] in (AttemptStopped, AttemptCommitted),
        not m.CurrentAuthority(s, a),
        m.Terminal(s, m.JobOf(a)),
    )


def _clean_terminal_coordination(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (j,) = p
    return _n(
        s.queued[j],
        s.reservation[j] != NoWorker,
        s.cancelNotice[j],
        s.liveProgress[j] != 0,
        s.liveProgressAttempt[j] != NoAttempt,
    )


def _persist_checkpoint(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (a,) = p
    j = m.JobOf(a)
    return _n(not s.checkpointValid[j], s.checkpoint[j] != s.attemptProgress[a])


def _report_progress(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (a,) = p
    j = m.JobOf(a)
    return _n(s.liveProgress[j] != s.attemptProgress[a], s.liveProgressAttempt[j] != a)


def _send_outcome(m: Remora, s: State, p: tuple[int, ...]) -> int:
    a, outcome = p
    return _n(outcome in FailureOutcomes, s.stageState[a] == StageComplete)


def _cleanup_stage(m: Remora, s: State, p: tuple[int, ...]) -> int:
    (a,) = p
    j = m.JobOf(a)
    first = _n(m.Terminal(s, j), not s.checkpointValid[j], s.checkpointStageOwner[j] != a)
    second = _n(
        s.attemptState[a] == AttemptStopped, s.workerState[s.attemptWorker[a]] == WorkerDown
    )
    return first * second


#: Actions of ``Next`` whose formula branches while TLC evaluates it.
BRANCHING_ACTIONS: dict[str, BranchCounter] = {
    "Tick": _tick,
    "CrashWorker": _crash_worker,
    "ReleaseReservation": _release_reservation,
    "ReapLostAttempt": _reap_lost_attempt,
    "CooperativeStop": _cooperative_stop,
    "ReleaseLease": _release_lease,
    "CleanTerminalCoordination": _clean_terminal_coordination,
    "PersistCheckpoint": _persist_checkpoint,
    "ReportProgress": _report_progress,
    "SendOutcome": _send_outcome,
    "CleanupStage": _cleanup_stage,
}


def tlc_branches(m: Remora, s: State, step: Step) -> int:
    """Copies of the successor TLC generates for the *enabled* action instance ``step``."""
    counter = BRANCHING_ACTIONS.get(step.name)
    return 1 if counter is None else counter(m, s, step.params)


__all__ = [
    "BranchCounter",
    "BRANCHING_ACTIONS",
    "tlc_branches",
]
