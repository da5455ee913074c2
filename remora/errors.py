"""Typed exceptions shared by every Remora package.

Every failure Remora reports is an instance of :class:`RemoraError`.  The hierarchy is
deliberately shallow: callers branch on the *kind* of failure (fenced, unavailable,
unknown result, canceled, retired, not enabled), never on message text.  The stream worker's
and the job runtime's errors both live here, so one ``except`` clause (and the command
line's exit-code table) covers every package.
"""

from __future__ import annotations


class RemoraError(Exception):
    """Base class of every error raised by Remora."""


class InvalidInput(RemoraError):
    """A caller supplied a value Remora cannot accept (bad record, bad file, bad flag)."""


class Canceled(RemoraError):
    """The operation's context was canceled before or while it ran."""


class DeadlineExceeded(Canceled):
    """The operation's budget ran out (waiting for the mutex counts against it)."""


class StoreError(RemoraError):
    """A state-store call did not succeed."""


class Fenced(StoreError):
    """The caller's ownership token is stale: another epoch owns the partition, or the
    caller's frontier is not the durable one.  Never retried."""


class Unavailable(StoreError):
    """Temporary unavailability: the call had no effect and may be retried."""


class UnknownResult(StoreError):
    """The call's effect may or may not have been applied (e.g. a lost COMMIT reply).

    Resolved only by re-reading durable state; never treated as success or as failure."""


class StorageFailed(StoreError):
    """The store's storage refused a write (no space left on device, an I/O error): the
    call had no effect (its transaction rolled back), and calling again will not help until
    the cause is fixed.  The message names the file (or server) and the cause."""


class StoreNotWritable(StorageFailed, InvalidInput):
    """The store cannot be written at all (a read-only filesystem, permission denied): a
    rejected store, like a bad path (exit 2).  The message names the file and the cause."""


class SourceError(RemoraError):
    """The source log rejected a request (unknown partition, validation failure)."""


class LifecycleError(RemoraError):
    """A lifecycle call failed; the lifetime is retired when this is raised from a call."""


class LifetimeRetired(LifecycleError):
    """The lifetime was stopped or retired earlier; the call was rejected without any I/O."""


class RetriesExhausted(LifecycleError):
    """An I/O operation stayed unavailable (or unresolved) for the whole retry budget."""

    def __init__(self, operation: str, calls: int, last: BaseException | None) -> None:
        super().__init__(f"{operation}: gave up after {calls} calls ({last})")
        self.operation = operation
        self.calls = calls
        self.last = last


class UnresolvedRead(LifecycleError):
    """A recovery read after an unknown result could not be completed.

    The caller cannot tell whether its write happened, so it retires instead of writing."""


class Unseeked(SourceError):
    """A fetch was requested for a partition whose cursor was never positioned by a seek."""


# -- the job runtime (remora.jobs) ------------------------------------------------------------


class JobError(RemoraError):
    """Base of the job runtime's errors."""


class NotEnabled(JobError):
    """The spec action's guard is false: the store refused the step and changed nothing."""


class UnknownJob(JobError):
    """No job with this id exists in the durable store."""


class WorkerDown(JobError):
    """The incarnation is down (declared down, shut down, or its process is gone): it takes
    no more steps."""


class OutageExceeded(JobError):
    """A store stayed unavailable for longer than the worker's outage budget
    (``--outage-budget``): the worker gives up (one line, exit 1)."""


class UnknownHandler(InvalidInput):
    """A job names a handler nobody registered (or a worker was started without any)."""


__all__ = [
    "RemoraError",
    "InvalidInput",
    "Canceled",
    "DeadlineExceeded",
    "StoreError",
    "Fenced",
    "Unavailable",
    "UnknownResult",
    "SourceError",
    "LifecycleError",
    "LifetimeRetired",
    "RetriesExhausted",
    "UnresolvedRead",
    "Unseeked",
    "JobError",
    "NotEnabled",
    "UnknownJob",
    "WorkerDown",
    "OutageExceeded",
    "UnknownHandler",
]
