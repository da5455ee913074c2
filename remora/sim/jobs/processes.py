"""Process isolation inside the simulation: production's
:class:`~remora.jobs.processes.ProcessExecutor` and its child's code
(:func:`remora.jobs.child.serve`), with only the process and its pipe swapped.

Why: ``remora jobs worker`` runs handlers in child processes by default (``--isolation
process``), so the parent's side (:class:`~remora.jobs.processes.ProcessExecution`: a child
acquired from the pool, the attempt handed over, each request of the handler served on the
attempt's context, a child that died turned into a retryable failure, a killed one into
nothing) and the child's (the handler's context as requests over a pipe, its end as plain
data) are code the loop machine must run, not only the thread executor's.  A real child
process would make a run nondeterministic and slow; here a :class:`SimChild` is the same
protocol in a lockstep thread:

* its pipe is a :class:`SimConn` pair: ``send`` pickles a copy into the other end's inbox
  (what cannot be pickled fails as on a real pipe); ``recv`` (and ``poll``) on an empty
  inbox hands control to the other end's thread and waits to be handed it back — so the
  parent's thread, its child's thread and the scheduler run strictly one at a time, and a
  run replays bit for bit;
* it runs :func:`remora.jobs.child.serve` unchanged, on the app
  :mod:`remora.sim.jobs.child_app` (the simulation's handler, :meth:`SimLoops.handler
  <remora.sim.jobs.loops.SimLoops.handler>`, whose pauses hand control back to the
  scheduler as in a thread);
* it dies as a process does: killed (``kill``: the loop abandoned its attempt, or the
  worker's process is gone) it unwinds at once, and its parent reads end-of-file; a handler
  that dies on its own (the script's process death) ends it with exit code 1.

:class:`ProcessStepped` is the loop's execution of one attempt: production's
``ProcessExecution.run`` in a :class:`~remora.sim.jobs.loops.SteppedExecution`'s thread.
Abandoned (the loop ended the attempt) it kills the child and lets the parent's side run to
its end, as production's thread does; killed (the worker's process is gone) nothing of it
runs any more.
"""

from __future__ import annotations

import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from remora.jobs.attempt import AttemptContext
from remora.jobs.child import ChildContext
from remora.jobs.processes import Child, ProcessExecution, ProcessExecutor
from remora.sim.jobs.loops import (
    HANDOFF_TIMEOUT,
    LoopHung,
    SteppedExecution,
    SteppedExecutor,
    _current,
    _Killed,
)

#: The app module the simulated children import (:mod:`remora.sim.jobs.child_app`).
CHILD_APP = "remora.sim.jobs.child_app"

#: Steps an abandoned attempt's parent side may take to reach its end.
ABANDON_STEPS = 100


class ChildDied(BaseException):
    """Raised in a simulated child's thread by a handler whose process dies on its own (as
    ``os._exit(1)`` would end it): nothing after it runs in the child."""


class _Pipe:
    """The two ends' inboxes, their wake-ups and whether each end is closed."""

    def __init__(self) -> None:
        self.boxes: tuple[list[Any], list[Any]] = ([], [])
        self.wake = (threading.Semaphore(0), threading.Semaphore(0))
        self.closed = [False, False]
        #: The child's end was killed (its thread must unwind wherever it waits).
        self.killed = False


class SimConn:
    """One end of a simulated pipe (0: the parent's, 1: the child's); the
    :class:`multiprocessing.connection.Connection` calls the pool and the child make."""

    def __init__(self, pipe: _Pipe, side: int) -> None:
        self.pipe = pipe
        self.side = side
        self.peer = 1 - side
        #: Whether this end's thread waits in :meth:`recv` (or :meth:`poll`).
        self.waiting = False

    def send(self, obj: Any) -> None:
        pipe = self.pipe
        if pipe.closed[self.side] or pipe.closed[self.peer]:
            raise BrokenPipeError("the other end of the pipe is closed")
        data = pickle.dumps(obj)  # what a real pipe refuses, refused the same way
        pipe.boxes[self.peer].append(pickle.loads(data))

    def poll(self, timeout: float = 0.0) -> bool:
        return self._await()

    def recv(self) -> Any:
        if not self._await():
            raise EOFError
        return self.pipe.boxes[self.side].pop(0)

    @property
    def closed(self) -> bool:
        return self.pipe.closed[self.side]

    def close(self) -> None:
        self.pipe.closed[self.side] = True

    def fileno(self) -> int:
        return -1

    def _await(self) -> bool:
        """Until this end's inbox holds a message (True) or the other end is closed
        (False): hand control to the other end's thread and wait to be handed it back."""
        pipe = self.pipe
        while not pipe.boxes[self.side]:
            if pipe.closed[self.peer] or pipe.closed[self.side]:
                return False
            self.waiting = True
            pipe.wake[self.peer].release()
            woke = pipe.wake[self.side].acquire(timeout=HANDOFF_TIMEOUT)
            self.waiting = False
            if not woke:
                raise LoopHung("a simulated pipe's other end never answered")
            self._unwind_if_killed()
        return True

    def _unwind_if_killed(self) -> None:
        if self.side == 1 and self.pipe.killed:
            raise _Killed
        execution = getattr(_current, "execution", None)
        if self.side == 0 and isinstance(execution, SteppedExecution) and execution.killed:
            raise _Killed


class _ChildPause:
    """What a simulated child's thread pauses through: the execution its pool stepped last
    (the one whose parent side this child serves), then — killed meanwhile — it unwinds."""

    def __init__(self, child: SimChild) -> None:
        self.child = child

    def pause(self) -> None:
        active = self.child.pool.active
        assert active is not None, "a simulated child ran outside any step"
        active.pause()
        if self.child.pipe.killed:
            raise _Killed


class SimPool:
    """What the simulated children of one incarnation's pool share: the loops (their
    handler), and the execution stepped last (:class:`_ChildPause`)."""

    def __init__(
        self,
        loops: Any,
        execution: type[ProcessExecution] = ProcessExecution,
        context: type[ChildContext] = ChildContext,
    ) -> None:
        self.loops = loops
        self.execution = execution
        self.context = context
        self.active: ProcessStepped | None = None
        #: The run's process ids (one count per run: a replay and a twin run see the same).
        self.pids: Iterator[int] = loops.child_pids
        #: What the run's process-isolated attempts met (the machines' reach): settled by
        #: their parent's side, their child died on its own, abandoned by the loop.
        self.seen: set[str] = loops.process_reach

    def spawn(self, app: str, lifeline: int) -> Child:
        child = SimChild(self, app, lifeline)
        self.loops.children.append(child)
        return child


class SimChild(Child):
    """A handler process in the simulation (module docstring): :func:`remora.jobs.child.serve`
    in a thread run in lockstep with its parent's, over a :class:`SimConn` pair."""

    def __init__(self, pool: SimPool, app: str, lifeline: int) -> None:
        self.pool = pool
        self.pipe = _Pipe()
        self.conn: Any = SimConn(self.pipe, 0)
        self._end = SimConn(self.pipe, 1)
        self.pid = next(pool.pids)
        self.ready = False
        #: How it ended: its exit code (-9: killed), None while it runs.
        self.code: int | None = None
        #: Whether its parent collected its exit status (:meth:`reap`, :meth:`join`: a
        #: real process's ``wait``); one that ended uncollected is a zombie.
        self.collected = False
        self._thread = threading.Thread(target=self._body, name=f"child-{self.pid}", daemon=True)
        self._thread.start()
        self.conn.send(("init", {"sys_path": list(sys.path), "app": app}))

    def _body(self) -> None:
        from remora.jobs.child import serve

        pipe = self.pipe
        _current.execution = _ChildPause(self)
        _current.loops = self.pool.loops
        code = -9
        try:
            if not pipe.wake[1].acquire(timeout=HANDOFF_TIMEOUT):
                return  # never handed control: its pool was dropped
            if not pipe.killed:
                code = serve(self._end, self.pool.context)  # type: ignore[arg-type]
        except _Killed:
            pass
        except ChildDied:
            code = 1
        finally:
            self.code = code
            pipe.closed[1] = True
            pipe.wake[0].release()  # the last thing it does: its parent reads end-of-file

    # -- the process -----------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL: a child waiting on its pipe unwinds now (its parent waits for it); one
        paused in its handler unwinds at its next step."""
        pipe = self.pipe
        if pipe.killed or not self._thread.is_alive():
            return
        pipe.killed = True
        if self._end.waiting or not self.ready:
            pipe.wake[1].release()
            self._thread.join(HANDOFF_TIMEOUT)

    def reap(self) -> None:
        self.close_pipe()
        self.join(HANDOFF_TIMEOUT)

    def join(self, timeout: float) -> None:
        self.collected = True  # a wait collects the status (at once, if it has ended)
        if not self._thread.is_alive():
            return
        if not self.ready:
            self.pipe.killed = True  # never handed control: it exits without starting
        if self._end.waiting or not self.ready:
            self.pipe.wake[1].release()  # it reads end-of-file (or was killed) and exits
            self._thread.join(timeout)

    def ended(self) -> str:
        if self.code is None:
            return "stopped answering"
        return "was killed by SIGKILL" if self.code < 0 else f"exited with code {self.code}"


class ProcessStepped(SteppedExecution):
    """One attempt run by a simulated child (module docstring): production's
    :meth:`ProcessExecution.run` in the lockstep thread."""

    def __init__(
        self,
        pool: ProcessExecutor,
        shared: SimPool,
        attempt: AttemptContext,
        done: Callable[[], None],
        name: str,
    ) -> None:
        self.process = shared.execution(pool, attempt)
        self.shared = shared
        super().__init__(attempt, done, name)

    def run_body(self) -> None:
        self.process.run(lambda: None)
        child = self.process.child  # kept when it died: the parent read end-of-file
        code = child.code if isinstance(child, SimChild) else None
        if code == 1:
            self.shared.seen.add("died")
        elif code is None:
            self.shared.seen.add("settled")

    def _handoff(self) -> None:
        self.shared.active = self
        super()._handoff()

    def abandon(self) -> None:
        """The loop stopped waiting on it: its child is killed, and the parent's side runs
        on to its end (it reads end-of-file and settles nothing), as production's thread
        does."""
        self.abandoned = True
        if self.finished:
            return
        self.shared.seen.add("abandoned")
        self.process.abandon()
        for _ in range(ABANDON_STEPS):
            if self.finished:
                return
            self._handoff()
        raise LoopHung(f"the abandoned attempt {self.attempt.attempt} did not end")

    def kill(self) -> None:
        """The worker's process is gone: its child too (the lifeline), and nothing more of
        either runs."""
        child = self.process.child
        if child is not None:
            child.kill()
        super().kill()


class ProcessSteppedExecutor(SteppedExecutor):
    """The executor of a process-isolated incarnation's loop: production's pool of
    :class:`SimChild` processes, each attempt a :class:`ProcessStepped`."""

    def __init__(
        self,
        name: str,
        loops: Any,
        size: int,
        execution: type[ProcessExecution] = ProcessExecution,
        context: type[ChildContext] = ChildContext,
    ) -> None:
        super().__init__(name)
        self.shared = SimPool(loops, execution, context)
        self.pool = ProcessExecutor(CHILD_APP, size, name=name, spawn=self.shared.spawn)

    def execution(
        self, attempt: AttemptContext, done: Callable[[], None], name: str
    ) -> SteppedExecution:
        return ProcessStepped(self.pool, self.shared, attempt, done, name)

    def kill_all(self) -> None:
        super().kill_all()
        self.pool.close()


__all__ = [
    "CHILD_APP",
    "ChildDied",
    "ProcessStepped",
    "ProcessSteppedExecutor",
    "SimChild",
    "SimConn",
    "SimPool",
]
