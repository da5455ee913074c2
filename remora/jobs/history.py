"""What an operator reads about jobs: each job's status, each attempt's history, the
deployment at a glance — built from the durable store alone.

Why a module of its own: ``remora jobs status``, ``remora jobs history`` and ``remora jobs
dashboard`` show the same facts, and none of them may need the coordination store (they
must work with Redis down), so every value here is read from the durable rows, the durable
transition log (``remora_jobs_log``, with each row's time and facts) and, for the progress
an attempt has staged, the target.  Times are seconds on the durable store's clock
(PostgreSQL's ``clock_timestamp()``; SQLite: the injected clock, the epoch-anchored
:class:`~remora.clock.EpochClock` at the command line), rendered as ISO 8601 UTC.

**Why an attempt ended** (:class:`Ending`) is the first, in time, of the durable events that
end it: its outcome accepted (``AcceptSuccess``, ``AcceptPermanentFailure``,
``AcceptRetryableFailureWithBudget``/``Exhausted`` — a retryable failure whose error says
``timed out`` is a timeout), its authority revoked by the reaper (``ReapLostAttempt``: the
lease was lost) or by a cancellation (``FinalizeCancel``), or its incarnation going down
with no outcome in flight (``CrashWorker``: by the incarnation itself — a shutdown that
abandoned it — or declared down by another one).  An attempt none of these ended but whose
worker recorded a stop (after ``CooperativeStop``) ended *stopped* with the worker's reason;
one whose outcome was rejected, *rejected*.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from remora.errors import RemoraError
from remora.jobs.actions import Action
from remora.jobs.durable import DurableStore
from remora.jobs.model import AttemptId, AttemptRow, JobRow, LogEntry, Phase, StageInfo

#: The prefix of the error a handler timeout records (``timed out after Ns``).
TIMED_OUT = "timed out"

#: A submission number no job reaches (``active_snapshot``'s "newer than" bound).
NEVER = 1 << 62


class Ending(enum.Enum):
    """Why an attempt ended (module docstring); ``RUNNING``: it has not."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRYABLE = "retryable failure"
    EXHAUSTED = "retryable failure, attempts exhausted"
    TIMED_OUT = "timed out"
    REAPED = "reaped: lease lost"
    CANCELLED = "cancelled"
    DECLARED_DOWN = "declared down"
    SHUTDOWN = "abandoned at shutdown"
    STOPPED = "stopped"
    REJECTED = "outcome rejected"
    RUNNING = "running"


#: The durable events that end an attempt (module docstring), by action.
ACCEPTED: Mapping[str, Ending] = {
    Action.ACCEPT_SUCCESS: Ending.SUCCEEDED,
    Action.ACCEPT_PERMANENT_FAILURE: Ending.FAILED,
    Action.ACCEPT_RETRYABLE_FAILURE_WITH_BUDGET: Ending.RETRYABLE,
    Action.ACCEPT_RETRYABLE_FAILURE_EXHAUSTED: Ending.EXHAUSTED,
}

#: The outcome a handler asked for (``SendOutcome``), as history shows it.
OUTCOME_NAMES = {
    "WantsSuccess": "success",
    "WantsRetryableFailure": "retryable",
    "WantsPermanentFailure": "permanent",
}


def iso(t: float | None) -> str | None:
    """``t`` (seconds since the epoch) as ISO 8601 UTC with milliseconds; None for none."""
    if not t:
        return None
    whole = int(t)
    ms = round((t - whole) * 1000)
    if ms == 1000:
        whole, ms = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{ms:03d}Z"


@attrs.frozen
class Attempt:
    """One attempt's history (``remora jobs history``)."""

    token: int
    worker: str
    authorized: float = 0.0
    #: When it was activated: derived from its first durable step after activation (a
    #: checkpoint, its outcome, its recorded stop) and how long its worker says it had run
    #: by then (0: unknown — an attempt that took no durable step after activating).
    activated: float = 0.0
    ended: float = 0.0
    #: Seconds it ran, as its worker measured (its last durable step's ``ran``).
    ran: float | None = None
    #: The outcome its handler asked for (``success``, ``retryable``, ``permanent``).
    outcome: str | None = None
    ending: Ending = Ending.RUNNING
    #: The error of its failure, the reason its worker stopped, or who declared it down.
    detail: str = ""
    #: The staging this attempt resumed from (the token it took over), if any.
    resumed_from: int = 0

    @property
    def why(self) -> str:
        """The ending in words, with its detail (an error without the outcome's prefix
        the worker gives it: ``retryable: …``, ``permanent: …``)."""
        if self.ending is Ending.TIMED_OUT and self.detail:
            return self.detail  # "timed out after 2s"
        detail = self.detail
        for prefix in ("retryable: ", "permanent: "):
            detail = detail.removeprefix(prefix)
        return f"{self.ending.value}: {detail}" if detail else self.ending.value

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.token,
            "worker": self.worker,
            "authorized": iso(self.authorized),
            "activated": iso(self.activated),
            "ended": iso(self.ended),
            "ran": self.ran,
            "outcome": self.outcome,
            "end": None if self.ending is Ending.RUNNING else self.ending.name.lower(),
            "why": self.why,
            "resumed_from": self.resumed_from or None,
        }


def attempts_of(job: JobRow, rows: Sequence[AttemptRow], log: Iterable[LogEntry]) -> list[Attempt]:
    """Every attempt of ``job`` with why it ended (module docstring), from its attempt
    rows and the log rows of the job and of its attempts' incarnations."""
    events = _merged(log, job.id)
    found: dict[int, dict[str, Any]] = {
        r.token: {
            "token": r.token,
            "worker": r.worker,
            "authorized": r.authorized_at,
            "resumed_from": r.adopted_from,
        }
        for r in rows
    }
    ended: dict[int, tuple[Ending, float, str]] = {}
    stopped: dict[int, tuple[float, str]] = {}
    rejected: dict[int, float] = {}
    pending: set[int] = set()

    def end(token: int, ending: Ending, at: float, detail: str = "") -> None:
        if token in found and token not in ended:
            ended[token] = (ending, at, detail)

    for e in events:
        if e.key != job.id:
            # An incarnation's row: CrashWorker ends its attempts with no outcome in flight.
            if e.action == Action.CRASH_WORKER:
                w = str(e.params.get("w", ""))
                by_itself = e.actor == w
                for t, seen in found.items():
                    if seen.get("worker") == w and t not in pending and seen["authorized"] <= e.at:
                        detail = "" if by_itself else f"by {e.actor}"
                        kind = Ending.SHUTDOWN if by_itself else Ending.DECLARED_DOWN
                        end(t, kind, e.at, detail)
            continue
        token = _token(e)
        if e.action == Action.AUTHORIZE_ATTEMPT and e.result.isdigit():
            a = found.setdefault(int(e.result), {"token": int(e.result)})
            a.setdefault("worker", str(e.params.get("w", "")))
            if not a.get("authorized"):
                a["authorized"] = e.at
            continue
        if e.action == Action.FINALIZE_CANCEL:
            for t in sorted(found, reverse=True)[:1]:  # the authority: the latest attempt
                end(t, Ending.CANCELLED, e.at)
            continue
        if token is None or token not in found:
            continue
        a = found[token]
        ran = e.facts.get("ran")
        if isinstance(ran, int | float):
            if not a.get("activated"):
                a["activated"] = e.at - float(ran)
            a["ran"] = float(ran)
        if e.action == Action.SEND_OUTCOME:
            a["outcome"] = OUTCOME_NAMES.get(str(e.params.get("outcome")))
            pending.add(token)
        elif e.action in ACCEPTED:
            pending.discard(token)
            error = str(e.facts.get("error", ""))
            ending = ACCEPTED[e.action]
            if ending is Ending.RETRYABLE and error.startswith(TIMED_OUT):
                ending = Ending.TIMED_OUT
            end(token, ending, e.at, error)
        elif e.action == Action.REJECT_OUTCOME:
            pending.discard(token)
            rejected.setdefault(token, e.at)
        elif e.action == Action.REAP_LOST_ATTEMPT:
            end(token, Ending.REAPED, e.at)
        elif e.action == "" and "stop" in e.facts:
            stopped.setdefault(token, (e.at, str(e.facts["stop"])))
    out = []
    for token in sorted(found):
        a = found[token]
        if token in ended:
            ending, at, detail = ended[token]
        elif token in stopped:
            ending, (at, detail) = Ending.STOPPED, stopped[token]
        elif token in rejected:
            ending, at, detail = Ending.REJECTED, rejected[token], ""
        else:
            ending, at, detail = Ending.RUNNING, 0.0, ""
        out.append(
            Attempt(
                token,
                str(a.get("worker", "")),
                float(a.get("authorized") or 0.0),
                float(a.get("activated") or 0.0),
                at,
                a.get("ran"),
                a.get("outcome"),
                ending,
                detail,
                int(a.get("resumed_from") or 0),
            )
        )
    return out


def _merged(log: Iterable[LogEntry], job: str) -> list[LogEntry]:
    """The job's and its incarnations' log rows in one order: each subject's rows in their
    commit order (``version``), merged by time; at equal times (a coarse clock) an actor's
    rows in its own order (``actor_seq``), else the job's first."""
    streams: dict[str, list[LogEntry]] = {}
    for e in log:
        streams.setdefault(e.key, []).append(e)
    for rows in streams.values():
        rows.sort(key=lambda e: e.version)
    out: list[LogEntry] = []
    while streams:
        heads = [rows[0] for rows in streams.values()]

        def first(a: LogEntry, b: LogEntry) -> bool:
            if a.at != b.at:
                return a.at < b.at
            if a.actor == b.actor:
                return a.actor_seq < b.actor_seq
            return a.key == job

        pick = heads[0]
        for h in heads[1:]:
            if first(h, pick):
                pick = h
        out.append(pick)
        rows = streams[pick.key]
        rows.pop(0)
        if not rows:
            del streams[pick.key]
    return out


def _token(e: LogEntry) -> int | None:
    text = e.params.get("a")
    if not isinstance(text, str):
        return None
    try:
        a = AttemptId.parse(text)
    except ValueError:
        return None
    return a.token if a.job == e.key else None


class StagedProgress(Protocol):
    """What status asks the target: the progress an attempt has staged."""

    def info(self, actor: Any, a: AttemptId) -> StageInfo | None: ...


@attrs.frozen
class JobStatus:
    """One job as ``remora jobs status`` shows it (its JSON is :meth:`to_json`)."""

    job: JobRow
    attempts: int
    #: The current attempt's worker and authorization time (none before the first).
    worker: str | None
    attempt_started: float
    #: The progress the current attempt has staged, when the target says (running jobs).
    staged: int | None
    #: The durable store's clock when read (elapsed times of unfinished jobs).
    now: float
    result: str | None = None

    @property
    def error(self) -> str | None:
        """The error of the job's current attempt only: the durable row keeps the last
        failure's message, which belongs to the current attempt while the job is failed
        or waits for its retry (``Queued``, ``RetryWait``), and to an earlier one once a
        retry runs or succeeded."""
        j = self.job
        if j.phase in (Phase.FAILED, Phase.QUEUED, Phase.RETRY_WAIT) and j.error:
            return j.error
        return None

    @property
    def elapsed(self) -> float | None:
        """From the first attempt's authorization to the end (or now, while unfinished)."""
        j = self.job
        if not j.started_at:
            return None
        end = j.finished_at or self.now
        return round(max(end - j.started_at, 0.0), 3)

    @property
    def waiting(self) -> float | None:
        """How long a queued job has waited to be taken (since it became queued or due)."""
        j = self.job
        if j.phase is not Phase.QUEUED or not j.queued_at:
            return None
        return round(max(self.now - max(j.queued_at, j.due), 0.0), 3)

    def to_json(self) -> dict[str, Any]:
        j = self.job
        return {
            "id": j.id,
            "handler": j.handler,
            "queue": j.queue,
            "priority": j.priority,
            "phase": j.phase.value,
            "cancel_requested": j.cancel_requested,
            "timeout": j.timeout or None,
            "attempts": self.attempts,
            "max_attempts": j.max_attempts,
            "attempt": j.current_token or None,
            "worker": self.worker,
            "submitted": iso(j.submitted_at),
            "due": iso(j.due),
            "started": iso(j.started_at),
            "attempt_started": iso(self.attempt_started),
            "finished": iso(j.finished_at),
            "elapsed": self.elapsed,
            "waiting": self.waiting,
            "progress": {
                "checkpoint": j.checkpoint if j.checkpoint_valid else 0,
                "max": j.max_progress,
                "staged": self.staged,
            },
            "result": self.result,
            "error": self.error,
        }


def statuses(
    durable: DurableStore,
    target: StagedProgress | None,
    result: Any = None,
    wanted: Iterable[str] = (),
    *,
    active_only: bool = False,
) -> list[JobStatus]:
    """Every job's status (or those of ``wanted``; with ``active_only`` those not yet
    terminal — a read that does not grow with the history), read from the durable store in
    one snapshot; ``target``: the staged progress of running jobs; ``result(job_id)``: a
    succeeded job's result (bytes)."""
    snap = durable.active_snapshot(NEVER) if active_only else durable.snapshot()
    now = durable.clock_now()
    keep = set(wanted)
    by_job: dict[str, list[AttemptRow]] = {}
    for a in snap.attempts:
        by_job.setdefault(a.job, []).append(a)
    out = []
    for job in snap.jobs:
        if keep and job.id not in keep:
            continue
        mine = {a.token: a for a in by_job.get(job.id, [])}
        current = mine.get(job.current_token)
        staged = None
        if target is not None and current is not None and job.phase is Phase.RUNNING:
            try:
                info = target.info(None, current.id)
            except (RemoraError, OSError):
                info = None
            staged = max(info.progress, current.initial_progress) if info else None
        text = None
        if result is not None and job.phase is Phase.SUCCEEDED:
            data = result(job.id)
            text = None if data is None else bytes(data).decode(errors="replace")
        out.append(
            JobStatus(
                job,
                len(mine),
                current.worker if current is not None else None,
                current.authorized_at if current is not None else 0.0,
                staged,
                now,
                text,
            )
        )
    return out


@attrs.frozen
class History:
    """A job and every attempt of it (``remora jobs history JOB``)."""

    job: JobRow
    attempts: tuple[Attempt, ...]
    now: float

    def to_json(self) -> dict[str, Any]:
        j = self.job
        return {
            "id": j.id,
            "handler": j.handler,
            "queue": j.queue,
            "phase": j.phase.value,
            "submitted": iso(j.submitted_at),
            "finished": iso(j.finished_at),
            "attempts": [a.to_json() for a in self.attempts],
        }


def history(durable: DurableStore, job_id: str) -> History:
    """``job_id``'s attempts and why each ended (raises
    :class:`~remora.errors.UnknownJob` for a job that does not exist)."""
    locked = durable.rows_of(job_id)
    rows = sorted(locked.attempts.values(), key=lambda r: r.token)
    subjects = {job_id, *(f"worker:{r.worker}" for r in rows)}
    log = durable.log_of(subjects)
    return History(locked.job, tuple(attempts_of(locked.job, rows, log)), locked.now)


__all__ = [
    "ACCEPTED",
    "Attempt",
    "Ending",
    "History",
    "JobStatus",
    "StagedProgress",
    "TIMED_OUT",
    "attempts_of",
    "history",
    "iso",
    "statuses",
]
