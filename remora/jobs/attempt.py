"""One executing attempt in the production loop: the handler's view of it
(:class:`AttemptContext`, the :class:`~remora.jobs.handlers.JobContext` a handler is given)
and the loop's side of it (tend the lease, notice a cancel, end an overdue attempt).

Why apart from the worker's steps: the steps (:mod:`remora.jobs.worker`) are the spec's,
taken one at a time by any scheduler; an attempt context is what the *production* loop
builds around one attempt whose handler runs somewhere else (:mod:`remora.jobs.executor`).
A handler reaches the worker only through the :class:`JobContext` API (``advance``,
``stage``, ``checkpoint``, ``put_secret``, ``cancelled`` …), so an executor may run it in
another process that forwards those calls here (:mod:`remora.jobs.processes`).  Each of
those calls rides out a store outage by the settlement's rule
(:func:`~remora.jobs.settlement.ride_out`).

An attempt may run for at most its timeout: the smaller of its handler's
(``@handler(..., timeout=)``) and its job's (``jobs submit --timeout``).  Overrun, it is
asked to stop first (``ctx.cancelled`` becomes true), and ``cancel_grace`` later the loop
ends it as a retryable failure — as it does an attempt whose cancel (or lost lease) it
noticed, with ``CooperativeStop`` — and its executor ends the handler where it can.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from remora.errors import (
    NotEnabled,
    RemoraError,
    Unavailable,
    UnknownHandler,
    UnknownResult,
    WorkerDown,
)
from remora.jobs.handlers import HandlerResult, call_handler, describe, encode_output
from remora.jobs.model import AttemptId, Outcome
from remora.jobs.settlement import (
    BatchCompleter,
    Settle,
    quietly,
    ride_out,
    settle,
)
from remora.jobs.worker import EXECUTING, STOPPED, LocalAttempt, Worker


class AttemptContext:
    """The handler's view of its attempt (see :class:`remora.jobs.handlers.JobContext`)."""

    def __init__(self, worker: Worker, a: AttemptId, *, complete: Settle = settle) -> None:
        self.worker = worker
        self.attempt = a
        self.job_id = a.job
        self.token = a.token
        #: Settles the attempt once its handler returned (:func:`settle` by default).
        self.complete = complete
        row = worker.rows.pop(a, None) or worker.stores.durable.job(a.job)
        self.handler = row.handler
        #: The payload as stored (JSON text): what a child process is sent.
        self.payload_text = row.payload
        self.payload: Any = json.loads(row.payload)
        self.max_progress = row.max_progress
        self.stop_requested = False
        self._resumed = worker.attempts[a].progress > 0
        self._lock = threading.Lock()
        #: When the loop last tended this attempt (it was activated just now).
        self.tended = worker.stores.clock.now()
        self.started = self.tended
        registry = worker.registry
        #: Seconds the handler may run before the attempt ends as a retryable failure: the
        #: smaller of the handler's and the job's own (module docstring).
        limits = [registry.timeout(self.handler) if registry is not None else None]
        limits.append(row.timeout or None)
        self.timeout = min((t for t in limits if t is not None), default=None)
        #: The attempt overran its timeout: asked to stop, it ends as a retryable failure.
        self.expired = False
        #: The loop stopped waiting on this handler (its thread is left behind): the
        #: thread settles nothing when it returns.
        self.abandoned = False
        self._settling = False
        self._settle_lock = threading.Lock()
        self._stop_seen_at: float | None = None
        self._next_try = 0.0
        #: The loop's end of this attempt under way (:meth:`end_from_loop`): the steps it
        #: still has to take, each tried once a turn.
        self._ending: list[str] | None = None

    @property
    def local(self) -> LocalAttempt:
        return self.worker.attempts[self.attempt]

    # -- the handler's side (JobContext) -------------------------------------------------------
    @property
    def progress(self) -> int:
        return self.local.progress

    @property
    def resumed(self) -> bool:
        return self._resumed

    @property
    def resumed_data(self) -> bytes | None:
        if not self.local.progress:
            return None
        return self.worker.stores.staged_data(self.attempt, self.local.progress)

    @property
    def cancelled(self) -> bool:
        return (
            self.stop_requested
            or self.expired
            or self.local.cancel_seen
            or self.local.state != EXECUTING
        )

    def advance(self, amount: int, data: bytes | str | None = None) -> None:
        raw = encode_output(data or b"")
        w, a = self.worker, self.attempt
        with self._lock:
            ride_out(w, lambda: w.advance(a, amount, raw))
            quietly(lambda: w.report_progress(a))

    def stage(self, output: Any) -> None:
        raw = encode_output(output)
        w, a = self.worker, self.attempt
        with self._lock:
            ride_out(w, lambda: w.advance(a, self.max_progress, raw))

    def checkpoint(self) -> None:
        w, a = self.worker, self.attempt
        with self._lock:
            ride_out(w, lambda: w.checkpoint(a))

    def put_secret(self, secret: bytes | str) -> int:
        raw = secret.encode() if isinstance(secret, str) else secret
        w, a = self.worker, self.attempt
        return ride_out(w, lambda: w.put_secret(a, raw)).sequence

    # -- running the handler ---------------------------------------------------------------------
    def run_handler(self) -> HandlerResult:
        """Run the attempt's handler here and classify how it ended
        (:func:`~remora.jobs.handlers.call_handler`), then :meth:`conclude`."""
        try:
            assert self.worker.registry is not None
            fn = self.worker.registry.get(self.handler)
        except UnknownHandler as exc:
            return HandlerResult(Outcome.PERMANENT, str(exc))
        local = self.local
        result, output = call_handler(fn, self, lambda: local.progress >= self.max_progress)
        return self.conclude(result, output)

    def conclude(self, result: HandlerResult, output: bytes | None) -> HandlerResult:
        """Stage a successful handler's ``output`` (already encoded; ``None``: it staged
        it itself) — unless the attempt stopped executing or overran its timeout — and
        return the result to settle: a retryable failure when staging failed."""
        local = self.local
        if (
            result.outcome is Outcome.SUCCESS
            and output is not None
            and not self.expired
            and local.state == EXECUTING
            and local.progress < self.max_progress
        ):
            if self.complete is settle or isinstance(self.complete, BatchCompleter):
                # The default settlement stages it in the transaction that sends and
                # accepts the outcome (one commit fewer; a refusal there becomes the same
                # retryable failure: :func:`~remora.jobs.settlement.settle`).
                self.local.deferred_stage = output
                return result
            try:
                self.stage(output)
            except Exception as exc:  # as the handler's own failure would be
                return HandlerResult(Outcome.RETRYABLE, describe(exc))
        return result

    def finish(self, result: HandlerResult) -> None:
        """The handler is done: settle the attempt (:attr:`complete`) — unless the loop
        ended it meanwhile (a timeout, a cancel) or the worker stopped.  An attempt that
        overran its timeout ends as a retryable failure whatever its handler returned."""
        self.local.handler_done = True
        if self.expired and not self.local.cancel_seen:
            result = HandlerResult(Outcome.RETRYABLE, self.timed_out_error)
        with self._settle_lock:
            if self.abandoned:
                return
            self._settling = True
        self.complete(
            self.worker, self.attempt, result.outcome, result.error, lambda: self.stop_requested
        )

    def execute(self) -> None:
        """Run the handler and settle the attempt (an in-process executor's body)."""
        self.finish(self.run_handler())

    # -- the loop's side -------------------------------------------------------------------------
    def tend(self) -> None:
        """Called from the worker loop: renew, notice cancellation, stop if needed."""
        local = self.local
        if local.state != EXECUTING:
            return
        w = self.worker
        snap = w.stores.coordination.view(w.actor, self.job_id, (self.attempt,))
        lease = snap.leases.get(self.attempt)
        if self.job_id in snap.notices or lease is None or not lease.live:
            local.cancel_seen = True
        elif not local.outcome_sent and not local.handler_done:
            w.renew(self.attempt)

    def timed_out(self, now: float) -> bool:
        return self.timeout is not None and now - self.started >= self.timeout

    @property
    def timed_out_error(self) -> str:
        return f"timed out after {self.timeout:g}s"

    def overdue(self, now: float, cancel_grace: float) -> bool:
        """Whether the loop should stop waiting on this handler: it is still running
        ``cancel_grace`` seconds after a stop condition was noticed — a cancel, a lost
        lease, or its timeout overrun (which asks it to stop: ``ctx.cancelled``)."""
        local = self.local
        if self._ending is not None:  # the loop's end under way: its next try is due
            return now >= self._next_try
        if self._settling or self.abandoned or local.state != EXECUTING or now < self._next_try:
            return False
        if not local.cancel_seen and not self.expired and self.timed_out(now):
            self.expired = True
        if not (local.cancel_seen or self.expired):
            return False
        if self._stop_seen_at is None:
            self._stop_seen_at = now
        return now - self._stop_seen_at >= cancel_grace

    @property
    def end_pending(self) -> bool:
        """Whether the loop's end of this attempt is under way, a step of it left for a
        later turn (its store was away)."""
        return bool(self._ending)

    @property
    def end_left(self) -> tuple[str, ...]:
        """The steps of the loop's end still to take (``process``, ``stop``, ``record``,
        ``release``) and when the loop tries them next (the loop's clock): what the
        simulation's promises judge (a clean turn leaves none but a wait for a stop
        condition)."""
        return tuple(self._ending or ())

    @property
    def end_next_try(self) -> float:
        return self._next_try

    def end_from_loop(self) -> bool:
        """End the attempt without its handler (which keeps running where its executor
        left it): a timeout as a retryable failure (``SendOutcome``, ``ProcessOutcome``);
        otherwise ``CooperativeStop`` on its stop condition, the stop recorded and the
        lease released.  True when the loop may forget the attempt (its slot is free).

        Every store call here is tried once per turn, on the loop's thread: one that finds
        its store away is tried again at a later turn, a tick on, the attempt holding its
        slot meanwhile (:meth:`overdue`).  Waiting out an outage here would hold up every
        other attempt's heartbeat with it (found by the loop machine once handlers had
        timeouts of their own: a turn that rode out a lost target link for 2.45 s)."""
        w, a = self.worker, self.attempt
        with self._settle_lock:
            if self._settling or (self.abandoned and self._ending is None):
                return False
            local = self.local
            now = w.stores.clock.now()
            self._next_try = now + w.stores.config.tick_ms / 1000
            self.stop_requested = True
            if self._ending is None:
                if not local.cancel_seen and not local.outcome_sent and self.expired:
                    try:
                        w.send_outcome(a, Outcome.RETRYABLE, self.timed_out_error)
                    except RemoraError:
                        self.stop_requested = False
                        return False
                    # the outcome is durably pending: ours to process
                    self._ending = ["process", "release"]
                else:
                    try:
                        stopped = w.cooperative_stop(a)
                    except RemoraError:
                        stopped = False
                    if not stopped:
                        self.stop_requested = False
                        return False
                    self._ending = ["record", "release"]
                self.abandoned = True
            return self._end_steps()

    def _end_steps(self) -> bool:
        """The rest of the loop's end (:meth:`end_from_loop`), each step tried once: True
        once none is left.  A step its store refuses, or that the worker's going down
        makes moot, is given up as a settlement gives it up (:func:`~remora.jobs.
        settlement.retry_step`); one whose store is away is left for a later turn.  An
        outcome someone else took first is learned: processed, the attempt is stopped or
        finished; rejected (``RejectOutcome``: the job was cancelled, or its authority
        lost), it still executes and is stopped on that stop condition
        (``CooperativeStop``) before its stop is recorded and its lease released."""
        w, a, local = self.worker, self.attempt, self.local
        steps = self._ending
        assert steps is not None
        calls: dict[str, Callable[[], object]] = {
            "process": lambda: w.process_outcome(a, self.timed_out_error),
            "stop": lambda: w.cooperative_stop(a),
            "record": lambda: w.record_stop(a),
            "release": lambda: w.release_lease(a),
        }
        while steps:
            step = steps[0]
            if step == "release" and not (local.state == STOPPED or local.finished):
                steps.pop(0)  # nothing stopped or finished to release
                continue
            try:
                try:
                    done = calls[step]()
                except NotEnabled:
                    if step != "process":
                        raise
                    w.learn_outcome(a)  # taken by another (the reconciler)
                    if local.state == EXECUTING:  # rejected: the attempt goes on
                        steps[1:1] = ["stop", "record"]
                    done = True
                if step == "stop" and not done:
                    if w.up:
                        return False  # no stop condition yet: a later turn tries again
                    steps.clear()  # declared down: stopped in the spec already
                    break
            except (Unavailable, UnknownResult):
                return False
            except (NotEnabled, WorkerDown):
                pass
            steps.pop(0)
        return True

    def abandon(self) -> None:
        """The worker stops: a handler still running is left behind (it settles nothing)."""
        self.stop_requested = True
        with self._settle_lock:
            if not self._settling:
                self.abandoned = True


__all__ = ["AttemptContext", "HandlerResult"]
