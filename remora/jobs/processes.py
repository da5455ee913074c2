"""Process isolation: attempts' handlers in child processes that can be killed — the
default executor of ``remora jobs worker`` (``--isolation process``).

Why: a handler in a thread cannot be ended (:class:`~remora.jobs.executor.ThreadExecutor`
can only leave it behind), so a hung handler would keep its slot, its CPU and its memory for
ever.  :class:`ProcessExecutor` keeps a prefork pool of ``size`` child processes
(:mod:`remora.jobs.child`; ``size`` is the worker's ``--concurrency``), each running one
attempt at a time and reused from attempt to attempt; a child is replaced only when it
dies — killed because its attempt was ended (a timeout, a cancel, the worker stopping) or
on its own (a segfault, ``os._exit``, a SIGKILL from outside).  The replacement is started
at once, so the slot is ready for the next attempt.

**Start method.**  A child is a fresh interpreter (``subprocess`` running
``remora.jobs.child``), never a ``fork`` of the worker: the worker is threaded (the loop,
the reconciler, one thread per running attempt) and holds PostgreSQL and Redis sockets — a
forked child would inherit locks held by other threads at the fork (a deadlock on its first
log line or allocation) and the parent's connections.  A fresh interpreter inherits only
its two pipes; it imports the ``--app`` module itself.  The cost is one interpreter start
(about 0.15 s) per child, paid when the pool starts and when a child is replaced, never per
job.

**The parent's side.**  Each running attempt has a thread here that hands the attempt to a
child and serves the child's requests on the attempt's
:class:`~remora.jobs.attempt.AttemptContext` — so the spec's steps are taken by the worker,
with its stores and guards, exactly as for a handler in a thread — then settles the attempt
(:meth:`~remora.jobs.attempt.AttemptContext.finish`).  Abandoning the attempt (the loop
ended it, or the worker stops) kills its child; a child that died on its own ends its
attempt as a retryable failure (``the handler's process died: …``), never the worker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

from remora.errors import InvalidInput, RemoraError
from remora.jobs.attempt import AttemptContext
from remora.jobs.handlers import HandlerResult, describe
from remora.jobs.model import Outcome

#: Seconds a child may take to start and import the app before it is given up.
START_TIMEOUT = 60.0

_CHILD = "import sys; from remora.jobs.child import main; sys.exit(main())"


class ChildGone(RemoraError):
    """The child process died (or never became ready)."""


#: Serializes the closes of the parent's pipe ends (:meth:`Child.close_pipe`).
_PIPE_CLOSE = threading.Lock()


class Child:
    """One child process and the parent's end of its pipe."""

    def __init__(self, app: str, lifeline: int) -> None:
        parent, child = Pipe(duplex=True)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(child.fileno()), str(lifeline)],
                pass_fds=(child.fileno(), lifeline),
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            parent.close()
            raise ChildGone(f"cannot start a handler process: {exc}") from None
        finally:
            child.close()
        self.conn: Connection = parent
        self.pid = self.proc.pid
        self.ready = False
        with contextlib.suppress(OSError):  # it died at once: wait_ready says so
            self.conn.send(("init", {"sys_path": list(sys.path), "app": app}))

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait for the child to have imported the app; :class:`ChildGone` (or
        :class:`~remora.errors.InvalidInput` when the app failed to import) if it did not."""
        if self.ready:
            return
        try:
            if not self.conn.poll(timeout):
                raise ChildGone(f"handler process {self.pid} did not start in {timeout:g}s")
            message = self.conn.recv()
        except (EOFError, OSError):
            raise ChildGone(f"handler process {self.pid} {self.ended()}") from None
        if message[0] == "broken":
            raise InvalidInput(f"handler process: {message[1]}")
        self.ready = True

    def kill(self) -> None:
        """SIGKILL (it may be dead already)."""
        with contextlib.suppress(OSError):
            self.proc.kill()

    def close_pipe(self) -> None:
        """Close the parent's end of the pipe, once, whichever thread asks first: the
        pool's ``close`` (the worker shutting down) and an attempt's thread reaping the
        child it discarded may ask at the same moment, and two unguarded closes of one
        pipe fail with ``EBADF`` in the later one — or, worse, close a file that reused
        the descriptor's number in between."""
        with _PIPE_CLOSE:
            if not self.conn.closed:
                self.conn.close()

    def reap(self) -> None:
        """Close the pipe and wait for the (killed or exiting) process."""
        self.close_pipe()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the process to exit, then kill it and wait."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()

    def ended(self) -> str:
        """How the process ended, in words (waiting briefly for its status)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with code {code}"


class ProcessExecution:
    """One attempt run by a child process (the loop's
    :class:`~remora.jobs.executor.Execution`)."""

    def __init__(self, pool: ProcessExecutor, attempt: AttemptContext) -> None:
        self.pool = pool
        self.attempt = attempt
        self.child: Child | None = None
        self.killed = False
        self.finished = threading.Event()
        self._lock = threading.Lock()

    def done(self) -> bool:
        return self.finished.is_set()

    def abandon(self) -> None:
        """The loop stopped waiting on this attempt: kill its child (the slot's
        replacement is started at once)."""
        with self._lock:
            self.killed = True
            child = self.child
        if child is not None:
            child.kill()

    # -- the parent's side, in a thread of its own ---------------------------------------------
    def run(self, done: Callable[[], None]) -> None:
        try:
            self.attempt.finish(self._run())
        finally:
            self.finished.set()
            done()

    def _run(self) -> HandlerResult:
        actx = self.attempt
        try:
            child = self.pool.acquire()
        except RemoraError as exc:
            return HandlerResult(Outcome.RETRYABLE, f"no handler process: {exc}")
        with self._lock:
            if self.killed:  # abandoned before it started
                self.pool.release(child)
                return HandlerResult(None)
            self.child = child
        try:
            result, output = self._serve(child)
        except ChildGone as exc:
            self.pool.discard(child)
            if self.killed:
                return HandlerResult(None)  # ended by the loop: it settles nothing
            return HandlerResult(Outcome.RETRYABLE, f"the handler's process died: {exc}")
        with self._lock:
            self.child = None
        if self.killed:
            self.pool.discard(child)
        else:
            self.pool.release(child)
        return actx.conclude(result, output)

    def _serve(self, child: Child) -> tuple[HandlerResult, bytes | None]:
        actx = self.attempt
        local = actx.local
        attempt = {
            "job_id": actx.job_id,
            "token": actx.token,
            "handler": actx.handler,
            "payload": actx.payload_text,
            "max_progress": actx.max_progress,
            "progress": local.progress,
            "resumed": actx.resumed,
        }
        conn = child.conn
        try:
            conn.send(("run", attempt))
            while True:
                message = conn.recv()
                if message[0] == "done":
                    _, outcome, error, output = message
                    return HandlerResult(None if outcome is None else Outcome(outcome), error), (
                        output
                    )
                conn.send(self._answer(message[1], message[2]))
        except (EOFError, OSError):
            raise ChildGone(f"process {child.pid} {child.ended()}") from None

    def _answer(self, name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """A request of the handler, served on the attempt's context (as the same call in
        a thread would be)."""
        actx = self.attempt
        try:
            if name == "cancelled":
                return ("ok", actx.cancelled)
            if name == "resumed_data":
                return ("ok", actx.resumed_data)
            if name == "advance":
                actx.advance(*args)
            elif name == "stage":
                actx.stage(*args)
            elif name == "checkpoint":
                actx.checkpoint()
            elif name == "put_secret":
                return ("ok", actx.put_secret(*args))
            else:
                return ("error", "RemoraError", f"unknown request {name!r}")
            return ("ok", None)
        except Exception as exc:
            return ("error", type(exc).__name__, describe(exc).partition(": ")[2])  # one line


class ProcessExecutor:
    """A prefork pool of ``size`` child processes running attempts' handlers (module
    docstring); the loop's :class:`~remora.jobs.executor.Executor`.  :meth:`close` it when
    the loop is done (every child is ended)."""

    def __init__(
        self,
        app: str,
        size: int,
        *,
        name: str = "remora-jobs",
        spawn: Callable[[str, int], Child] = Child,
    ) -> None:
        if size < 1:
            raise InvalidInput("a process pool needs at least one process")
        self.app = app
        #: How a child is started: ``spawn(app, lifeline)`` (a :class:`Child`; the
        #: simulation gives one whose process is a lockstep thread).
        self.spawn = spawn
        self.size = size
        self.name = name
        self._cond = threading.Condition()
        self._idle: list[Child] = []
        self._live: list[Child] = []
        self._closed = False
        self._n = 0
        #: Children replaced so far (killed with their attempt, or died on their own).
        self.replaced = 0
        # The lifeline: the children hold its read end; this process alone its write end,
        # so its death (however it comes) ends them (remora.jobs.child).
        self._lifeline_r, self._lifeline_w = os.pipe()

    # -- the pool ------------------------------------------------------------------------------
    def prestart(self) -> None:
        """Start every child and wait until each has imported the app; a child that
        cannot (the app fails in a fresh interpreter) raises
        :class:`~remora.errors.InvalidInput` or :class:`ChildGone`."""
        with self._cond:
            missing = self.size - len(self._live)
            fresh = [self._spawn() for _ in range(missing)]
        for child in fresh:
            try:
                child.wait_ready()
            except RemoraError:
                self.close()
                raise
        with self._cond:
            for child in fresh:
                if child in self._live and child not in self._idle:
                    self._idle.append(child)
            self._cond.notify_all()

    def _spawn(self) -> Child:
        """A new child, counted live (the caller holds the lock)."""
        child = self.spawn(self.app, self._lifeline_r)
        self._live.append(child)
        return child

    def acquire(self) -> Child:
        """An idle, ready child (one is started when fewer than ``size`` live)."""
        with self._cond:
            while True:
                if self._closed:
                    raise ChildGone("the process pool is closed")
                if self._idle:
                    child = self._idle.pop()
                    break
                if len(self._live) < self.size:
                    child = self._spawn()
                    break
                self._cond.wait()
        try:
            child.wait_ready()
        except RemoraError:
            self.discard(child)
            raise
        return child

    def release(self, child: Child) -> None:
        with self._cond:
            if self._closed or child not in self._live:
                return
            self._idle.append(child)
            self._cond.notify()

    def discard(self, child: Child) -> None:
        """End ``child`` (killed, or dead already) and start its replacement at once."""
        child.kill()
        with self._cond:
            if child in self._live:
                self._live.remove(child)
            if child in self._idle:
                self._idle.remove(child)
            replace = not self._closed and len(self._live) < self.size
            if replace:
                self.replaced += 1
                fresh = self._spawn()
                self._idle.append(fresh)
            self._cond.notify_all()
        child.reap()

    def pids(self) -> list[int]:
        """The live children's process ids."""
        with self._cond:
            return [c.pid for c in self._live]

    # -- the executor interface ----------------------------------------------------------------
    def start(self, attempt: AttemptContext, done: Callable[[], None]) -> ProcessExecution:
        execution = ProcessExecution(self, attempt)
        self._n += 1
        threading.Thread(
            target=execution.run, args=(done,), name=f"{self.name}-{self._n}", daemon=True
        ).start()
        return execution

    # -- the end -------------------------------------------------------------------------------
    def close(self) -> None:
        """End every child: idle ones are told to exit (their pipe closes), the others are
        killed; all are waited for."""
        with self._cond:
            self._closed = True
            children = list(self._live)
            idle = set(map(id, self._idle))
            self._live.clear()
            self._idle.clear()
            self._cond.notify_all()
        for child in children:
            if id(child) not in idle:
                child.kill()
            child.close_pipe()
        deadline = time.monotonic() + 2.0
        for child in children:
            child.join(max(deadline - time.monotonic(), 0.01))
        for fd in (self._lifeline_r, self._lifeline_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def kill_now(self) -> None:
        """Kill every child at once, without taking a lock (from a signal handler, just
        before the process exits): SIGKILL, then reap each for a moment.  No child is
        started any more (a killed one is not replaced)."""
        self._closed = True
        children = list(self._live)
        for child in children:
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        for child in children:
            while time.monotonic() < deadline:
                try:
                    pid, _ = os.waitpid(child.pid, os.WNOHANG)
                except ChildProcessError:
                    break  # reaped already
                if pid:
                    break
                time.sleep(0.005)

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["START_TIMEOUT", "Child", "ChildGone", "ProcessExecution", "ProcessExecutor"]
