"""The handler API: what a user writes.

.. code-block:: python

    from remora import jobs

    @jobs.handler("resize")
    def resize(ctx: jobs.JobContext) -> bytes:
        image = load(ctx.payload["url"])
        for step in range(ctx.progress + 1, ctx.max_progress + 1):
            if ctx.cancelled:            # cancel notice, lost lease or lost authority
                raise jobs.Cancelled()
            ctx.advance(step, partial(image, step))   # staged per attempt
            ctx.checkpoint()                          # durable: a retry resumes here
        return render(image)                          # staged as the output, then committed

A handler returns its output (``bytes``, ``str`` or a JSON-able value; ``None`` when it
already staged it with :meth:`JobContext.stage`), raises :class:`Retryable` (retried while
the attempt budget lasts) or :class:`Permanent` (fails the job at once).  Any other
exception counts as retryable.  The output becomes the job's result only if this attempt
wins the durable ``AcceptSuccess`` compare-and-swap.
"""

from __future__ import annotations

import importlib
import json
import threading
import traceback
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from remora.errors import InvalidInput, UnknownHandler
from remora.jobs.model import Outcome


class Retryable(Exception):
    """The attempt failed; the job may be retried (``WantsRetryableFailure``)."""


class Permanent(Exception):
    """The job cannot succeed (``WantsPermanentFailure``)."""


class Cancelled(Exception):
    """Raised by a handler that saw ``ctx.cancelled``: the attempt stops cooperatively."""


class JobContext(Protocol):
    """What a handler sees (implemented by :class:`remora.jobs.attempt.AttemptContext`)."""

    job_id: str
    token: int
    handler: str
    payload: Any
    max_progress: int

    @property
    def progress(self) -> int: ...

    @property
    def resumed(self) -> bool: ...

    @property
    def resumed_data(self) -> bytes | None: ...

    @property
    def cancelled(self) -> bool: ...

    def advance(self, amount: int, data: bytes | str | None = None) -> None: ...

    def stage(self, output: Any) -> None: ...

    def checkpoint(self) -> None: ...

    def put_secret(self, secret: bytes | str) -> int: ...


Handler = Callable[[JobContext], Any]


@attrs.frozen
class HandlerResult:
    """What a handler's run came to: the outcome to request (``None``: it stopped
    cooperatively, :class:`Cancelled`) and the error it reported."""

    outcome: Outcome | None
    error: str = ""


def call_handler(
    fn: Handler, ctx: JobContext, staged: Callable[[], bool]
) -> tuple[HandlerResult, bytes | None]:
    """Run ``fn(ctx)`` and classify how it ended, wherever it runs (the worker's thread or
    a child process): a return is a success whose value is encoded as the output
    (:func:`encode_output`; ``None`` when ``staged()`` says the handler staged it
    already); :class:`Cancelled` a cooperative stop; :class:`Permanent` a permanent
    failure; :class:`Retryable`, any other exception, and a value that cannot be encoded,
    a retryable one.  Only plain data leaves: an error is its one-line description."""
    try:
        value = fn(ctx)
        return HandlerResult(Outcome.SUCCESS), None if staged() else encode_output(value)
    except Cancelled:
        return HandlerResult(None), None
    except Permanent as exc:
        return HandlerResult(Outcome.PERMANENT, f"permanent: {_text(exc)}"), None
    except UnknownHandler as exc:
        return HandlerResult(Outcome.PERMANENT, _text(exc)), None
    except Retryable as exc:
        return HandlerResult(Outcome.RETRYABLE, f"retryable: {_text(exc)}"), None
    except Exception as exc:  # any other failure of user code is retryable
        return HandlerResult(Outcome.RETRYABLE, describe(exc)), None


def describe(exc: BaseException) -> str:
    """``Type: message`` of a handler's exception, at most 500 characters (its traceback's
    frames released)."""
    if exc.__traceback__:
        traceback.clear_frames(exc.__traceback__)
    return f"{type(exc).__name__}: {_text(exc)}"[:500]


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # str() itself may fail (user code)
        return f"<unprintable {type(exc).__name__}>"


class Registry:
    """Handlers by name."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._timeouts: dict[str, float] = {}
        self._lock = threading.Lock()

    def handler(self, name: str, *, timeout: float | None = None) -> Callable[[Handler], Handler]:
        """Register a handler; ``timeout``: seconds an attempt may run before it ends as a
        retryable failure (the worker stops waiting on the handler)."""
        if not name or not name.strip():
            raise InvalidInput("a handler needs a name")
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise InvalidInput(f"handler {name!r}: timeout must be a positive number of seconds")

        def register(fn: Handler) -> Handler:
            with self._lock:
                self._handlers[name] = fn
                if timeout is None:
                    self._timeouts.pop(name, None)
                else:
                    self._timeouts[name] = float(timeout)
            return fn

        return register

    def timeout(self, name: str) -> float | None:
        """The handler's timeout in seconds (None: none)."""
        with self._lock:
            return self._timeouts.get(name)

    def get(self, name: str) -> Handler:
        with self._lock:
            fn = self._handlers.get(name)
        if fn is None:
            raise UnknownHandler(f"no handler named {name!r} (known: {self.names() or 'none'})")
        return fn

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._handlers)


#: The default registry ``@remora.jobs.handler`` registers into.
REGISTRY = Registry()


def handler(name: str, *, timeout: float | None = None) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of jobs named ``name`` (in :data:`REGISTRY`);
    ``timeout``: seconds an attempt may run (see :meth:`Registry.handler`)."""
    return REGISTRY.handler(name, timeout=timeout)


def load_app(module: str) -> Registry:
    """Import ``module`` (it registers its handlers) and return the default registry, or the
    module's own ``registry`` attribute if it defines one."""
    import os
    import sys

    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as ``python -m`` does: apps beside the caller
    try:
        mod = importlib.import_module(module)
    except SyntaxError as exc:
        where = f"{exc.filename or module}, line {exc.lineno}"
        raise InvalidInput(
            f"cannot import app module {module!r}: SyntaxError: {exc.msg} ({where})"
        ) from None
    except ImportError as exc:
        raise InvalidInput(f"cannot import app module {module!r}: {_one_line(exc)}") from None
    except BaseException as exc:  # any failure of the app's own code at import
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise InvalidInput(
            f"cannot import app module {module!r}: {type(exc).__name__}: {_one_line(exc)}"
        ) from None
    own = getattr(mod, "registry", None)
    return own if isinstance(own, Registry) else REGISTRY


def load_worker_app(module: str) -> Registry:
    """:func:`load_app` for a worker: the module must register at least one handler (a
    worker with none would only leave every job queued)."""
    registry = load_app(module)
    if not registry.names():
        raise InvalidInput(f"app module {module!r} registers no handler")
    return registry


def _one_line(exc: BaseException) -> str:
    try:
        text = " ".join(str(exc).split())
    except Exception:  # str() itself may fail
        text = ""
    return text[:300] or type(exc).__name__


def encode_output(value: Any) -> bytes:
    """A handler's return value as staged bytes."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, sort_keys=True).encode()


__all__ = [
    "REGISTRY",
    "Cancelled",
    "Handler",
    "HandlerResult",
    "JobContext",
    "Permanent",
    "Registry",
    "Retryable",
    "UnknownHandler",
    "call_handler",
    "describe",
    "encode_output",
    "handler",
    "load_app",
    "load_worker_app",
]
