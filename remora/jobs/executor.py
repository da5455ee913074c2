"""Where the production loop runs attempts' handlers: the executor interface and the thread
executor.

Why an interface: the loop (:class:`remora.jobs.loop.WorkerLoop`) only starts an attempt,
asks whether it is done, and abandons it when it stops waiting; *where* the handler runs is
the executor's business.  :class:`ThreadExecutor` runs each attempt in a daemon thread of
its own; an executor may instead run the handler in a child process (killable: abandoning
it ends the process), forwarding the handler's :class:`~remora.jobs.handlers.JobContext`
calls — heartbeat, progress, checkpoint, cancel — to the parent's
:class:`~remora.jobs.attempt.AttemptContext`, and calling
:meth:`~remora.jobs.attempt.AttemptContext.finish` with the child's
:class:`~remora.jobs.attempt.HandlerResult`; or a simulation may run the handlers itself,
one deterministic step at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from remora.jobs.attempt import AttemptContext


class Execution(Protocol):
    """One attempt's handler run, as the loop sees it."""

    def done(self) -> bool:
        """The handler returned and the attempt was settled (or it failed)."""
        ...

    def abandon(self) -> None:
        """The loop stops waiting on it (its attempt was ended without the handler, or the
        worker stops): end it if the executor can; whatever it does afterwards settles
        nothing (its attempt context is abandoned first)."""
        ...


class Executor(Protocol):
    """Runs attempts' handlers for the loop (module docstring)."""

    def start(self, attempt: AttemptContext, done: Callable[[], None]) -> Execution:
        """Begin ``attempt`` — its handler, then its settlement
        (:meth:`AttemptContext.execute`, or :meth:`AttemptContext.finish` with a result
        obtained elsewhere) — without blocking, and call ``done`` once it has finished."""
        ...


class ThreadExecution:
    """An attempt running in a daemon thread."""

    def __init__(self, future: Future[None]) -> None:
        self.future = future

    def done(self) -> bool:
        return self.future.done()

    def abandon(self) -> None:
        """A thread cannot be ended: it is left behind (the process may still exit)."""


class ThreadExecutor:
    """Runs each attempt in a daemon thread of its own (at most ``concurrency`` at once:
    the loop starts one only into a free slot).  Unlike a ``ThreadPoolExecutor``, whose
    threads the interpreter joins at exit, a thread whose handler hangs can be abandoned:
    the worker stops waiting on it, and the process can still exit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._n = 0

    def start(self, attempt: AttemptContext, done: Callable[[], None]) -> ThreadExecution:
        fut = self.submit(attempt.execute)
        fut.add_done_callback(lambda _: done())
        return ThreadExecution(fut)

    def submit(self, fn: Callable[[], None]) -> Future[None]:
        """Run ``fn`` in a new daemon thread; its future reports how it ended."""
        fut: Future[None] = Future()
        fut.set_running_or_notify_cancel()

        def body() -> None:
            try:
                fn()
            except BaseException as exc:  # reported through the future
                fut.set_exception(exc)
            else:
                fut.set_result(None)

        self._n += 1
        threading.Thread(target=body, name=f"{self.name}-{self._n}", daemon=True).start()
        return fut


__all__ = ["Execution", "Executor", "ThreadExecution", "ThreadExecutor"]
