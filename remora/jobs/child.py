"""The child process of process isolation: it imports the worker's ``--app`` module and runs
one attempt's handler at a time, for as long as the worker keeps it.

Why a module of its own: this is all the child runs (``python -m remora.jobs.child FD
LIFELINE``, started by :class:`remora.jobs.processes.ProcessExecutor`); it holds no store
connection.  The handler is given a :class:`ChildContext`, the same
:class:`~remora.jobs.handlers.JobContext` API as in a thread: each call that needs the
worker (``advance``, ``stage``, ``checkpoint``, ``put_secret``, ``resumed_data``,
``cancelled``) is one request over the pipe, answered by the parent, which takes the spec's
steps with its own stores and guards.  How the handler ended comes back the same way, as
plain data: the outcome, a one-line error, the output already encoded
(:func:`~remora.jobs.handlers.call_handler`) — a value that cannot be encoded, or an
exception that cannot be pickled, never crosses the pipe.

The protocol (pickled tuples on a :class:`multiprocessing.connection.Connection`):

* parent → child: ``("init", {"sys_path": [...], "app": MODULE})`` once, then
  ``("run", ATTEMPT)`` per attempt (:class:`ChildContext`'s fields);
* child → parent: ``("ready", PID)`` or ``("broken", LINE)`` after importing the app;
  ``("call", NAME, ARGS)`` answered by ``("ok", VALUE)`` or ``("error", TYPE, LINE)``;
  ``("done", OUTCOME, ERROR, OUTPUT)`` when the handler is done.

The child ignores SIGINT and SIGTERM (a Ctrl-C reaches the whole process group: the worker
decides what becomes of its attempts), and ends itself when the worker is gone: a thread
waits on the *lifeline*, a pipe whose only writer is the worker — when the worker dies,
even by SIGKILL, the read returns end-of-file and the child exits at once, so no handler
outlives its worker.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from remora import errors
from remora.errors import InvalidInput, RemoraError, UnknownHandler
from remora.jobs.handlers import Registry, call_handler, encode_output, load_app

#: The child's exit code when its worker is gone (the lifeline closed).
ORPHANED = 70


class _Link:
    """The child's end of the pipe: one request at a time (a handler's own threads may
    call the context too)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def call(self, name: str, *args: Any) -> Any:
        with self._lock:
            try:
                self.conn.send(("call", name, args))
            except (TypeError, AttributeError, ValueError) as exc:  # pickling refused
                raise TypeError(f"ctx.{name}: cannot send {args!r:.100}: {exc}") from None
            reply = self.conn.recv()
        if reply[0] == "ok":
            return reply[1]
        raise _error(reply[1], reply[2])


def _error(kind: str, line: str) -> Exception:
    """The parent's refusal as the same exception type a thread's handler would see."""
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, RemoraError):
        return cls(line)
    if kind in ("TypeError", "ValueError"):
        return TypeError(line) if kind == "TypeError" else ValueError(line)
    return RemoraError(f"{kind}: {line}")


class ChildContext:
    """The :class:`~remora.jobs.handlers.JobContext` of a handler in a child process."""

    def __init__(self, link: _Link, attempt: dict[str, Any]) -> None:
        self._link = link
        self.job_id: str = attempt["job_id"]
        self.token: int = attempt["token"]
        self.handler: str = attempt["handler"]
        self.payload: Any = json.loads(attempt["payload"])
        self.max_progress: int = attempt["max_progress"]
        self._progress: int = attempt["progress"]
        self._resumed: bool = attempt["resumed"]

    @property
    def progress(self) -> int:
        return self._progress

    @property
    def resumed(self) -> bool:
        return self._resumed

    @property
    def resumed_data(self) -> bytes | None:
        data: bytes | None = self._link.call("resumed_data")
        return data

    @property
    def cancelled(self) -> bool:
        return bool(self._link.call("cancelled"))

    def advance(self, amount: int, data: bytes | str | None = None) -> None:
        self._link.call("advance", amount, encode_output(data or b""))
        self._progress = amount

    def stage(self, output: Any) -> None:
        self._link.call("stage", encode_output(output))
        self._progress = self.max_progress

    def checkpoint(self) -> None:
        self._link.call("checkpoint")

    def put_secret(self, secret: bytes | str) -> int:
        raw = secret.encode() if isinstance(secret, str) else secret
        return int(self._link.call("put_secret", raw))


def run_attempt(
    link: _Link,
    registry: Registry,
    attempt: dict[str, Any],
    context: type[ChildContext] = ChildContext,
) -> tuple[Any, ...]:
    """Run one attempt's handler (given a ``context``); the ``done`` message."""
    ctx = context(link, attempt)
    try:
        fn = registry.get(ctx.handler)
    except UnknownHandler as exc:
        return ("done", "permanent", str(exc), None)
    result, output = call_handler(fn, ctx, lambda: ctx.progress >= ctx.max_progress)
    outcome = None if result.outcome is None else result.outcome.value
    return ("done", outcome, result.error, output)


def _watch(lifeline: int) -> None:
    """End the child once its worker is gone (the lifeline's only writer)."""
    try:
        while os.read(lifeline, 1):
            pass
    except OSError:
        pass
    os._exit(ORPHANED)


def serve(conn: Connection, context: type[ChildContext] = ChildContext) -> int:
    """Import the app, then run attempts (each handler given a ``context``) until the
    worker closes the pipe."""
    kind, init = conn.recv()
    assert kind == "init", kind
    for entry in reversed(init["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        registry = load_app(init["app"])
    except InvalidInput as exc:
        conn.send(("broken", str(exc)))
        return 2
    conn.send(("ready", os.getpid()))
    link = _Link(conn)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return 0
        if message[0] != "run":
            return 0
        done = run_attempt(link, registry, message[1], context)
        with link._lock:
            conn.send(done)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    fd, lifeline = int(args[0]), int(args[1])
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    threading.Thread(target=_watch, args=(lifeline,), name="lifeline", daemon=True).start()
    try:
        return serve(Connection(fd))
    except (EOFError, OSError):  # the worker went away mid-message: nothing to say
        return ORPHANED


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["ORPHANED", "ChildContext", "main", "run_attempt", "serve"]
