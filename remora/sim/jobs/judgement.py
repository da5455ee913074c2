"""The judgement of every state of a job run (issue 21, item 4).

The refinement check (:class:`~remora.sim.jobs.refinement.RefinementChecker`) compares the
spec state alpha maps from the stores with the spec's successor after every step — but
alpha is an abstraction: it reads the coordination store's leases without their holders,
the target's staging without its bytes, the vault's secrets without their contents, and
the workers' local memory only where the durable store does not decide.  A runtime that
corrupts what alpha leaves out stays a refinement of the spec until (if ever) the
corruption reaches a step.  And a step the runtime *refuses* is a stutter to the
refinement check, whatever the spec says.  This module closes both gaps:

* **Refusals** (:func:`spec_step_of`, :data:`REFUSAL_REASONS`): a fault-free step of a
  judged kind — the reconciler's per-job and lease steps, and the worker's steps (reserve,
  authorize, activate, renew, report progress, advance, checkpoint, send an outcome, stop
  cooperatively, the credential write) — that the runtime refuses while the spec enables
  its action in the tracked spec state is a finding (``ERROR refused``) unless one of the runtime's
  documented reasons holds (each is listed in docs/jobs.md, "Refusals the judgement
  accepts", and evaluated on the state before the step).
* **Overreach** (:data:`NARROWER_THAN_SPEC`): a step the spec allows but the runtime
  documents it takes only under a narrower condition (the reconciler's credential cleanup
  only once the writer is gone) is a finding (``ERROR overreach``) when taken otherwise.
* **State** (:func:`state_problems`, ``ERROR state``): after every step, what alpha leaves
  out must be what the spec state and the durable rows imply — every lease held by its
  attempt's incarnation and of an activated attempt; every reservation held by a started
  incarnation; every reservation id a running incarnation knows one the store issued to
  it for that job (it may be an earlier one's: a lost reply); every live
  progress hint of its own job; the mirror's floors at most the job's current token and
  down marks only of incarnations; every local attempt of a running incarnation is its
  attempt, at the progress the spec gives it, aware of its outcome in flight; an
  incarnation that stopped without being killed is down durably.  With in-process stores
  (:attr:`contents`): every staging holds the bytes its writer staged at its progress and
  a cleaned one holds none; every live secret holds what its writer wrote and a destroyed
  one nothing.
* **Affirmations** (:func:`affirmation_problems`, ``ERROR affirmed``): a step whose
  runtime call answers ``True`` (done) must have taken a spec action: a success with no
  effect is a refusal the caller cannot see (it forgets a reservation it still holds, or
  counts a renewal that never happened), and to the refinement check it is only a stutter.
  A reconcile pass no fault touched reports the number of spec actions it recorded (the
  count ``remora jobs reconcile`` prints).
* **Stopped incarnations** (:func:`stopped_incarnation_problems`, ``ERROR state``): an
  incarnation that knows it is down (it shut down or learned it was declared down; not
  one that was killed, whose memory is gone) runs nothing — none of its local attempts
  is authorized or executing, as the spec's ``CrashWorker`` stops every attempt of the
  incarnation.  Its handlers and loops read that state, so a stale one keeps them going.
* **The durable log** (:func:`durable_log_problems`, ``ERROR durable-log``): the log is
  every subject's history, written in the transaction of each transition — per subject (a
  job, an incarnation) its versions are 1, 2, ... n without a gap or a repeat, a job's row
  carries the version of its last transition, and every durable step an actor recorded
  names a logged (subject, version) with its action.  Trace validation over the real
  services merges the actors' records with the log by exactly these versions, and the
  history pages read the log: a wrong version is a wrong history, invisible to alpha.
* **The coordination log** (:func:`coordination_log_problems`, ``ERROR
  coordination-log``): its positions only grow, and every coordination step an actor
  recorded since the last wipe is in it under the actor's step number, with its action at
  the recorded position (a wipe is logged; Redis loses the entries before it with the
  rest of its keys, the memory store keeps them).  A killed process's steps are
  recovered from this log, and trace validation orders coordination steps by it: an
  entry missing or misplaced loses or reorders a step, invisible to alpha.
* **A job row's times are what happened** (:func:`row_time_problems`, ``ERROR
  row-times``): its submission time is the clock's reading when the run submitted it (at
  one of its tries: a submission whose reply was lost may be tried again), and
  its queued, started and finished times are unset (0) or between the submission and now;
  each changes only in the step that makes the transition defining it, to that step's
  time, and an attempt's authorization time is its creating step's
  (:func:`_row_time_changes`).
  Alpha reads none of them; the history, the metrics and the dashboard do.
* **Coordination after the drain** (:func:`drained_coordination_problems`): the
  coordination store equals what the durable store implies — on top of the quiescence
  judgement (no reservation, live lease, queue entry, notice or progress), every down mark
  is durable and, while the marks are in place, every incarnation another one declared
  down is marked (on Redis the raw namespace is audited too: the live-lease index and the
  wake-ups, ``tests/jobs/job_services.py``).

Every check has a planted bug of its class in ``tests/jobs/test_job_judgement.py`` that
the job machines alone kill."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

from remora.jobs.actions import Action
from remora.jobs.coordination import active_part, narrow
from remora.jobs.model import (
    AttemptId,
    AttemptRow,
    CoordEntry,
    CredentialState,
    DurableSnapshot,
    IntentId,
    Phase,
    SecretState,
    Stop,
)
from remora.jobs.target import DirectoryVault
from remora.jobs.worker import EXECUTING
from remora.protocol import spec as S
from remora.protocol.spec import State, Step
from remora.sim.jobs.refinement import durable_changes

if TYPE_CHECKING:
    from remora.sim.jobs.refinement import RuntimeView
    from remora.sim.jobs.run import JobRun
    from remora.sim.jobs.trace import JobStep

JUDGEMENTS: frozenset[str] = frozenset(
    {
        "refusals",
        "overreach",
        "state",
        "contents",
        "drained-coordination",
        "affirmations",
        "stopped-incarnations",
        "durable-log",
        "coordination-log",
        "coordination-reads",
        "row-times",
        "read-models",
        "fences",
        "duties",
    }
)
"""The judgement's checks by name: a run (:class:`~remora.sim.jobs.run.JobRun`) takes any
subset, so a planted bug can be shown to survive without the check that kills it."""

#: The step kinds whose refusal is judged and the spec action each performs: ``job`` (the
#: action takes the step's job), ``attempt`` (its attempt), ``job-worker`` (job and
#: worker), ``advance`` (attempt and amount), ``outcome`` (attempt and outcome) or
#: ``credential`` (the next action of the attempt's credential write: judged on the state
#: after the step, where the write stopped).
JUDGED_REFUSALS: dict[str, tuple[str, str]] = {
    "enqueue": ("Enqueue", "job"),
    "publish-cancel-notice": ("PublishCancelNotice", "job"),
    "clean-terminal": ("CleanTerminalCoordination", "job"),
    "clear-stale-progress": ("ClearStaleLiveProgress", "job"),
    "expire-reservation": ("ExpireReservation", "job"),
    "schedule-retry": ("ScheduleRetry", "job"),
    "finalize-cancel": ("FinalizeCancel", "job"),
    "invalidate-checkpoint": ("InvalidateCheckpoint", "job"),
    "expire-lease": ("ExpireLease", "attempt"),
    "reap": ("ReapLostAttempt", "attempt"),
    "cleanup-stage": ("CleanupStage", "attempt"),
    # ProcessOutcome: whichever of its disjuncts the tracked state enables (at most one)
    "reconciler-process-outcome": ("ProcessOutcome", "attempt"),
    "reconciler-release-lease": ("ReleaseLease", "attempt"),
    # the reconciler's single release takes only a terminal or cancelling job's
    # reservation (its passes release the others: judged by the pass duties)
    "reconciler-release-reservation": ("ReleaseReservation", "ending-reservation"),
    "reserve": ("Reserve", "job-worker"),
    "authorize": ("AuthorizeAttempt", "job-worker"),
    "activate": ("ActivateAttempt", "attempt"),
    "renew": ("RenewLease", "attempt"),
    "report-progress": ("ReportProgress", "attempt"),
    "advance": ("AdvanceAttempt", "advance"),
    "checkpoint": ("PersistCheckpoint", "attempt"),
    "send-outcome": ("SendOutcome", "outcome"),
    "cooperative-stop": ("CooperativeStop", "attempt"),
    # SendOutcome then ProcessOutcome, one transaction: ProcessOutcome is enabled whenever
    # SendOutcome was, so the fused step is refused exactly when SendOutcome is
    "complete": ("SendOutcome", "outcome"),
    "process-outcome": ("ProcessOutcome", "attempt"),
    "put-secret": ("", "credential"),
    # the worker releases only its own reservation, of a job terminal or cancelling (the
    # spec's ReleaseReservation also covers the reconciler's cases: judged on that subset)
    "release-reservation": ("ReleaseReservation", "own-reservation"),
}


@attrs.frozen
class Before:
    """What a refusal's reasons read: the runtime as alpha last saw it (before the step)
    and the tracked spec state."""

    view: RuntimeView
    state: State


Holds = Callable[["JobRun", "JobStep", Before], bool]


@attrs.frozen
class Reason:
    """A documented reason the runtime refuses a step the spec enables (docs/jobs.md)."""

    name: str
    text: str
    holds: Holds


def _coord_down(run: JobRun, step: JobStep, b: Before) -> bool:
    return str(step.worker) in b.view.coordination.down


def _local(run: JobRun, step: JobStep) -> Any:
    wk = run.sim.workers[str(step.worker)]
    return wk.attempts.get(AttemptId(str(step.job), int(step.token or 0)))


def _in_flight(run: JobRun, step: JobStep, b: Before) -> bool:
    la = _local(run, step)
    return la is not None and bool(la.outcome_sent)


def _not_executing(run: JobRun, step: JobStep, b: Before) -> bool:
    la = _local(run, step)
    return la is None or la.state != EXECUTING or bool(la.outcome_sent)


# (The reasons read the stores themselves, never through the runtime's guard functions:
# a bug planted in a guard must not excuse itself.)


def _mirror_ahead(running: bool) -> Holds:
    def holds(run: JobRun, step: JobStep, b: Before) -> bool:
        c = b.view.coordination
        j = str(step.job)
        revoked = int(step.token or 0) <= c.floors.get(j, 0)
        return revoked or (running and j in c.cancels)

    return holds


def _other_live_lease(run: JobRun, step: JobStep, b: Before) -> bool:
    a = AttemptId(str(step.job), int(step.token or 0))
    leases = b.view.coordination.leases
    return any(x.job == a.job and x != a and lease.live for x, lease in leases.items())


def _busier_locally(run: JobRun, step: JobStep, b: Before) -> bool:
    """The worker counts more attempts executing than the spec does: one it still runs
    that the durable store has finished (it has not processed or learned the outcome)."""
    wk = run.sim.workers[str(step.worker)]
    model = run.chk.model
    wi = run.chk.alpha.worker_index[wk.id]
    return wk.executing_count() > len(model.ExecutingFor(b.state, wi))


def _attempt_row(d: DurableSnapshot, job: str, token: int) -> AttemptRow | None:
    return next((r for r in d.attempts if r.job == job and r.token == token), None)


def _known_stopped(d: DurableSnapshot, row: AttemptRow) -> bool:
    """The durable store knows the attempt is stopped: its row records a failure or a
    stop, or its incarnation is down (and it did not commit)."""
    down = {w.id for w in d.workers if not w.up}
    return row.stop is Stop.FAILED or row.stopped or (not row.committed and row.worker in down)


def _owner_not_known_stopped(run: JobRun, step: JobStep, b: Before) -> bool:
    d = b.view.durable
    job = next((r for r in d.jobs if r.id == step.job), None)
    if job is None or not job.checkpoint_valid:
        return False
    owner = _attempt_row(d, job.id, job.checkpoint_owner)
    return owner is not None and not _known_stopped(d, owner)


def _stop_unrecorded(run: JobRun, step: JobStep, b: Before) -> bool:
    """The attempt's stop is not known durably (the worker stopped it and has not
    recorded the stop yet)."""
    d = b.view.durable
    row = _attempt_row(d, str(step.job), int(step.token or 0))
    return row is not None and not _known_stopped(d, row)


def _reservation_unknown(run: JobRun, step: JobStep, b: Before) -> bool:
    r = b.view.coordination.reservations.get(str(step.job))
    known = run.sim.workers[str(step.worker)].reservations.get(str(step.job))
    return r is not None and known != r.rid


def _fenced(run: JobRun, step: JobStep, b: Before) -> bool:
    return str(step.worker) in run.sim.stores.target.fenced()


def _marks_missing(run: JobRun, step: JobStep, b: Before) -> bool:
    return not run.sim.stores.coordination.is_marked(run.sim.env)


def _not_due(run: JobRun, step: JobStep, b: Before) -> bool:
    # The run's own account of the due time (from the job's kind), not the runtime's.
    return run.due.get(str(step.job), 0.0) > run.sim.clock.now()


DOWN = Reason(
    "marked down",
    "the incarnation is marked down in the coordination store while it is still up "
    "durably: a declaration is under way, or it did not commit and its mark is not "
    "lifted yet (its let-go failed, or its declarer was killed between the mark and the "
    "commit: the declarer's next full pass sweeps it — judged by stale_marks)",
    _coord_down,
)
IN_FLIGHT = Reason(
    "outcome in flight",
    "the attempt's outcome is in flight: the worker takes no AttemptExecuting step until "
    "it has learned what became of it (anyone may process it)",
    _in_flight,
)
MIRROR = Reason(
    "mirror ahead",
    "the coordination store's mirror (token floor, cancel mark) was raised for a "
    "revocation or cancel whose durable commit then failed or was refused: it refuses "
    "more than the durable store holds, never less",
    _mirror_ahead(running=True),
)
REFUSAL_REASONS: dict[str, tuple[Reason, ...]] = {
    "enqueue": (
        Reason(
            "marks missing",
            "the down marks are not in place (after a wipe, until they are "
            "republished): an Enqueue then could let a declared-down incarnation reserve",
            _marks_missing,
        ),
        Reason(
            "not due",
            "the job is delayed (submit --at/--in) and not yet due on the durable store's "
            "clock: it is not enqueued before its time (the spec's Enqueue has none)",
            _not_due,
        ),
    ),
    "reserve": (
        DOWN,
        Reason(
            "busier locally",
            "the worker still counts an attempt executing that the durable store has "
            "finished (it has not processed or learned the outcome yet): its own slot "
            "count is the stricter one",
            _busier_locally,
        ),
    ),
    "release-reservation": (
        Reason(
            "reservation unknown",
            "the worker does not know the id of the reservation it holds (the Reserve's "
            "reply was lost and reading it back failed): it cannot name it to release it "
            "(the reservation expires, or the reconciler releases it)",
            _reservation_unknown,
        ),
    ),
    "authorize": (
        Reason(
            "reservation unknown",
            "the worker does not know the id of the reservation it holds (it knows none, "
            "or an earlier one's): the Reserve's reply was lost and reading it back "
            "failed too (the reservation expires)",
            _reservation_unknown,
        ),
        Reason(
            "owner not known stopped",
            "the checkpoint's owner stopped, but the durable store does not know it yet "
            "(its stop is not recorded and its incarnation not declared down): its "
            "staging cannot be taken over before",
            _owner_not_known_stopped,
        ),
    ),
    "activate": (
        DOWN,
        MIRROR,
        Reason(
            "another live lease",
            "another attempt of the job still holds a live lease (stronger than the "
            "spec's ActivateAttempt: AtMostOneLiveLeasePerJob)",
            _other_live_lease,
        ),
    ),
    "renew": (DOWN, IN_FLIGHT, attrs.evolve(MIRROR, holds=_mirror_ahead(running=False))),
    "report-progress": (DOWN, IN_FLIGHT, MIRROR),
    "advance": (
        IN_FLIGHT,
        Reason(
            "fenced",
            "the incarnation's stage writes are fenced: a declaration is under way, or "
            "one that did not commit could not let go of its fence (the declarer's next "
            "full pass sweeps it)",
            _fenced,
        ),
    ),
    "cleanup-stage": (
        Reason(
            "stop not recorded",
            "the attempt stopped at its worker (CooperativeStop) but the durable store does "
            "not know it yet: its stop is not recorded and its incarnation is up, and the "
            "reconciler decides on the durable rows alone (the stop is recorded next, or "
            "the incarnation is declared down)",
            _stop_unrecorded,
        ),
    ),
    "checkpoint": (IN_FLIGHT,),
    "send-outcome": (IN_FLIGHT,),
    "complete": (IN_FLIGHT,),
    "put-secret": (
        Reason(
            "not the handler",
            "only the handler of an executing attempt writes credentials (the attempt is "
            "not executing at its worker, or its outcome is in flight)",
            _not_executing,
        ),
    ),
}
"""The documented reasons (docs/jobs.md lists each, by name) a judged step may be refused
although the spec enables its action; evaluated on the state before the step."""


def spec_step_of(run: JobRun, step: JobStep) -> Step | None:
    """The spec action a judged, fault-free step performs (``None``: not judged — a step
    with faults, of an unsubmitted job, of an incarnation that is not running or an
    attempt it does not run; credential writes are judged after the step)."""
    judged = JUDGED_REFUSALS.get(step.op)
    if judged is None or step.faults:
        return None
    name, kind = judged
    alpha = run.chk.alpha
    if step.job not in run.submitted:
        return None
    j = alpha.job_index[str(step.job)]
    if kind == "job":
        return Step(name, (j,))
    if kind == "ending-reservation":
        return Step(name, (j,)) if _ending(run, j) else None
    if kind == "attempt" and step.worker is None:  # the reconciler's
        a = AttemptId(str(step.job), int(step.token or 0))
        return _attempt_step(run, name, alpha.attempt(a)) if run._exists(a) else None
    wk = run.sim.workers.get(str(step.worker))
    if wk is None or not wk.up or wk.id in run.sim.killed or wk.id not in run.sim.started:
        return None
    if kind == "job-worker":
        return Step(name, (j, alpha.worker_index[wk.id]))
    if kind == "own-reservation":
        mine = run.chk.state.reservation[j] == alpha.worker_index[wk.id]
        return Step(name, (j,)) if mine and _ending(run, j) else None
    a = AttemptId(str(step.job), int(step.token or 0))
    if a not in wk.attempts:
        return None
    i = alpha.attempt(a)
    if kind == "attempt":
        return _attempt_step(run, name, i)
    if kind == "advance":
        return Step(name, (i, int(step.amount or 0)))
    if kind == "outcome":
        assert step.outcome is not None
        return Step(name, (i, S.OUTCOME_NAMES.index(step.outcome.value)))
    return Step("", ())  # credential: decided after the step (credential_step)


def _ending(run: JobRun, j: int) -> bool:
    """Job ``j`` is terminal or cancelling in the tracked spec state."""
    st = run.chk.state
    return bool(run.chk.model.Terminal(st, j) or st.phase[j] == S.Cancelling)


PROCESS_OUTCOME = (
    "AcceptSuccess",
    "AcceptPermanentFailure",
    "AcceptRetryableFailureWithBudget",
    "AcceptRetryableFailureExhausted",
    "RejectOutcome",
)
"""The spec's ``ProcessOutcome(a)``: the disjunction of these actions."""


def _attempt_step(run: JobRun, name: str, i: int) -> Step:
    """The spec step ``name`` of attempt ``i``; ``ProcessOutcome`` is the disjunct the
    tracked state enables (the first, if none is)."""
    if name != "ProcessOutcome":
        return Step(name, (i,))
    steps = [Step(n, (i,)) for n in PROCESS_OUTCOME]
    return next((s for s in steps if run.chk.model.apply(run.chk.state, s)), steps[0])


_NEXT_CREDENTIAL = {
    CredentialState.PREPARED: "BeginCredentialWrite",
    CredentialState.WRITTEN: "CommitCredentialVersion",
}


def credential_step(run: JobRun, a: AttemptId, prepared: int) -> Step | None:
    """The credential action the attempt's write takes next in the tracked state (after a
    refused write): continuing the intent it prepared in this step (``prepared``: how many
    intents the job had before it), else preparing the next one."""
    alpha, k = run.chk.alpha, run.chk.constants
    creds = sorted(
        (c for c in run.chk.last_view.durable.credentials if c.job == a.job),
        key=lambda c: c.sequence,
    )
    mine = [c for c in creds if c.sequence > prepared and c.token == a.token]
    if not mine:
        seq = len(creds) + 1
        if seq > k.MaxCredentialIntents:
            return None
        return Step("PrepareCredentialIntent", (_intent(alpha, IntentId(a.job, seq)),))
    c = mine[-1]
    name = _NEXT_CREDENTIAL.get(c.state)
    if c.state is CredentialState.WRITING:
        live = run.chk.last_view.vault.get(c.id) is SecretState.LIVE
        name = "RecordCredentialWrite" if live else "CompleteCredentialWrite"
    return None if name is None else Step(name, (_intent(alpha, c.id),))


def _intent(alpha: Any, c: IntentId) -> int:
    return int(alpha.job_index[c.job] * alpha.k.MaxCredentialIntents + c.sequence - 1)


def excused(run: JobRun, step: JobStep, before: Before) -> str | None:
    """The name of the first documented reason that holds for refusing ``step``."""
    for reason in REFUSAL_REASONS.get(step.op, ()):
        if reason.holds(run, step, before):
            return reason.name
    return None


# -- overreach: steps the runtime takes only under a narrower condition than the spec's --------


def _writer_gone(run: JobRun, s: State, c: IntentId) -> bool:
    """The reconciler's condition for cleaning up an intent: its writer is gone — the job
    is terminal, or the attempt that prepared it is no longer the current authority (in
    the spec state the action was taken in; the intent's attempt from its durable row)."""
    cred = next((r for r in run.chk.last_view.durable.credentials if r.id == c), None)
    if cred is None:
        return True
    model, alpha = run.chk.model, run.chk.alpha
    j = alpha.job_index[c.job]
    writer = alpha.attempt_or_none(c.job, cred.token)
    return bool(model.Terminal(s, j)) or s.authority[j] != writer


NARROWER_THAN_SPEC: dict[str, tuple[str, Callable[[JobRun, State, IntentId], bool]]] = {
    "ClaimCredentialCleanup": ("its writer is gone", _writer_gone),
    "FenceFailedCredentialWrite": ("its writer is gone", _writer_gone),
    "AbandonFencedCredentialIntent": ("its writer is gone", _writer_gone),
}
"""Spec actions the runtime documents it takes only under a narrower condition, checked in
the spec state each was taken in (docs/jobs.md): the spec lets the reconciler clean up any
intent (it gives cleanup no guard on the writer), but a cleanup of a live writer's intent
makes that writer's next step fail."""


def overreach(run: JobRun) -> list[str]:
    """The last step's actions taken outside the runtime's narrower conditions."""
    problems = []
    for r, s in run.chk.last_steps:
        rule = NARROWER_THAN_SPEC.get(r.action)
        if rule is None:
            continue
        job, _, seq = str(r.params["c"]).rpartition("/")
        c = IntentId(job, int(seq))
        if not rule[1](run, s, c):
            problems.append(f"{r.action}({c}) by {r.actor}, though not when {rule[0]}")
    return problems


# -- state: what alpha leaves out --------------------------------------------------------------


def state_problems(run: JobRun, coupling: bool = True, contents: bool = False) -> list[str]:
    """What the stores and the workers hold that the tracked spec state and the durable
    rows do not imply (module docstring); ``contents``: check staged bytes and secrets."""
    if not coupling:
        return content_problems(run) if contents else []
    view, s = run.chk.last_view, run.chk.state
    alpha = run.chk.alpha
    d, c = view.durable, view.coordination
    rows = {r.id: r for r in d.attempts}
    problems: list[str] = []
    workers = set(run.sim.workers)
    run.issued.update((j, r.worker, r.rid) for j, r in c.reservations.items())
    for a, lease in c.leases.items():
        row = rows.get(a)
        if row is None:
            problems.append(f"a lease of {a}, which the durable store does not know")
        elif lease.worker != row.worker:
            problems.append(f"the lease of {a} is held by {lease.worker}, not {row.worker}")
        elif a not in view.activated:
            problems.append(f"a lease of {a}, which was never activated")
    for j, r in c.reservations.items():
        if r.worker not in workers or not view.workers[r.worker].started:
            problems.append(f"the reservation of {j} is held by {r.worker}, not an incarnation")
    for j, p in c.progress.items():
        if p.attempt.job != j or p.attempt not in rows:
            problems.append(f"the live progress of {j} names {p.attempt}")
    tokens = {r.id: r.current_token for r in d.jobs}
    for j, floor in c.floors.items():
        if floor > tokens.get(j, 0):
            problems.append(f"the floor of {j} is {floor}, above its current token")
    for w in sorted(c.down - workers):
        problems.append(f"a down mark of {w}, not an incarnation")
    durable_up = {r.id: r.up for r in d.workers}
    for w, wk in run.sim.workers.items():
        if w in run.sim.killed or w not in run.sim.started:
            continue
        if not wk.up:
            if durable_up.get(w, False):
                problems.append(f"{w} stopped, but it is up durably")
            continue
        for j, known in wk.reservations.items():
            if (j, w, known) not in run.issued:
                problems.append(f"{w} knows {known!r} as its reservation of {j}, never issued")
        for a, la in wk.attempts.items():
            row = rows.get(a)
            if row is None or row.worker != w:
                problems.append(f"{w} runs {a}, which is not its attempt durably")
                continue
            i = alpha.attempt(a)
            if la.state in ("authorized", EXECUTING) and la.progress != s.attemptProgress[i]:
                problems.append(
                    f"{w} has {a} at progress {la.progress}, the spec at {s.attemptProgress[i]}"
                )
            if la.state == EXECUTING and row.pending is not None and not la.outcome_sent:
                problems.append(f"{a} has an outcome in flight that {w} does not know of")
            if la.state == "committed" and not row.committed:
                problems.append(f"{w} holds {a} committed, the durable store does not")
    if contents:
        problems += content_problems(run)
    return problems


ACTION_STEPS: frozenset[str] = frozenset(JUDGED_REFUSALS) | {
    "release-reservation",
    "reconciler-release-reservation",
    "reap",
    "cleanup-stage",
    "process-outcome",
    "reconciler-process-outcome",
    "release-lease",
    "reconciler-release-lease",
    "cooperative-stop",
}
"""The step kinds that stand for one spec action each, whose answer ``True`` says the
action was taken.  Not: the environment's and the client's steps (a submission is in the
spec's ``Init``, a heartbeat is no spec step), the reconcile pass (it answers a count) and
the loops' steps (they answer ``True`` for a turn whatever it did; the loops' own account
judges them, :class:`~remora.sim.jobs.loops.SimLoops`), and ``record-stop`` (it tells the
durable store of a stop the spec already took: no spec step)."""


def affirmation_problems(
    run: JobRun, step: JobStep, result: object, *, faulted: bool = False
) -> list[str]:
    """A step of :data:`ACTION_STEPS` answered ``True`` (done) but recorded no spec action;
    a reconcile pass no fault touched (``faulted`` off) reported a count of steps other
    than the spec actions it recorded (module docstring)."""
    if step.op == "reconcile" and type(result) is int and not faulted:
        took = sum(1 for record, _ in run.chk.last_steps if record.action)
        if result != took:
            return [f"{step.label()} reported {result} steps but took {took} spec actions"]
        return []
    if result is not True or step.op not in ACTION_STEPS:
        return []
    if any(record.action and record.action != "Tick" for record, _ in run.chk.last_steps):
        return []
    return [f"{step.label()} answered done but took no spec action"]


def stopped_incarnation_problems(run: JobRun) -> list[str]:
    """An incarnation that knows it is down still runs an attempt (module docstring)."""
    problems: list[str] = []
    for w, wk in sorted(run.sim.workers.items()):
        if wk.up or w in run.sim.killed or w not in run.sim.started:
            continue
        for a, la in sorted(wk.attempts.items(), key=lambda x: (x[0].job, x[0].token)):
            if la.state in ("authorized", EXECUTING):
                problems.append(f"{w} is down but still holds {a} {la.state}")
    return problems


def fence_problems(run: JobRun) -> list[str]:
    """An incarnation another actor declared down whose stage writes the target does not
    refuse.  The declaration raises the target's fence before its durable commit and never
    lifts it (:meth:`~remora.jobs.reconciler.Reconciler.declare_down`): from the commit on
    the spec stops the incarnation's attempts, and a zombie's stage write (it has not
    learned of its declaration) must be refused — else it writes into a staging that a
    successor may take over.  Incremental: the recorder's steps judged before are not
    scanned again (:attr:`JobRun.memo <remora.sim.jobs.run.JobRun.memo>`)."""
    steps = run.sim.recorder.steps
    seen = run.memo.get("declared")
    n, last, declared = seen if isinstance(seen, tuple) else (0, None, frozenset())
    if n and (len(steps) < n or steps[n - 1] is not last):
        n, declared = 0, frozenset()  # the recorder only appends: judged whole again
    declared = declared | {w for r in steps[n:] if (w := declared_by_other(r)) is not None}
    run.memo["declared"] = (len(steps), steps[-1] if steps else None, declared)
    if not declared:
        return []
    fenced = run.sim.stores.target.fenced()
    return [
        f"{w} was declared down but its stage writes are not fenced"
        for w in sorted(declared - fenced)
    ]


@attrs.define
class _LogSeen:
    """What a log judgement saw at its last clean check (:attr:`JobRun.memo
    <remora.sim.jobs.run.JobRun.memo>`): the log's entries, what they were folded into,
    and how many of the recorder's steps were judged against them.  A later check folds in
    only what was added since; a log changed anywhere else is judged whole again."""

    entries: Any
    logged: dict[Any, Any]
    records: int
    last_record: Any = None
    wiped: tuple[int, int] = (0, 0)
    last: tuple[int, int] | None = None
    #: the durable store's change token when the log was read (``durable_changes``)
    snapshot: int | str | None = None


def _new_records(run: JobRun, seen: _LogSeen) -> list[Any]:
    """The recorder's steps since ``seen`` (all of them if its list changed before)."""
    steps = run.sim.recorder.steps
    n = seen.records
    if n and (len(steps) < n or steps[n - 1] is not seen.last_record):
        seen.records, n = 0, 0  # the recorder only appends
    seen.records, seen.last_record = len(steps), (steps[-1] if steps else None)
    return list(steps[n:])


def durable_log_problems(run: JobRun) -> list[str]:
    """The durable log is not every subject's contiguous history, a job row's version is
    not its last logged one, or a recorded durable step is not in the log (module
    docstring).  Incremental: entries and records judged at an earlier clean check are not
    judged again while the log still holds them all; while the durable store has changed no
    row since that check (:func:`~remora.sim.jobs.refinement.durable_changes`), the log is
    not read again and only the recorder's new steps are judged against it."""
    durable = run.sim.stores.durable
    changes = durable_changes(durable)
    seen = run.memo.get("durable-log")
    if isinstance(seen, _LogSeen) and changes is not None and seen.snapshot == changes:
        return _unlogged_records(run, seen)
    entries = durable.log_versions()
    current = frozenset(entries)
    if (
        not isinstance(seen, _LogSeen)
        or len(current) != len(entries)
        or not seen.entries <= current
    ):
        seen = _LogSeen(frozenset(), {}, 0)
    logged: dict[str, dict[int, str]] = seen.logged
    problems: list[str] = []
    touched: set[str] = set()
    fresh = current - seen.entries if seen.entries else entries
    for key, version, action in sorted(fresh):
        versions = logged.setdefault(key, {})
        if version in versions:
            problems.append(f"the durable log of {key} holds version {version} twice")
        versions[version] = action
        touched.add(key)
    for key in sorted(touched):
        versions = logged[key]
        if sorted(versions) != list(range(1, len(versions) + 1)):
            problems.append(f"the durable log of {key} holds versions {sorted(versions)}")
    for row in run.chk.last_view.durable.jobs:
        last = max(logged.get(row.id, {}), default=0)
        if row.version != last:
            problems.append(f"{row.id} is at version {row.version}, its log at {last}")
    seen.entries, seen.snapshot = current, changes
    return problems + _unlogged_records(run, seen, bool(problems))


def _unlogged_records(run: JobRun, seen: _LogSeen, failed: bool = False) -> list[str]:
    """The recorder's durable steps since ``seen`` that the log ``seen`` folded does not
    hold as recorded; ``seen`` is kept for the next check only if all is clean."""
    problems: list[str] = []
    for record in _new_records(run, seen):
        if record.store != "durable" or not record.key or not record.action:
            continue
        held = seen.logged.get(record.key, {}).get(record.version)
        if held != record.action:
            problems.append(
                f"{record.actor} recorded {record.action} as {record.key} v{record.version}, "
                f"the durable log holds {held!r} there"
            )
    if problems or failed:
        run.memo.pop("durable-log", None)
    else:
        run.memo["durable-log"] = seen
    return problems


def coordination_read_problems(run: JobRun) -> list[str]:
    """The coordination store's narrow reads show what its whole state holds: ``view`` of
    each job (with every attempt of it the durable store knows, and every lease the store
    holds for it) equals :func:`~remora.jobs.coordination.narrow` of its ``snapshot``, and
    ``active`` equals :func:`~remora.jobs.coordination.active_part` of it.  The workers'
    and the reaper's guards decide on these reads, and the Redis store answers each with
    its own script (``View``, ``Active``): a script that reads one field wrong misleads
    every guard that trusts it while the snapshot, which the other judgements compare,
    stays right.  A pure read of the store, no actor: no fault fires in it.  The whole
    states compared are the refinement check's after the step (nothing wrote since)."""
    coord = run.sim.stores.coordination
    snap, durable = run.chk.last_view.coordination, run.chk.last_view.durable
    judged = (snap, durable.attempts)
    if run.memo.get("coordination-reads") == judged:
        return []  # the same state (its clock included) judged clean at the last step
    problems: list[str] = []
    for job in run.config.jobs:
        attempts = {AttemptId(r.job, r.token) for r in durable.attempts if r.job == job}
        attempts |= {a for a in snap.leases if a.job == job}
        wanted = sorted(attempts, key=str)
        got, want = coord.view(None, job, wanted), narrow(snap, job, wanted)
        if got != want:
            problems.append(
                f"the coordination store's view of {job} is {got!r}, its state {want!r}"
            )
    got, want = coord.active(None), active_part(snap)
    if got != want:
        problems.append(f"the coordination store's active read is {got!r}, its state {want!r}")
    run.memo["coordination-reads"] = None if problems else judged
    return problems


def coordination_log_problems(run: JobRun) -> list[str]:
    """The coordination log is not the store's history in its order, or a recorded
    coordination step is not in it as recorded (module docstring).  Incremental as
    :func:`durable_log_problems`: the log only grows between wipes (Redis loses its
    entries in one, and is then judged whole again)."""
    entries = run.sim.stores.coordination.log()
    seen = run.memo.get("coordination-log")
    n = len(seen.entries) if isinstance(seen, _LogSeen) else 0
    if not isinstance(seen, _LogSeen) or len(entries) < n or entries[:n] != seen.entries:
        seen, n = _LogSeen([], {}, 0), 0
    problems: list[str] = []
    logged: dict[tuple[str, int], CoordEntry] = seen.logged
    for entry in entries[n:]:
        position = _order_key(entry.order)
        if seen.last is not None and position <= seen.last:
            problems.append(f"the coordination log holds {entry.order} after {seen.last}")
        seen.last = position
        if entry.action == Action.LOSE_COORDINATION_STATE:
            seen.wiped = position
        if not entry.action:
            continue
        key = (entry.actor, entry.actor_seq)
        if key in logged:
            problems.append(f"the coordination log holds {entry.actor}'s step {key[1]} twice")
        logged[key] = entry
    for record in _new_records(run, seen):
        if record.store != "coordination" or not record.action:
            continue
        if _order_key(record.order) < seen.wiped:
            continue  # a wipe may take the log with it (Redis: the stream is a key)
        held = logged.get((record.actor, record.seq))
        if held is None or (held.order, held.action) != (record.order, record.action):
            where = "nothing" if held is None else f"{held.action} at {held.order}"
            problems.append(
                f"{record.actor} recorded {record.action} at {record.order} (its step "
                f"{record.seq}), the coordination log holds {where} for it"
            )
    seen.entries = entries
    if problems:
        run.memo.pop("coordination-log", None)
    else:
        run.memo["coordination-log"] = seen
    return problems


def _order_key(order: str) -> tuple[int, int]:
    """A coordination log position (a Redis stream id ``ms-n``, or the memory store's
    ``k-0``) as a comparable pair."""
    first, _, second = order.partition("-")
    return int(first), int(second or 0)


def row_time_problems(run: JobRun) -> list[str]:
    """A job row's times are not what happened (module docstring).  The run's own account
    of each submission's time (:attr:`~remora.sim.jobs.run.JobRun.submitted_at`), never the
    runtime's."""
    now = run.sim.clock.now()
    problems: list[str] = []
    for row in run.chk.last_view.durable.jobs:
        tried = run.submitted_at.get(row.id, [])
        if tried and all(abs(row.submitted_at - at) > 1e-6 for at in tried):
            problems.append(f"{row.id} was submitted at {tried}, its row says {row.submitted_at}")
        for name in ("queued_at", "started_at", "finished_at"):
            t = getattr(row, name)
            if t and not row.submitted_at - 1e-6 <= t <= now + 1e-6:
                problems.append(
                    f"{row.id}'s {name} {t} is outside [{row.submitted_at}, {now}] "
                    "(its submission, now)"
                )
    return problems + _row_time_changes(run, now)


@attrs.frozen
class _RowTimes:
    """A job row's phase, version and times as the last check saw them."""

    phase: Phase
    version: int
    queued_at: float
    started_at: float
    finished_at: float


def _row_time_changes(run: JobRun, now: float) -> list[str]:
    """A job row's times change only at the transition that defines each, to that
    transition's time (module docstring): the step's window is ``[run.pass_began, now]``
    (a fused transaction stamps all its steps with one time).  ``queued_at`` changes only
    to a time in the window and only of a job that is queued now, and a job that became
    queued has one in the window; ``started_at`` is set once, in the step in which the job
    first runs (0 is unset: the simulated clock starts at 0); ``finished_at`` once, in the
    step in which it becomes terminal; an attempt
    row's ``authorized_at`` is the time of the step that created the row and never changes.
    Compared with the rows the last check saw (:attr:`JobRun.memo
    <remora.sim.jobs.run.JobRun.memo>`); not again while the durable store has changed no row
    since (:func:`~remora.sim.jobs.refinement.durable_changes`)."""
    changes = durable_changes(run.sim.stores.durable)
    seen: tuple[dict[str, _RowTimes], dict[AttemptId, float], int | str | None] | None = (
        run.memo.get("row-times")
    )
    if seen is not None and changes is not None and seen[2] == changes:
        return []  # no row changed since the last clean check (the store's change token)
    began = run.pass_began
    durable = run.chk.last_view.durable
    jobs, attempts, _ = seen if seen is not None else ({}, {}, None)

    def within(t: float) -> bool:
        return began - 1e-6 <= t <= now + 1e-6

    problems: list[str] = []
    for row in durable.jobs:
        was = jobs.get(row.id)
        if was is None or was.version == row.version:
            if was is not None and (was.queued_at, was.started_at, was.finished_at) != (
                row.queued_at,
                row.started_at,
                row.finished_at,
            ):
                problems.append(f"{row.id}'s times changed at version {row.version} unchanged")
            continue
        window = f"the step's [{began}, {now}]"
        queued = row.phase is Phase.QUEUED
        if row.queued_at != was.queued_at and not (queued and within(row.queued_at)):
            problems.append(
                f"{row.id}'s queued_at went {was.queued_at} -> {row.queued_at} as it went "
                f"{was.phase.value} -> {row.phase.value} (not queued in {window})"
            )
        elif queued and was.phase is not Phase.QUEUED and not within(row.queued_at):
            problems.append(
                f"{row.id} became queued, its queued_at {row.queued_at} is not in {window}"
            )
        if was.started_at and row.started_at != was.started_at:
            problems.append(f"{row.id}'s started_at went {was.started_at} -> {row.started_at}")
        elif (
            not was.started_at
            and row.phase is Phase.RUNNING
            and was.phase is not Phase.RUNNING
            and not within(row.started_at)
        ):
            problems.append(
                f"{row.id} first runs, its started_at {row.started_at} is not in {window}"
            )
        if was.finished_at and row.finished_at != was.finished_at:
            problems.append(f"{row.id}'s finished_at went {was.finished_at} -> {row.finished_at}")
        elif row.phase.terminal and not was.phase.terminal and not within(row.finished_at):
            problems.append(
                f"{row.id} became {row.phase.value}, its finished_at {row.finished_at} "
                f"is not in {window}"
            )
        elif not row.phase.terminal and row.finished_at:
            problems.append(f"{row.id} is {row.phase.value} but finished at {row.finished_at}")
    for ar in durable.attempts:
        at = attempts.get(ar.id)
        if at is not None and ar.authorized_at != at:
            problems.append(f"{ar.id}'s authorized_at went {at} -> {ar.authorized_at}")
        elif at is None and seen is not None and not within(ar.authorized_at):
            problems.append(
                f"{ar.id} was authorized at {ar.authorized_at}, not in the step's [{began}, {now}]"
            )
    if problems:
        run.memo.pop("row-times", None)
        return problems
    run.memo["row-times"] = (
        {
            r.id: _RowTimes(r.phase, r.version, r.queued_at, r.started_at, r.finished_at)
            for r in durable.jobs
        },
        {ar.id: ar.authorized_at for ar in durable.attempts},
        changes,
    )
    return []


def content_problems(run: JobRun) -> list[str]:
    """Every staging holds what its writer staged at its progress (a cleaned one nothing);
    every live secret what its writer wrote (a destroyed one nothing); a directory vault's
    secret files are their owner's alone (:func:`_exposed_secrets`)."""
    from remora.sim.jobs.run import secret_bytes, staged_bytes

    st = run.sim.stores
    view = run.chk.last_view
    problems: list[str] = []
    for a, info in sorted(view.target.items()):
        data = st.target.data(a)
        if info.cleaned:
            if data is not None:
                problems.append(f"the cleaned staging of {a} still holds {data!r}")
        elif data != staged_bytes(a, info.progress):
            problems.append(f"the staging of {a} at {info.progress} holds {data!r}")
    tokens = {cr.id: cr.token for cr in view.durable.credentials}
    for cid, secret in sorted(view.vault.items(), key=lambda x: str(x[0])):
        data = st.vault.read(cid)
        if secret is SecretState.LIVE:
            want = secret_bytes(AttemptId(cid.job, tokens.get(cid, 0)))
            if data != want:
                problems.append(f"the live secret {cid} holds {data!r}, not {want!r}")
        elif data is not None:
            problems.append(f"the {secret.value} secret {cid} still holds {data!r}")
    return problems + _exposed_secrets(st.vault)


def _exposed_secrets(vault: Any) -> list[str]:
    """A directory vault's secret files (``<root>/<job>/<sequence>.secret``, and a killed
    writer's temporary one beside it; docs/jobs.md) that anyone but their owner may read
    or write: a secret is its owner's alone.  (A tombstone holds nothing secret.)"""
    if not isinstance(vault, DirectoryVault) or not vault.root.is_dir():
        return []
    return [
        f"the vault file {p.relative_to(vault.root)} has mode {p.stat().st_mode & 0o777:o}"
        for p in sorted(vault.root.rglob("*"))
        if ".secret" in p.name and p.is_file() and p.stat().st_mode & 0o077
    ]


# -- the coordination store after the drain ---------------------------------------------------


def declared_by_other(record: Any) -> str | None:
    """The incarnation a durable record declares down when another actor took it (a
    ``CrashWorker`` by anyone but the incarnation itself or its own reconciler — a clean
    shutdown is the incarnation's own declaration), else None."""
    if record.action != "CrashWorker":
        return None
    w = str(record.params["w"])
    return None if record.actor == w or str(record.actor).startswith(f"{w}.") else w


def declared_by_others(durable_log: Iterable[Any]) -> set[str]:
    """Incarnations another actor declared down (a clean shutdown is the incarnation's
    own declaration: it raises no mark — it no longer acts)."""
    return {w for e in durable_log if (w := declared_by_other(e)) is not None}


def down_mark_problems(
    marks: Iterable[str], marked: bool, durable_down: Iterable[str], declared: Iterable[str]
) -> list[str]:
    """The down marks equal what the durable store implies: each mark durable; while the
    marks are in place (not after a wipe until they are republished), each incarnation
    another one declared down marked."""
    marks, down = set(marks), set(durable_down)
    problems = [f"the down mark of {w} is not durable" for w in sorted(marks - down)]
    if marked:
        problems += [
            f"{w} was declared down but is not marked" for w in sorted(set(declared) - marks)
        ]
    return problems


def coordination_marks(coordination: Any) -> frozenset[str]:
    """The down marks a coordination store holds (Redis's snapshot omits them: read raw)."""
    client = getattr(coordination, "client", None)
    if client is not None:
        return frozenset(m.decode() for m in client.smembers(f"{coordination.ns}:down"))
    return frozenset(coordination.snapshot().down)


def stale_marks(run: JobRun) -> list[str]:
    """The down marks and target fences of incarnations the durable store holds up — after
    a reconcile pass in which no fault fired, there must be none: a declaration that did
    not commit lets go of its mark and its fence, and one left behind (its declarer killed
    between the mark and the commit, its reply unresolved, its let-go failed) is swept by
    the declarer's next full pass (:meth:`~remora.jobs.reconciler.Reconciler.sweep_marks`).
    A mark that stays claims more than the durable store holds: the incarnation, durably
    up, could never reserve again; a fence that stays refuses its every stage write, so
    each of its attempts fails at its first checkpoint."""
    st = run.sim.stores
    down = {w.id for w in st.durable.snapshot().workers if not w.up}
    return [
        f"the down mark of {w} is not durable after a fault-free reconcile pass"
        for w in sorted(coordination_marks(st.coordination) - down)
    ] + [
        f"the target fence of {w} is not durable after a fault-free reconcile pass"
        for w in sorted(st.target.fenced() - down)
    ]


def declaration_marks(
    run: JobRun,
    before: tuple[frozenset[str], frozenset[str]],
    kind: str,
    let_go_failed: bool,
) -> list[str]:
    """A ``declare-down`` step that did not commit (``kind``: refused, or unavailable — its
    failure resolved as not committed) left a down mark or a target fence it raised of an
    incarnation the durable store holds up: the declarer lets go of both at once
    (:meth:`~remora.jobs.reconciler.Reconciler.declare_down`), or the incarnation, durably
    up, is fenced until a full pass sweeps them.  ``before``: the marks and the fences
    before the step; ``let_go_failed``: a fault fired on a coordination or target write
    (the let-go may have failed) or a kill point killed the declarer between its mark and
    its commit."""
    if kind not in ("refused", "unavailable") or let_go_failed:
        return []
    st = run.sim.stores
    up = {w.id for w in st.durable.snapshot().workers if w.up}
    marks, fences = before
    return [
        f"a declaration of {w} that did not commit left its down mark ({kind})"
        for w in sorted((coordination_marks(st.coordination) - marks) & up)
    ] + [
        f"a declaration of {w} that did not commit left its target fence ({kind})"
        for w in sorted((st.target.fenced() - fences) & up)
    ]


PASS_DUTIES = (
    "Enqueue",
    "PublishCancelNotice",
    "ReleaseReservation",
    "FinalizeCancel",
    "CleanTerminalCoordination",
    "ClearStaleLiveProgress",
)
"""The per-job spec actions a full reconcile pass takes whenever the spec enables them, with
no timing of the runtime's own in the way — ``Enqueue`` only of a job due when the pass
began (:func:`_pass_enqueues`: a delayed job waits for its time), ``ReleaseReservation``
only of a cancelling or terminal job (:func:`_pass_releases`); a ``ScheduleRetry`` waits
for the failed attempt's lease and an expiry for its age: not listed."""


def _pass_enqueues(run: JobRun, s: State, j: int) -> bool:
    """Whether a pass enqueues job ``j`` (when the spec enables it): it was due
    (:meth:`~remora.jobs.guards.Guards.is_due`) when the pass began, by the run's own
    account of when it submitted the job with which delay (:attr:`JobRun.due`: its last
    try; a row committed by an earlier try is due no later)."""
    return run.due.get(run.chk.constants.Jobs[j], 0.0) <= run.pass_began


def _pass_releases(run: JobRun, s: State, j: int) -> bool:
    """Whether a pass releases job ``j``'s reservation in state ``s``: the job is cancelling
    or terminal.  The spec also lets anyone release the reservation of an incarnation that
    is down, or of a job whose attempt went on past authorized; the runtime leaves those
    to expire."""
    return bool(run.chk.model.Terminal(s, j) or s.phase[j] == S.Cancelling)


_DUTY_WHEN: dict[str, Callable[[JobRun, State, int], bool]] = {
    "Enqueue": _pass_enqueues,
    "ReleaseReservation": _pass_releases,
}


LOOP_PASS_DUTIES = ("Enqueue", "PublishCancelNotice", "ReleaseReservation", "FinalizeCancel")
"""The duties of a pass of the production loop's reconcile schedule, which may be
incremental (:class:`~remora.jobs.loop.ReconcileSchedule`: a full pass only every few): the
duties of a job that is not terminal — every incremental read holds every such job, while
a job that finished before its window is left to the next full pass."""


def duty_problems(run: JobRun, before: State, duties: tuple[str, ...] = PASS_DUTIES) -> list[str]:
    """The pass's duties (:data:`PASS_DUTIES`) the tracked spec state enabled when a
    reconcile pass began (``before``) and still enables after it, when it ran whole (no
    fault fired, its result ``ok``).  A duty its own steps enabled is the next pass's (a
    pass works from the snapshots it read first: the job it finalizes is cleaned next
    time).  A pass that skips a duty leaves the job to a later actor or to an expiry — no
    unsafe state, so only this judgement sees it (a cancelled job's reservation held until
    it expires delays the cancellation's end and keeps a slot taken).  ``duties``: those
    judged (:data:`LOOP_PASS_DUTIES` after a pass of the production loop, of the jobs not
    terminal when it began)."""
    model, state, alpha = run.chk.model, run.chk.state, run.chk.alpha
    taken = {(r.action, str(r.params.get("j", ""))) for r, _ in run.chk.last_steps}
    left = []
    for job in sorted(run.submitted):
        j = alpha.job_index[job]
        if duties == LOOP_PASS_DUTIES and model.Terminal(before, j):
            continue
        for name in duties:
            duty = getattr(model, name)
            when = _DUTY_WHEN.get(name)
            if when is not None and not when(run, before, j):
                continue
            if duty(before, j) is None:
                continue
            if duty(state, j) is not None:
                left.append(f"{name}({job}) is still enabled after a fault-free reconcile pass")
            elif (
                name == "PublishCancelNotice"
                and (name, job) not in taken
                and _executing(model, before, j)
            ):
                # FinalizeCancel disables the notice (the job is terminal): a pass that
                # finalizes without publishing leaves the running handler to learn of the
                # cancel only when its lease ends, a lease period later
                left.append(
                    f"{name}({job}) was skipped by a fault-free reconcile pass that ended the "
                    f"cancel while an attempt of {job} executed (its handler is told only "
                    f"when its lease ends)"
                )
    return left


def _executing(model: Any, s: State, j: int) -> bool:
    """Whether an attempt of job ``j`` executes in the spec state ``s``."""
    return any(
        model.JobOf(a) == j and state == S.AttemptExecuting
        for a, state in enumerate(s.attemptState)
    )


def drained_coordination_problems(run: JobRun, complete: bool = True) -> list[str]:
    """The coordination store after the drain equals what the durable store implies
    (beyond :meth:`JobRun.quiescence`'s queue, reservations, live leases, notices and
    progress): the down marks (``complete``: also every incarnation declared down by
    another one marked; else only every mark durable, the judgement before issue 21)."""
    st = run.sim.stores
    d = st.durable.snapshot()
    marked = complete and st.coordination.is_marked(run.sim.env)
    return down_mark_problems(
        coordination_marks(st.coordination),
        marked,
        (w.id for w in d.workers if not w.up),
        declared_by_others(st.durable.log()),
    )


__all__ = [
    "stale_marks",
    "Before",
    "JUDGEMENTS",
    "LOOP_PASS_DUTIES",
    "PASS_DUTIES",
    "duty_problems",
    "JUDGED_REFUSALS",
    "NARROWER_THAN_SPEC",
    "REFUSAL_REASONS",
    "Reason",
    "content_problems",
    "coordination_marks",
    "declaration_marks",
    "credential_step",
    "declared_by_others",
    "down_mark_problems",
    "drained_coordination_problems",
    "excused",
    "overreach",
    "spec_step_of",
    "state_problems",
]
