"""Attempt settlement: after a handler returns (or gives up), send and process its outcome,
or stop cooperatively; then record the stop and release the lease.

Why a module of its own: settlement is what the production loop's attempts do after their
handler, whatever runs the handler (a thread, a child process: :mod:`remora.jobs.executor`),
and a later completer may batch it; each of its steps is retried by one rule — the worker
side's :class:`~remora.worker.retry.RetryPolicy`, the worker's own (:attr:`Worker.retry
<remora.jobs.worker.Worker.retry>`: the outage budget's in ``remora jobs worker``,
:func:`remora.worker.outage.outage_policy`): a step whose store is unavailable is called
again after a pause, a bounded number of times (:func:`ride_out`).  An unknown result was
already resolved by re-reading, so a retry is never blind: a step that did happen is
refused by its guard.  The handler's own calls (:class:`~remora.jobs.attempt.AttemptContext`)
ride out an outage by the same rule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import attrs

from remora.errors import NotEnabled, RemoraError, Unavailable, UnknownResult, WorkerDown
from remora.jobs.handlers import describe
from remora.jobs.model import AttemptId, Outcome
from remora.jobs.worker import EXECUTING, STEP_RETRY, STOPPED, Worker
from remora.worker.retry import RetryPolicy

T = TypeVar("T")

#: The default retry of a settlement step (:data:`~remora.jobs.worker.STEP_RETRY`).
SETTLE_RETRY = STEP_RETRY

#: Seconds between two tries of ``CooperativeStop`` while a settled attempt waits for its
#: stop condition.
STOP_POLL = 0.05


def ride_out(w: Worker, step: Callable[[], T], policy: RetryPolicy | None = None) -> T:
    """``step()``, called again after a pause while its store is unavailable (or its
    result unknown), under ``policy`` (default: the worker's, :attr:`Worker.retry`); the
    last failure is raised once the policy is spent, :class:`~remora.errors.WorkerDown`
    when the worker went down meanwhile."""
    chosen = w.retry if policy is None else policy
    last: Unavailable | UnknownResult | None = None
    for call in range(1, chosen.max_calls + 1):
        if call > 1:
            w.ctx.sleep(chosen.wait_before(call))
        if not w.up:
            raise WorkerDown(f"worker {w.id} is down")
        try:
            return step()
        except (Unavailable, UnknownResult) as exc:
            last = exc
    assert last is not None
    raise last


def retry_step(w: Worker, step: Callable[[], Any], policy: RetryPolicy | None = None) -> Any:
    """:func:`ride_out` for a settlement step: its result (``True`` for ``None``), or
    ``None`` when it was not enabled, the worker went down, or the store stayed
    unavailable for the whole policy."""
    try:
        result = ride_out(w, step, policy)
    except (Unavailable, UnknownResult, NotEnabled, WorkerDown):
        return None
    return True if result is None else result


def quietly(fn: Callable[[], Any]) -> Any:
    """``fn()``, or ``None`` when it failed with a :class:`~remora.errors.RemoraError` (a
    store unavailable, a step not enabled): the loop tries again on a later turn."""
    try:
        return fn()
    except RemoraError:
        return None


class Settle(Protocol):
    """Settles an attempt after its handler (:func:`settle` by default; a batching
    completer may queue the outcome and commit several per transaction instead)."""

    def __call__(
        self,
        w: Worker,
        a: AttemptId,
        outcome: Outcome | None,
        error: str,
        shutting_down: Callable[[], bool] = ...,
    ) -> None: ...


def settle(
    w: Worker,
    a: AttemptId,
    outcome: Outcome | None,
    error: str,
    shutting_down: Callable[[], bool] = lambda: False,
) -> None:
    """After the handler: send and process the outcome — one transaction, with the
    handler's deferred output staged in it (:func:`complete`) — or stop cooperatively; then
    record the stop and release the lease (each step under :func:`retry_step`).

    Without a stop condition yet (the handler gave up on its own) the worker waits: it no
    longer renews the lease, so the lease expires within a lease period — unless the worker
    shuts down first, which stops the attempt anyway (``CrashWorker``)."""
    local = w.attempts[a]
    # A deferred stage goes with a success only (a timeout turned it into a failure).
    stage = local.deferred_stage if outcome is Outcome.SUCCESS else None
    local.deferred_stage = None
    sending = outcome is not None and local.state == EXECUTING and not local.cancel_seen
    if sending:
        assert outcome is not None
        complete(w, a, outcome, error, stage)
    stop_and_release(w, a, shutting_down)


def stop_and_release(w: Worker, a: AttemptId, shutting_down: Callable[[], bool]) -> None:
    """The end of a settlement: wait for a stop condition while the attempt still executes
    (cooperative stop), then record the stop and release the lease (:func:`release`)."""
    local = w.attempts[a]
    while local.state == EXECUTING and not local.finished and w.up and not shutting_down():
        if retry_step(w, lambda: w.cooperative_stop(a)):
            break
        w.ctx.sleep(STOP_POLL)
    release(w, a)


def complete(w: Worker, a: AttemptId, outcome: Outcome, error: str, stage: bytes | None) -> None:
    """Send and accept ``outcome`` in one transaction (:meth:`Worker.complete
    <remora.jobs.worker.Worker.complete>`), with the deferred ``stage`` written first.  A
    refused stage write ends the attempt as the handler's own failure to stage would: a
    retryable failure, sent and accepted the same way.  Under :func:`ride_out`; given up
    (nothing sent) when the store stays unavailable or the worker went down — the lease is
    no longer renewed, so the reconciler reaps the attempt and retries the job."""
    try:
        ride_out(w, lambda: w.complete(a, outcome, error, stage))
    except NotEnabled as exc:
        if stage is not None:
            reason = describe(exc)
            retry_step(w, lambda: w.complete(a, Outcome.RETRYABLE, reason))
    except (Unavailable, UnknownResult, WorkerDown):
        pass


#: The seconds a batching completer holds a finished attempt's completion for others to
#: join its transaction (while other attempts of the worker still execute): a few
#: milliseconds, a small fraction of a job's latency.
FLUSH_EVERY = 0.002


class GivenUp(RemoraError):
    """A batch ridden out to the end of the retry policy: nothing was sent for its rows."""


@attrs.define
class _Pending:
    """A finished attempt's completion waiting in a :class:`BatchCompleter`."""

    a: AttemptId
    outcome: Outcome
    error: str
    stage: bytes | None
    #: Once flushed: the action ``ProcessOutcome`` took, or why nothing was sent.
    result: str | BaseException | None = None
    #: Set once :attr:`result` is.
    done: threading.Event = attrs.field(factory=threading.Event)


class BatchCompleter:
    """A :class:`Settle` that commits up to ``size`` finished attempts' completions
    (``SendOutcome`` + ``ProcessOutcome``, their deferred stages with them) per durable
    transaction (:meth:`Worker.complete_batch
    <remora.jobs.worker.Worker.complete_batch>`, each row guarded by its own attempt
    token: a stale attempt in a batch changes nothing and the others still commit).

    A finished attempt's completion waits in :attr:`pending` until ``size`` are pending
    or, while other attempts of the worker still execute (they may join), for
    ``flush_every`` seconds; whichever settling thread flushes takes every pending
    completion (one per job), and each thread then goes on as :func:`settle` does (a
    refused stage becomes a retryable failure, sent on its own; the stop; the lease's
    release).  The whole batch is ridden out under the worker's retry policy; a lost
    COMMIT reply is resolved from the log for every row, so a retry is never blind."""

    def __init__(self, size: int, flush_every: float = FLUSH_EVERY) -> None:
        if size < 1:
            raise ValueError(f"a batch of {size} completions")
        self.size = size
        self.flush_every = flush_every
        self._lock = threading.Lock()
        #: The completions waiting for a flush, in arrival order.
        self.pending: dict[AttemptId, _Pending] = {}
        #: How many completions each flush committed or refused (its size): the benchmark's
        #: and the tests' view.
        self.flushed: list[int] = []

    def __call__(
        self,
        w: Worker,
        a: AttemptId,
        outcome: Outcome | None,
        error: str,
        shutting_down: Callable[[], bool] = lambda: False,
    ) -> None:
        local = w.attempts[a]
        stage = local.deferred_stage if outcome is Outcome.SUCCESS else None
        local.deferred_stage = None
        if outcome is not None and local.state == EXECUTING and not local.cancel_seen:
            self.complete(w, a, outcome, error, stage)
        stop_and_release(w, a, shutting_down)

    def complete(
        self, w: Worker, a: AttemptId, outcome: Outcome, error: str, stage: bytes | None
    ) -> None:
        """:func:`complete`, batched: queue, wait for a flush (or flush), then handle this
        attempt's own result."""
        entry = _Pending(a, outcome, error, stage)
        with self._lock:
            self.pending[a] = entry
            wait = len(self.pending) < self.size and w.executing_count() > len(self.pending)
        if wait:
            try:
                w.ctx.sleep(self.flush_every)
            except BaseException:
                # The thread is ended at its pause (its process is gone): nothing to send.
                with self._lock:
                    self.pending.pop(a, None)
                raise
        while entry.result is None:
            with self._lock:
                mine = a in self.pending
            if mine:
                self.flush(w)
            else:
                # Another thread's flush took it and is under way (perhaps riding out an
                # outage): wait for it, never spin (nor hold a lock while it pauses).
                w.ctx.sleep(self.flush_every, wake=entry.done)
        result = entry.result
        if isinstance(result, NotEnabled) and stage is not None:
            reason = describe(result)
            retry_step(w, lambda: w.complete(a, Outcome.RETRYABLE, reason))
        elif isinstance(result, (Unavailable, UnknownResult)):
            # This row's own write before the batch (a stage outside the durable store's
            # database) failed: completed on its own, as :func:`settle` would.
            complete(w, a, outcome, error, stage)

    def flush(self, w: Worker) -> None:
        """Commit the pending completions (at most ``size``, one per job) in one
        transaction, under :func:`ride_out`; each gets its result."""
        with self._lock:
            take: list[_Pending] = []
            jobs: set[str] = set()
            for entry in self.pending.values():
                if len(take) < self.size and entry.a.job not in jobs:
                    take.append(entry)
                    jobs.add(entry.a.job)
            for entry in take:
                del self.pending[entry.a]
        if not take:
            return
        finished = [(e.a, e.outcome, e.error, e.stage) for e in take]
        results: list[str | BaseException]
        try:
            results = list(ride_out(w, lambda: w.complete_batch(finished)))
        except (Unavailable, UnknownResult, WorkerDown, NotEnabled) as exc:
            # Given up (nothing sent): the leases are no longer renewed, the reconciler
            # reaps the attempts and retries the jobs.
            results = [GivenUp(describe(exc))] * len(take)
        except BaseException as exc:
            results = [exc] * len(take)  # no thread waits forever on a failed flush
            raise
        finally:
            if len(results) == len(take):
                with self._lock:
                    self.flushed.append(len(take))
                for entry, result in zip(take, results, strict=True):
                    entry.result = result
                    entry.done.set()


def release(w: Worker, a: AttemptId) -> None:
    """Record a stopped attempt's stop, then release the lease of a stopped or finished
    one."""
    local = w.attempts[a]
    if local.state == STOPPED:
        retry_step(w, lambda: w.record_stop(a))
    if local.state == STOPPED or local.finished:
        retry_step(w, lambda: w.release_lease(a))


__all__ = [
    "FLUSH_EVERY",
    "SETTLE_RETRY",
    "BatchCompleter",
    "STOP_POLL",
    "Settle",
    "complete",
    "quietly",
    "release",
    "retry_step",
    "ride_out",
    "settle",
    "stop_and_release",
]
