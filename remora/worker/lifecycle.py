"""The production worker lifecycle: fenced partition ownership over injected I/O.

:class:`Lifecycle` holds the assignment mutex, the saved ownership tokens (epoch and local
frontier per partition), an independent cancellation context, the source validator, the
state store and the clock.  The same object runs in production (monotonic clock, real
waits, SQLite/PostgreSQL) and under simulation (logical clock, memory I/O with faults);
nothing in it knows which.

Method table (the seed's rules):

========  ==========================================================================
assign    validate the source, claim synchronously, read back epoch/frontier, retain
          only a compatible token
seek      reobserve under the retained token; return the durable frontier without
          installing another epoch (no saved owner: fenced)
process   submit one record with the saved epoch/frontier; resolve an unknown commit
          before updating the local frontier
revoke    wait for guarded work and clear the complete eager assignment
stop      cancel independently of the mutex so blocked I/O can finish; a stopped
          lifetime never resumes
========  ==========================================================================

Guards: one mutex covers validation and each synchronous I/O call; the operation budget
starts *before* waiting for the mutex; any failure retires the lifetime before the mutex is
released; a stopped or retired lifetime rejects ``assign``/``seek``/``process`` without I/O.

Retries: at most ``retry.max_calls`` calls per operation, ``retry.waits`` between them,
waited on the injected clock (:meth:`Context.sleep`); cancellation is re-checked after every
wakeup before another call.  Unknown results:

* claim — reobserve, then make a *fresh* claim only while the context is live (reading an
  epoch does not prove this caller installed it, so the read is never adopted);
* process — reobserve: same epoch and frontier = offset+1 proves completion; same epoch and
  the original frontier permits retrying the same record; anything else fences the caller.

A recovery read that cannot complete (:class:`UnresolvedRead`) retires the lifetime rather
than allowing another write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from remora.clock import Clock, MonotonicClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import (
    Canceled,
    DeadlineExceeded,
    Fenced,
    InvalidInput,
    LifetimeRetired,
    RemoraError,
    RetriesExhausted,
    Unavailable,
    UnknownResult,
    UnresolvedRead,
)
from remora.source.log import SourceValidator
from remora.store.base import OwnershipStore, Token
from remora.worker.retry import DEFAULT_RETRY, RetryPolicy

T = TypeVar("T")

PRODUCTION_BUDGET = 20.0
"""Seconds a guarded lifecycle call may take, including the wait for the mutex."""


class Lifecycle:
    """One worker lifetime's ownership of source partitions (see the module docstring)."""

    def __init__(
        self,
        store: OwnershipStore,
        source: SourceValidator,
        *,
        clock: Clock | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        budget: float = PRODUCTION_BUDGET,
        name: str = "lifetime",
    ) -> None:
        self.store = store
        self.source = source
        self.clock: Clock = clock or MonotonicClock()
        self.retry = retry
        self.budget = budget
        self.name = name
        self._mutex = threading.Lock()
        self._ctx = Context(self.clock)
        self._owned: dict[int, Token] = {}
        self._stopped = False
        self._retired: RemoraError | None = None

    # -- inspection -------------------------------------------------------------------
    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def retired(self) -> RemoraError | None:
        """The error that retired this lifetime, if any."""
        return self._retired

    @property
    def live(self) -> bool:
        return not self._stopped and self._retired is None

    def owned(self) -> dict[int, Token]:
        """Saved tokens (epoch and local frontier) by partition."""
        return dict(self._owned)

    # -- the method table -------------------------------------------------------------
    def assign(self, partitions: Iterable[int]) -> dict[int, Token]:
        """Take ownership of ``partitions`` (eager assignment); returns the retained tokens."""
        wanted = list(partitions)

        def run(ctx: Context) -> dict[int, Token]:
            tokens: dict[int, Token] = {}
            for partition in wanted:
                self._validate(ctx, partition)
                token = self._claim(ctx, partition)
                previous = self._owned.get(partition)
                if token.epoch < 1 or (previous is not None and token.epoch <= previous.epoch):
                    raise Fenced(f"partition {partition}: claim returned incompatible {token}")
                ctx.check()
                self._owned[partition] = token
                tokens[partition] = token
            return tokens

        return self._guarded("assign", run)

    def seek(self, partition: int) -> int:
        """Re-read the durable frontier under the retained token and return it."""

        def run(ctx: Context) -> int:
            saved = self._owned.get(partition)
            if saved is None:
                raise Fenced(f"partition {partition}: seek without a saved owner")
            seen = self._call(ctx, "observe", lambda: self.store.observe(partition, ctx))
            if seen.epoch != saved.epoch:
                raise Fenced(
                    f"partition {partition}: epoch {seen.epoch} installed, we hold {saved.epoch}"
                )
            ctx.check()
            self._owned[partition] = Token(saved.epoch, seen.frontier)
            return seen.frontier

        return self._guarded("seek", run)

    def process(self, partition: int, record: SourceRecord) -> Token:
        """Apply one record under the saved token; returns the new durable token."""

        def run(ctx: Context) -> Token:
            saved = self._owned.get(partition)
            if saved is None:
                raise Fenced(f"partition {partition}: process without a saved owner")
            if record.offset < saved.frontier:
                raise InvalidInput(
                    f"partition {partition}: offset {record.offset} is behind the local "
                    f"frontier {saved.frontier} (already processed; seek after assign)"
                )
            done = self._process(ctx, partition, saved, record)
            self._owned[partition] = done
            return done

        return self._guarded("process", run)

    def revoke(self) -> None:
        """Wait for guarded work, then clear the whole eager assignment.  No I/O."""
        with self._mutex:
            self._owned.clear()

    def stop(self) -> None:
        """Cancel this lifetime.  Does not take the mutex: blocked I/O is interrupted, and
        the guarded call that was running retires the lifetime as it unwinds."""
        self._stopped = True
        self._ctx.cancel(Canceled(f"{self.name} stopped"))

    # -- guards -----------------------------------------------------------------------
    def _admit(self, operation: str) -> None:
        """Reject a callback to a stopped or retired lifetime, before any I/O."""
        if not self.live:
            raise LifetimeRetired(f"{self.name} is {self._why_not_live()}; {operation} rejected")

    def _guarded(self, operation: str, run: Callable[[Context], T]) -> T:
        budget = self.budget
        ctx = self._ctx.child(budget=budget)  # the budget includes the mutex wait
        # When the budget runs out the operation's context is canceled, which interrupts
        # I/O that is blocked (a lock wait, an unanswered server) through its callbacks.
        # The error is built only then: almost every call finishes within its budget.
        disarm = self.clock.call_later(budget, lambda: ctx.cancel(self._expired(operation, budget)))
        try:
            remaining = ctx.remaining()
            timeout = -1.0 if remaining is None else max(0.0, remaining)
            if not self._mutex.acquire(timeout=timeout):
                # Retired without the mutex: its tokens go now, and again when the call
                # that holds the mutex finishes (it may save one meanwhile).
                error = DeadlineExceeded(f"{self.name}: budget spent waiting for the mutex")
                self._retire(error)
                raise error
            try:
                self._admit(operation)
                try:
                    return run(ctx)
                except Exception as exc:
                    # Retire before the mutex is released, whatever went wrong.
                    self._retire(exc if isinstance(exc, RemoraError) else RemoraError(repr(exc)))
                    raise
            finally:
                if self._retired is not None:  # retired while this call held the mutex
                    self._retire(self._retired)
                self._mutex.release()
        finally:
            disarm()
            ctx.close()

    def _expired(self, operation: str, budget: float) -> DeadlineExceeded:
        return DeadlineExceeded(f"{self.name}: {operation} exceeded its {budget} s budget")

    def _why_not_live(self) -> str:
        if self._retired is not None:
            return f"retired ({type(self._retired).__name__}: {self._retired})"
        return "stopped"

    def _retire(self, error: RemoraError) -> None:
        if self._retired is None:
            self._retired = error
        self._owned.clear()

    def _before_call(self, ctx: Context, call: int) -> None:
        """Gate every I/O call: before a retry (``call`` > 1) wait first; then, and only
        then, check cancellation — so a stop that lands during the wait prevents the call."""
        if call > 1:
            ctx.sleep(self.retry.wait_before(call))
        ctx.check()

    def _call(self, ctx: Context, operation: str, io: Callable[[], T]) -> T:
        """Run ``io`` with the retry policy for temporary unavailability."""
        last: Unavailable | None = None
        for call in range(1, self.retry.max_calls + 1):
            self._before_call(ctx, call)
            try:
                return io()
            except Unavailable as exc:
                last = exc
        raise RetriesExhausted(operation, self.retry.max_calls, last)

    def _validate(self, ctx: Context, partition: int) -> None:
        self._call(ctx, "validate", lambda: self.source.validate(partition, ctx))

    def _recovery_read(self, ctx: Context, partition: int) -> Token:
        try:
            return self._call(ctx, "observe", lambda: self.store.observe(partition, ctx))
        except (RetriesExhausted, Canceled) as exc:
            raise UnresolvedRead(f"partition {partition}: recovery read failed: {exc}") from exc

    def _claim(self, ctx: Context, partition: int) -> Token:
        last: RemoraError | None = None
        for call in range(1, self.retry.max_calls + 1):
            self._before_call(ctx, call)  # a fresh claim only while the context is live
            try:
                return self.store.claim(partition, ctx)
            except Unavailable as exc:
                last = exc
            except UnknownResult as exc:
                last = exc
                self._recovery_read(ctx, partition)  # read, but never adopt, the epoch
        raise RetriesExhausted("claim", self.retry.max_calls, last)

    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        last: RemoraError | None = None
        for call in range(1, self.retry.max_calls + 1):
            self._before_call(ctx, call)
            try:
                return self.store.process(partition, saved, record, ctx)
            except Unavailable as exc:
                last = exc
            except UnknownResult as exc:
                last = exc
                seen = self._recovery_read(ctx, partition)
                if seen.epoch == saved.epoch and seen.frontier == record.offset + 1:
                    return seen  # the unknown commit happened
                if seen.epoch == saved.epoch and seen.frontier == saved.frontier:
                    continue  # it did not: retry the same record
                raise Fenced(
                    f"partition {partition}: after an unknown commit read epoch {seen.epoch} "
                    f"frontier {seen.frontier}; held epoch {saved.epoch} frontier "
                    f"{saved.frontier} for offset {record.offset}"
                ) from exc
        raise RetriesExhausted("process", self.retry.max_calls, last)


__all__ = [
    "PRODUCTION_BUDGET",
    "Lifecycle",
]
