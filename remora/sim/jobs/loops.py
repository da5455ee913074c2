"""The production worker loop (:class:`~remora.jobs.loop.WorkerLoop`) inside the simulation.

Why: the job machines' direct rules call the worker's spec steps one at a time, so the code
that *drives* those steps in production — the loop's turn (heartbeat timing, dispatch,
tending, the slot accounting), the attempts' settlement after their handlers and the
reconciler's schedule — ran in no machine.  Here a :class:`SimLoops` builds, per
incarnation, the production :class:`WorkerLoop` unchanged, and gives it only what the
production code is given anyway, through the interfaces that exist:

* the simulation's stores, hook and links (the fault seam), and a reconciler of the
  simulation's class on the incarnation's links;
* the :class:`SteppedExecutor`: the executor interface (:mod:`remora.jobs.executor`) over
  threads run in strict lockstep with the scheduler — a handler thread runs only inside a
  ``loop-handler`` step, until its next pause, while the scheduler's thread waits; nothing
  else ever runs concurrently, so a run is deterministic and replays bit for bit;
* a :class:`PausingClock` under each incarnation's context: a ``sleep`` of a handler
  thread (the settlement's retry pauses, its wait for a stop condition) is a pause of that
  thread until its next step, not a jump of the logical clock (time passes only by
  ``Tick``, which the refinement check sees);
* the simulation's deterministic handler (:meth:`SimLoops.handler`, registered as the jobs'
  handler): it stages part of its output, checkpoints, then ends as the run's script says
  (returning the full output, raising ``Retryable``/``Permanent``), pausing between its
  calls and stopping cooperatively (``Cancelled``) once ``ctx.cancelled``.

The loop never learns it is simulated: the same :meth:`WorkerLoop.turn`,
:class:`~remora.jobs.loop.Dispatcher`, :func:`~remora.jobs.settlement.settle` and
:class:`~remora.jobs.loop.ReconcileSchedule` run as in ``remora jobs worker``; the
scheduler calls ``turn()`` instead of :meth:`WorkerLoop.run` (which the loop's docstring
provides for).

The loop's promises that no spec step shows are checked after each loop step
(:meth:`SimLoops.problems`) — after a *clean* step (no fault fired, the incarnation's links
all up): the heartbeat is never older than the loop's beat period; a turn that waits for a
handler to finish has every slot taken by a handler still running; a scheduled reconcile
pass reads the durable store; an attempt settled by its handler's last stretch holds no
lease any more; an executing attempt a turn tended knows it must stop when its job has a
cancel notice or its lease is gone or no longer live; the first turn of a tick leaves none
of its running handlers' leases renewable (each is tended once a tick); a reservation a
turn took and holds,
of a terminal or cancelling job, waits for the loop's own authorization or activation; a
turn with a slot free starts an attempt while one of its incarnation's authorized attempts
is ready to activate a tick after its activation may have been refused.  After any turn of
a loop built with an outage budget, a store one of its calls met away for longer than the
budget (the link down ever since) has ended the loop.
After *any* turn that ends the loop (faults or not), the end has its reason: asked to stop,
an outage past its budget, or the incarnation knowing it is down — never a failed call
alone. After *every* step, each declaration of an incarnation by another (``CrashWorker``
in the durable record) keeps the contract's margin: not sooner after its loop's last clean
turn than ``down_after`` minus the documented heartbeat cadence
(:meth:`SimLoops.spurious_declarations`); and a clean turn that cadence or more after a
declaration ends the declared incarnation's loop (it learned).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from remora.clock import Disarm, LogicalClock
from remora.errors import NotEnabled, UnknownHandler, WorkerDown
from remora.faults import At
from remora.jobs.actions import Action
from remora.jobs.attempt import AttemptContext
from remora.jobs.child import ChildContext
from remora.jobs.handlers import Cancelled, Permanent, Registry, Retryable
from remora.jobs.io import SERVICE_NAMES, JobOperation, Links
from remora.jobs.loop import Pause, ReconcileSchedule, Wait, WorkerLoop
from remora.jobs.model import AttemptId, Outcome, Phase, Service
from remora.jobs.processes import ProcessExecution
from remora.jobs.reconciler import Reconciler
from remora.jobs.worker import AUTHORIZED, EXECUTING, Worker
from remora.sim.jobs.judgement import declared_by_other
from remora.worker.outage import Outage, OutageWatch

#: The name the simulation submits its jobs under (:meth:`Simulation.submit`).
HANDLER = "noop"

#: The heartbeat's documented cadence (docs/jobs.md, "Incarnation liveness"): an incarnation
#: renews its heartbeat this many times per ``down_after`` — stated here, not read from the
#: loop, so that :meth:`SimLoops.spurious_declarations` judges the loop against the contract
#: rather than against its own beat period.
BEATS_PER_DOWN_AFTER = 3

#: The loops' grace period once asked to stop, in ticks (``remora jobs worker --grace``):
#: short enough that the machines see a stopping loop outlast it.
STOP_GRACE_TICKS = 3

#: Seconds the scheduler waits for a handler thread to pause before it calls the run hung
#: (a deadlock between the lockstep threads is a bug of this module, never a wait).
HANDOFF_TIMEOUT = 30.0


class LoopHung(AssertionError):
    """A handler thread did not pause within :data:`HANDOFF_TIMEOUT`."""


class _Killed(BaseException):
    """Raised at a paused handler thread's pause point when its execution is ended (the
    process is gone, or the loop abandoned it): the thread unwinds and ends."""


_current = threading.local()


class PausingClock:
    """A logical clock seen through an incarnation's context: ``now`` and timers are the
    simulation's clock's; a ``sleep`` in a handler thread of the :class:`SteppedExecutor`
    pauses that thread until its next step (the scheduler moves time, with ``Tick``), and a
    sleep anywhere else advances the logical clock as :class:`LogicalClock` does."""

    def __init__(self, clock: LogicalClock) -> None:
        self.clock = clock

    def now(self) -> float:
        return self.clock.now()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Disarm:
        return self.clock.call_later(seconds, callback)

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        execution: SteppedExecution | None = getattr(_current, "execution", None)
        if execution is None:
            return self.clock.sleep(seconds, wake)
        execution.pause()
        return not wake.is_set()


class SteppedExecution:
    """One attempt's handler (and settlement) in a thread of its own that runs only while
    the scheduler steps it (:meth:`step`), until it pauses or ends."""

    def __init__(self, attempt: AttemptContext, done: Callable[[], None], name: str) -> None:
        self.attempt = attempt
        self._done = done
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self.finished = False
        self.abandoned = False
        self._killed = False
        #: What the thread raised that the production code did not handle (a bug).
        self.error: BaseException | None = None
        #: Steps taken (the first one starts the handler).
        self.steps = 0
        self._thread = threading.Thread(target=self._body, name=name, daemon=True)
        self._thread.start()

    # -- the handler thread --------------------------------------------------------------------
    def _body(self) -> None:
        self._go.acquire()
        _current.execution = self
        try:
            if not self._killed:
                self.run_body()
        except _Killed:
            pass
        except BaseException as exc:  # the loop's executor would swallow it: report it
            self.error = exc
        finally:
            self.finished = True
            if not self._killed:
                self._done()  # before the scheduler resumes: nothing runs beside it
            self._back.release()

    def run_body(self) -> None:
        """What the thread runs: the handler and the attempt's settlement."""
        self.attempt.execute()

    @property
    def killed(self) -> bool:
        """Whether it was ended (:meth:`kill`): nothing it would do next runs."""
        return self._killed

    def pause(self) -> None:
        """Hand control back to the scheduler; return at the next step (raise
        :class:`_Killed` when the execution was ended meanwhile)."""
        self._back.release()
        self._go.acquire()
        if self._killed:
            raise _Killed

    # -- the scheduler -------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        return not (self.finished or self.abandoned)

    def step(self) -> None:
        """Run the thread until it pauses or ends."""
        if not self.live:
            raise NotEnabled(f"the handler of {self.attempt.attempt} is not running")
        self.steps += 1
        self._handoff()
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _handoff(self) -> None:
        self._go.release()
        if not self._back.acquire(timeout=HANDOFF_TIMEOUT):
            raise LoopHung(f"the handler thread of {self.attempt.attempt} did not pause")

    def kill(self) -> None:
        """End the thread (unwinding from its pause point): nothing it would do next runs."""
        if self.finished:
            return
        self._killed = True
        self._handoff()
        self._thread.join(HANDOFF_TIMEOUT)

    # -- Execution -----------------------------------------------------------------------------
    def done(self) -> bool:
        return self.finished

    def abandon(self) -> None:
        """The loop stopped waiting on it: end it, as a process executor ends its child
        (its attempt context is abandoned first: it settles nothing)."""
        self.abandoned = True
        self.kill()


class SteppedExecutor:
    """The executor of one incarnation's loop: every attempt in a lockstep thread
    (:class:`SteppedExecution`), none of them running until it is stepped."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.executions: dict[AttemptId, SteppedExecution] = {}

    def start(self, attempt: AttemptContext, done: Callable[[], None]) -> SteppedExecution:
        old = self.executions.get(attempt.attempt)
        if old is not None:
            old.kill()
        execution = self.execution(attempt, done, f"{self.name}-{attempt.attempt}")
        self.executions[attempt.attempt] = execution
        return execution

    def execution(
        self, attempt: AttemptContext, done: Callable[[], None], name: str
    ) -> SteppedExecution:
        """A new execution of ``attempt`` (a thread's; a process pool's in a subclass)."""
        return SteppedExecution(attempt, done, name)

    def live(self) -> list[SteppedExecution]:
        return [e for e in self.executions.values() if e.live]

    def kill_all(self) -> None:
        for e in self.executions.values():
            e.kill()


_SERVICE_OF_NAME = {name: svc for svc, name in SERVICE_NAMES.items()}


class _WatchTap(OutageWatch):
    """What a budgeted loop's actors report their calls to: the outage watch the loop
    installed on them (``inner``; None if it installed none), and a note of every failed
    call's service (:meth:`SimLoops._failed`) — the record the outage budget's promise is
    judged from, independent of the watch's own verdict."""

    def __init__(
        self, inner: OutageWatch | None, clock: LogicalClock, note: Callable[[str], None]
    ) -> None:
        super().__init__(inner.budget if inner is not None else 0.0, clock)
        self.inner = inner
        self.note = note

    def now(self) -> float:
        return self.inner.now() if self.inner is not None else self.clock.now()

    def failed(self, service: str, error: BaseException, where: str = "") -> None:
        self.note(service)
        if self.inner is not None:
            self.inner.failed(service, error, where)

    def answered(self, service: str, started: float) -> None:
        if self.inner is not None:
            self.inner.answered(service, started)

    def ongoing(self) -> Outage | None:
        return self.inner.ongoing() if self.inner is not None else None


@attrs.frozen
class LoopParts:
    """What the simulation builds each incarnation's loop from: the loop's class and its
    reconcile schedule's (production's, unless a test plants a bug in a subclass)."""

    loop: type[WorkerLoop] = WorkerLoop
    schedule: type[ReconcileSchedule] = ReconcileSchedule
    #: The loops' ``batch`` (:class:`~remora.jobs.loop.WorkerLoop`), in turn: the k-th
    #: loop a run builds takes ``batches[k % len(batches)]`` — so the batched paths
    #: (several jobs authorized, several attempts completed per transaction) and the
    #: unbatched ones both run, deterministically (a trace replays with the same sizes).
    batches: tuple[int, ...] = (2, 1)
    #: The loops' reconcilers' ``clean_batch`` (:class:`~remora.jobs.reconciler.Reconciler`),
    #: in turn like ``batches`` (0: production's default); e.g. ``(2, 0, 0)``: a pass over
    #: a machine's few jobs then also splits its cleans into a batch and a single clean.
    clean_batches: tuple[int, ...] = (0,)
    #: The loops' outage budgets in ticks (None: no watch — a library loop's default), in
    #: turn like ``batches``: ``remora jobs worker`` always builds its loop with one
    #: (``--outage-budget``), so some loops give up on a store away past a short budget
    #: (:meth:`SimLoops._outlasted`) while others ride every outage out.
    outages: tuple[int | None, ...] = (1, None, None)
    #: The outage watch's class (production's, unless a test plants a bug in a subclass).
    watch: type[OutageWatch] = OutageWatch
    #: Where the loops run their handlers, in turn like ``batches``: ``"thread"`` (the
    #: thread executor's way, :class:`SteppedExecutor`) or ``"process"`` (production's
    #: process pool over simulated children, :mod:`remora.sim.jobs.processes` — the
    #: default of ``remora jobs worker``).  A process-isolated handler whose script fails
    #: retryably on an odd token dies with its process instead.
    isolations: tuple[str, ...] = ("thread", "process", "process", "thread")
    #: The parent's side of a process-isolated attempt (production's, unless a test
    #: plants a bug in a subclass).
    process_execution: type[ProcessExecution] = ProcessExecution
    #: The handler's context in a simulated child process (production's, unless a test
    #: plants a bug in a subclass).
    child_context: type[ChildContext] = ChildContext


PRODUCTION_LOOP = LoopParts()


class Crossing:
    """An I/O hook that runs ``cross`` once, at the ``at``-th call that begins while no call
    of its actor is open (before the call is decided), then behaves as ``inner``: another
    actor's whole step inserted between two of this actor's store calls, never inside a
    transaction or under a lock this actor holds (the nested step would wait for it)."""

    def __init__(self, inner: Any, at: int, cross: Callable[[], object]) -> None:
        self.inner = inner
        self.at = at
        self.cross = cross
        self.ran = False
        self._calls = 0
        self._open = 0

    def decide(self, call: Any, ctx: Any) -> Any:
        # Before the call is decided: the simulation's hook keeps each call's decision
        # until it returns, so the other actor's calls never come between the two.
        if self._open == 0 and not self.ran:
            self._calls += 1
            if self._calls == self.at:
                self.ran = True
                self.cross()
        return self.inner.decide(call, ctx)

    def boundary(self, call: Any, at: Any, ctx: Any) -> None:
        self._open += 1 if at is At.BEFORE else -1
        self.inner.boundary(call, at, ctx)

    def returned(self, call: Any, report: Any) -> None:
        self.inner.returned(call, report)


@attrs.frozen
class LoopOutcome:
    """What one loop step did, for the machines' reach."""

    what: str  # "turn", "handler", "reconcile"
    result: str


def _tend_state(coord: Any, a: AttemptId) -> str:
    """What a tend of ``a`` met, read from the coordination snapshot ``coord`` after the
    turn: its job's cancel ``notice``, its lease ``lost`` (gone or no longer live), or its
    lease ``live``."""
    lease = coord.leases.get(a)
    if a.job in coord.notices:
        return "notice"
    return "lost" if lease is None or not lease.live else "live"


def handler_asks(exc: BaseException | None) -> str | None:
    """The outcome a handler that ended so asks its settlement to send, as the spec names
    it — the handler contract of docs/jobs.md, stated here on its own (never read from
    :func:`~remora.jobs.handlers.call_handler`, which it judges): a return asks for a
    success; :class:`Cancelled` is a cooperative stop (no outcome); :class:`Permanent` (or
    an unknown handler) a permanent failure; anything else a retryable one."""
    if exc is None:
        return "WantsSuccess"
    if isinstance(exc, Cancelled):
        return None
    if isinstance(exc, Permanent | UnknownHandler):
        return "WantsPermanentFailure"
    return "WantsRetryableFailure"


class SimLoops:
    """The incarnations' production loops in one simulation (module docstring)."""

    def __init__(
        self, scripted: Callable[[AttemptId], Outcome], parts: LoopParts = PRODUCTION_LOOP
    ) -> None:
        #: The simulation (set once it is built: its incarnations are given
        #: :attr:`registry`).
        self.sim: Any = None
        self.scripted = scripted
        self.parts = parts
        self.registry = Registry()
        self.registry.handler(HANDLER)(self.handler)
        self.loops: dict[str, WorkerLoop] = {}
        self.executors: dict[str, SteppedExecutor] = {}
        #: Incarnations whose loop ended (it returned no pause, or its process is gone).
        self.ended: set[str] = set()
        #: The last loop step's outcome (reach).
        self.last: LoopOutcome | None = None
        #: What the last turn returned (:meth:`problems`).
        self.pause: Pause | None = None
        #: The attempt whose handler and settlement the last loop step ended
        #: (:meth:`problems`), else None.
        self.settled: AttemptId | None = None
        #: The attempts whose handler had ended and whose settlement had begun when the
        #: last turn began (:meth:`missent`: their leases are no longer renewed).
        self.ended_at_turn: set[AttemptId] = set()
        #: When each running attempt's end was next to be tried before the last turn (an end
        #: tried in the turn moved it: :meth:`_stuck_ends`).
        self.end_tries: dict[AttemptId, float] = {}
        #: When each loop last turned (faulted or not), and whether the last turn was its
        #: loop's first in its tick (:meth:`_unrenewed`).
        self.turned_at: dict[str, float] = {}
        self.first_in_tick = False
        #: The coordination store as the last turn left it (:meth:`_unrenewed`).
        self.coord_after: Any = None
        #: The attempts the last turn tended (:meth:`problems`), and what each tend met
        #: (:func:`_tend_state`, for the machines' reach).
        self.tended: list[AttemptContext] = []
        self.tend_reach: list[str] = []
        #: The attempts the last turn ended itself (its handler left running: a timeout,
        #: a stop condition's grace outlived) — :meth:`_unreleased`.
        self.ended_by_turn: list[AttemptId] = []
        #: Which promises' hard cases the last turn met, for the machines' reach: an
        #: activation due again taken (``activation-due``), an end past the outage budget
        #: (``outage-end``), the end of a loop asked to stop (``stop-end``).
        self.promise_reach: list[str] = []
        #: The outage past its budget the watch saw when the last turn ended the loop.
        self.outlasted: Outage | None = None
        #: When each loop was asked to stop (``loop-stop``), and when its first turn after
        #: that came (its grace period counts from there: :meth:`_lingering`).
        self.stop_asked: dict[str, float] = {}
        self.stopping_since: dict[str, float] = {}
        #: Whether each stopping loop's last turn began with no handler running.
        self.drained: dict[str, bool] = {}
        #: Why the last turn had to end its loop, if it had to (:meth:`_lingering`).
        self.must_end: list[str] = []
        #: Each loop's outage budget in seconds (the loops built with one).
        self.budgets: dict[str, float] = {}
        #: Since when a call of each budgeted loop (its incarnation's, its reconciler's)
        #: has met its link to a store down, the link down ever since (:meth:`_outlasted`).
        self.cut_since: dict[tuple[str, Service], float] = {}
        #: The attempts whose handler's next stretch is its last (it paused after its
        #: checkpoint: the next one ends it and settles the attempt) — for the rules that
        #: cut a link just before a settlement.
        self.settling: set[AttemptId] = set()
        #: The attempts whose handler has begun, and whether it stages in two parts
        #: (pausing after its first stage write and after its checkpoint) — :meth:`ends_next`.
        self.two_part: dict[AttemptId, bool] = {}
        #: Each job's timeout in seconds (set by the run from its kinds; absent: none) and
        #: when each attempt a loop ran was activated (its ``ActivateAttempt`` in a loop
        #: step, on the run's clock): a timeout's retryable failure is sent no earlier
        #: (:meth:`missent`), and the loop ends an overrun attempt (:meth:`_overrun`).
        self.timeouts: dict[str, float] = {}
        #: The handler's own timeout in seconds (0: none; :meth:`set_handler_timeout`): an
        #: attempt's is the smaller of its handler's and its job's (:meth:`timeout_of`).
        self.handler_timeout = 0.0
        #: The jobs whose handler gives up on its own at their first attempt (set by the run
        #: from their kinds: :attr:`~remora.sim.jobs.trace.JobKind.gives_up`), and how
        #: such an attempt ended (for the machines' reach).
        self.gives_up: set[str] = set()
        self.give_up_reach: set[str] = set()
        self.activated: dict[AttemptId, float] = {}
        #: The first clean turn of its loop at or after each attempt's timeout, and the
        #: last turn of each loop that met a fault, a link down or its incarnation down
        #: (:meth:`_overrun`).
        self.overran: dict[AttemptId, float] = {}
        self.rough_turn: dict[str, float] = {}
        #: How the run's attempts that overran their timeout ended (for the machines'
        #: reach): ``ended by its loop`` (a turn sent the retryable failure: the handler
        #: kept running), ``settled by its handler`` (it stopped when asked, or returned).
        self.timeout_reach: set[str] = set()
        #: The reservations (job: id) the last turn took and still holds (:meth:`_idle`).
        self.reserved: dict[str, str] = {}
        #: When each incarnation's loop last took a clean turn while it was durably up
        #: (:meth:`spurious_declarations`).
        self.clean_at: dict[str, float] = {}
        #: When each incarnation was declared down by another (:meth:`problems`).
        self.declared_at: dict[str, float] = {}
        #: The authorized attempts of an incarnation that the spec lets activate now with
        #: no documented reason for a refusal holding (the run's judgement, set by it:
        #: :meth:`~remora.sim.jobs.run.JobRun.activations_ready`; :meth:`_unactivated`).
        self.ready: Callable[[str], frozenset[AttemptId]] = lambda w: frozenset()
        #: When a turn of each incarnation's loop last began with its authorized attempt
        #: not ready, or authorized it (:meth:`_unactivated`).
        self.unready_at: dict[tuple[str, AttemptId], float] = {}
        #: The attempts ready at the start of the last turn.
        self.ready_at_start: frozenset[AttemptId] = frozenset()
        #: Whether the last turn began with a slot free, and the attempts it started.
        self.slot_free = False
        self.started: list[AttemptId] = []
        #: How each attempt's handler ended, as the outcome it asks its settlement to
        #: send (the spec's name; None: it stopped cooperatively) — :meth:`missent`.
        self.ends: dict[AttemptId, str | None] = {}
        #: The attempts a loop sent an outcome for, and those whose handler ended before a
        #: loop step of a fault, a link down or a down incarnation (:meth:`_unsent`).
        self.sent: set[AttemptId] = set()
        #: The step of its execution in which each handler ended, and the attempt the last
        #: handler step stepped with how many of its steps came after its handler's end.
        self.end_step: dict[AttemptId, int] = {}
        self.stepped: tuple[AttemptId, int] | None = None
        self.troubled: set[AttemptId] = set()
        #: Whether the tracked spec state enables ``SendOutcome(a, o)`` by ``w`` with no
        #: documented reason for a refusal holding (set by the run:
        #: :meth:`~remora.sim.jobs.run.JobRun.outcome_sendable`; :meth:`_unsent`).
        self.sendable: Callable[[str, AttemptId, str], bool] = lambda w, a, o: False
        #: Whether ``a``'s stage is complete in a spec state (set by the run: it knows the
        #: abstraction; :meth:`missent`).  A success is sent as a retryable failure only
        #: when its stage was not: then the spec does not enable the success.
        self.staged: Callable[[Any, AttemptId], bool] = lambda s, a: False
        #: The process ids of the run's simulated handler processes
        #: (:mod:`remora.sim.jobs.processes`): one count per run, so a replay and a twin
        #: run name the same processes.
        self.child_pids = itertools.count(10_000)
        #: What handlers' contexts told them that their attempts' state says otherwise
        #: (:meth:`_view_at_start`, :meth:`_told_cancelled`): judged after each loop step.
        self.views: list[str] = []
        #: What the run's process-isolated attempts met (:mod:`remora.sim.jobs.processes`,
        #: for the machines' reach): ``settled``, ``died`` (its child, on its own),
        #: ``abandoned`` (by its loop).
        self.process_reach: set[str] = set()
        #: Every simulated handler process the run's pools started, in order (a process
        #: that ended must be reaped: :meth:`unreaped`).
        self.children: list[Any] = []

    def unreaped(self) -> list[str]:
        """The handler processes that ended but whose parent never collected their exit
        status (``Child.reap``/``join``) — zombies, which a long-running worker that
        abandons attempts would pile up until the system has no process ids left.  Judged
        after the drain, when every pool is closed."""
        return [
            f"handler process {c.pid} ended but was never reaped (a zombie)"
            for c in self.children
            if c.code is not None and not c.collected
        ]

    # -- the simulation's handler ---------------------------------------------------------
    def handler(self, ctx: Any) -> bytes:
        """Deterministic: stage half (checkpointed), pause, end as scripted; stop
        cooperatively once cancelled.  Runs in a :class:`SteppedExecution`'s thread.  How
        it ended is noted in :attr:`ends` (what its settlement must send:
        :meth:`missent`)."""
        a = AttemptId(ctx.job_id, ctx.token)
        try:
            output = self._handle(ctx, a)
        except _Killed:
            raise
        except BaseException as exc:
            self.ends[a] = handler_asks(exc)
            raise
        self.ends[a] = handler_asks(None)
        return output

    def _handle(self, ctx: Any, a: AttemptId) -> bytes:
        from remora.sim.jobs.run import staged_bytes

        execution: SteppedExecution = _current.execution
        top = int(ctx.max_progress)
        self._view_at_start(a, ctx)

        def pause() -> None:
            execution.pause()
            if self._told_cancelled(a, ctx):
                raise Cancelled(f"{a} was cancelled")

        self.two_part[a] = top > 1 and ctx.progress < 1
        if self._told_cancelled(a, ctx):
            raise Cancelled(f"{a} was cancelled")
        if top > 1 and ctx.progress < 1:
            ctx.advance(1, staged_bytes(a, 1))
            pause()
            ctx.checkpoint()
            self.settling.add(a)
            pause()
        if a.token == 1 and a.job in self.gives_up:
            raise Cancelled(f"the handler of {a} gave up")  # unasked: no stop condition
        outcome = self.scripted(a)
        if outcome is Outcome.RETRYABLE and getattr(_current, "loops", None) and a.token % 2:
            from remora.sim.jobs.processes import ChildDied

            raise ChildDied(f"the handler process of {a} exits")  # as os._exit(1) would
        if outcome is Outcome.RETRYABLE:
            raise Retryable("scripted")
        if outcome is Outcome.PERMANENT:
            raise Permanent("scripted")
        return staged_bytes(a, top)

    def ends_next(self, a: AttemptId) -> bool:
        """Whether the next stretch of ``a``'s handler is its last: it ends, and its
        attempt is settled (a handler not begun yet stages in two parts when it starts
        from nothing with more than one step to stage)."""
        local = self._local(a)
        if local is None:
            return False
        two_part = self.two_part.get(a, local.progress < 1 and local.max_progress > 1)
        return not two_part or a in self.settling

    def _local(self, a: AttemptId) -> Any:
        """The attempt ``a`` as the incarnation whose loop runs it holds it (None if none
        does)."""
        for w, ex in self.executors.items():
            if a in ex.executions:
                return self.sim.workers[w].attempts.get(a)
        return None

    def _view_at_start(self, a: AttemptId, ctx: Any) -> None:
        """The handler's context at its start tells the attempt's own state: the progress
        it resumes from (a checkpoint's, else 0) and whether it resumed (:attr:`views`)."""
        local = self._local(a)
        if local is None:
            return
        progress, resumed = int(ctx.progress), bool(ctx.resumed)
        if progress != local.progress or resumed != (local.progress > 0):
            self.views.append(
                f"the handler of {a} started at progress {progress} (resumed: {resumed}); "
                f"its attempt is at {local.progress}"
            )

    def _told_cancelled(self, a: AttemptId, ctx: Any) -> bool:
        """``ctx.cancelled``, judged: once the attempt's loop noticed a stop condition
        (``cancel_seen``: a cancel notice, a lost lease) its handler is told so
        (:attr:`views`) — else a handler that polls ``ctx.cancelled`` to stop cleanly runs
        on until the loop gives up on it and abandons it (a thread left behind, a child
        killed mid-write)."""
        local = self._local(a)
        knew = local is not None and bool(local.cancel_seen)
        told = bool(ctx.cancelled)
        if knew and not told:
            self.views.append(
                f"the handler of {a} was told its attempt goes on after its loop noticed it "
                f"must stop"
            )
        return told

    # -- the loops --------------------------------------------------------------------------
    def loop(self, w: str) -> WorkerLoop:
        """The loop of incarnation ``w`` (built at its first step: the incarnation must have
        started and be up); from then on only its loop renews its heartbeat."""
        if w in self.ended:
            raise NotEnabled(f"the loop of {w} ended")
        loop = self.loops.get(w)
        if loop is not None:
            return loop
        sim = self.sim
        wk: Worker = sim.workers[w]
        if w not in sim.started or not wk.up:
            raise NotEnabled(f"{w} is not running")
        tick = sim.stores.config.tick_ms / 1000
        links: Links = wk.actor.links
        reconciler: Reconciler = sim.parts.reconciler(
            sim.stores,
            f"{w}.reconciler",
            hook=sim.hook,
            recorder=sim.recorder,
            links=links,
            incarnation=w,
        )
        k = len(self.loops)
        reconciler.clean_batch = self.parts.clean_batches[k % len(self.parts.clean_batches)] or (
            reconciler.clean_batch
        )
        executor: SteppedExecutor
        if self.parts.isolations[k % len(self.parts.isolations)] == "process":
            from remora.sim.jobs.processes import ProcessSteppedExecutor as Pool

            executor = Pool(
                w, self, wk.concurrency, self.parts.process_execution, self.parts.child_context
            )
        else:
            executor = SteppedExecutor(w)
        batch = self.parts.batches[k % len(self.parts.batches)]
        ticks = self.parts.outages[k % len(self.parts.outages)]
        outage = None if ticks is None else self.parts.watch(ticks * tick, sim.clock)
        if ticks is not None:
            self.budgets[w] = ticks * tick
        loop = self.parts.loop(
            wk,
            poll=tick,
            reconcile_every=tick,
            grace=STOP_GRACE_TICKS * tick,
            executor=executor,
            batch=batch,
            outage=outage,
            reconciler=reconciler,  # the loop gives it the outage watch, as production's
        )
        loop.schedule = self.parts.schedule(reconciler, tick, loop.schedule.full_every)
        if ticks is not None:
            # Note the failed calls on the record (the watch the loop installed, if any,
            # still hears every call): the budget's promise counts from them.
            note = functools.partial(self._failed, w)
            for actor in (wk.actor, reconciler.actor):
                actor.watch = _WatchTap(actor.watch, sim.clock, note)
        self.loops[w] = loop
        self.executors[w] = executor
        sim.looped.add(w)
        return loop

    def turn(self, w: str) -> Pause | None:
        """One turn of ``w``'s loop; when it ends, the loop closes as :meth:`WorkerLoop.run`
        does (abandoning what still runs, shutting the incarnation down)."""
        loop = self.loop(w)
        now = self.sim.clock.now()
        self.first_in_tick = self.turned_at.get(w) != now  # time passes only by Tick
        self.turned_at[w] = now
        before = [(actx, actx.tended) for actx, _ in loop.running.values()]
        # handlers run only in their own stretches, never within a turn; an ended one's
        # settlement has begun once its worker's record says so (a handler's output may
        # still be staged between its return and its settlement)
        self.ended_at_turn = {
            a
            for a in loop.running
            if a in self.ends and getattr(loop.worker.attempts.get(a), "handler_done", False)
        }
        store = self.sim.stores.coordination
        held = {j: r.rid for j, r in store.snapshot().reservations.items() if r.worker == w}
        self._observe_ready(w)
        self.slot_free = len(loop.running) < loop.worker.concurrency
        running = set(loop.running)
        stopping = w in self.stop_asked
        self.must_end = self._observe_stop(w, loop, len(self.executors[w].live()))
        self.end_tries = {a: actx.end_next_try for a, (actx, _) in loop.running.items()}
        pause = self.pause = loop.turn()
        self.started = [a for a in loop.running if a not in running]
        self._observe_ready(w, after=True)
        due = self._due_activations(w)
        self.promise_reach = ["activation-due"] if due and self.started else []
        self.tended = [actx for actx, at in before if actx.tended != at]
        self.ended_by_turn = [
            actx.attempt
            for actx, _ in before
            if pause is not None and actx.abandoned and actx.attempt not in loop.running
        ]
        if any(
            actx.end_pending and self.timed_out(a, now) for a, (actx, _) in loop.running.items()
        ):
            # a timed-out attempt's end met a store away: left for a later turn
            self.timeout_reach.add("its end left for a later turn")
        coord = self.coord_after = store.snapshot()
        self.tend_reach = [_tend_state(coord, actx.attempt) for actx in self.tended]
        self.reserved = {
            j: r.rid
            for j, r in coord.reservations.items()
            if r.worker == w and held.get(j) != r.rid
        }
        if pause is None:
            # The watch's verdict when the turn ended, before the close's calls (an answered
            # shutdown ends the outage it saw).
            self.outlasted = None if loop.outage is None else loop.outage.exceeded()
            if self.outlasted is not None:
                self.promise_reach.append("outage-end")
            if stopping:
                self.promise_reach.append("stop-end")
            self.ended.add(w)
            loop.close()
            self.last = LoopOutcome("turn", "ended")
        else:
            self.last = LoopOutcome("turn", pause.wait.value)
        return pause

    def _observe_ready(self, w: str, after: bool = False) -> None:
        """Around a turn of ``w``'s loop: which of its authorized attempts are ready to
        activate at its start (:attr:`ready`); when a turn last began without each one
        ready, or (``after``) authorized it."""
        wk: Worker = self.sim.workers[w]
        now = self.sim.clock.now()
        authorized = [a for a, local in list(wk.attempts.items()) if local.state == AUTHORIZED]
        if after:
            for a in authorized:
                self.unready_at.setdefault((w, a), now)
            return
        self.ready_at_start = ready = self.ready(w)
        for a in authorized:
            if a not in ready:
                self.unready_at[(w, a)] = now

    def ask_stop(self, w: str) -> None:
        """``w``'s process is asked to stop (SIGTERM: ``remora jobs worker`` sets its
        loop's ``stop``): no new work; its handlers get the grace period."""
        self.loop(w).stop.set()
        self.stop_asked.setdefault(w, self.sim.clock.now())

    def _observe_stop(self, w: str, loop: WorkerLoop, live: int) -> list[str]:
        """Before a turn of ``w``'s loop (``live``: its handlers running): why the turn must
        end the loop, if it must (:meth:`_lingering` judges it after the turn)."""
        if w not in self.stop_asked:
            return []
        now = self.sim.clock.now()
        first = w not in self.stopping_since
        since = self.stopping_since.setdefault(w, now)
        must = []
        if not first and self.drained.get(w):
            must.append("drained")  # its previous turn, already stopping, ran no handler
        if now >= since + loop.grace - 1e-9:
            must.append("past its grace")
        self.drained[w] = live == 0
        return must

    def link_changed(self, w: str, service: Service) -> None:
        """``w``'s link to ``service`` is dropped or restored: an outage the budget's
        promise counted on it is over (a new one begins at the next failed call)."""
        self.cut_since.pop((w, service), None)

    def _failed(self, w: str, service: str) -> None:
        """A call of ``w``'s incarnation or reconciler to ``service`` failed
        (:class:`_WatchTap`): when its link is down, the outage the loop's budget counts
        from has begun (no call to it can be answered while the link stays down)."""
        svc = _SERVICE_OF_NAME.get(service)
        if svc is not None and svc in self.sim.workers[w].actor.links.down:
            self.cut_since.setdefault((w, svc), self.sim.clock.now())

    def handler_step(self, w: str, a: AttemptId) -> bool:
        """The next step of the handler of ``a`` in ``w``'s loop (until it pauses or
        ends); True when it ended (its attempt settled)."""
        self.loop(w)
        execution = self.executors[w].executions.get(a)
        if execution is None:
            raise NotEnabled(f"{w}'s loop does not run {a}")
        execution.step()
        if a in self.ends:
            self.end_step.setdefault(a, execution.steps)
        self.stepped = (a, execution.steps - self.end_step.get(a, execution.steps))
        self.tended, self.tend_reach = [], []
        self.last = LoopOutcome("handler", "settled" if execution.finished else "paused")
        self.settled = a if execution.finished else None
        return execution.finished

    def reconcile(self, w: str) -> float:
        """One pass of the reconciler's schedule in ``w``'s loop."""
        seconds = self.loop(w).schedule.turn()
        self.tended, self.tend_reach = [], []
        self.last = LoopOutcome("reconcile", "pass")
        return seconds

    def reconcile_crossed(self, w: str, at: int) -> bool:
        """One pass of ``w``'s reconcile schedule crossed by another incarnation's: at the
        ``at``-th store call of ``w``'s pass that opens while none of its calls is open (no
        durable transaction, no lock held), the next looping incarnation's pass (in id
        order, after ``w``) runs whole; then ``w``'s pass goes on, its reads now stale.
        Production's reconcilers run in threads of their own processes, so their passes
        interleave so; an atomic pass per rule never let one pass act on what another
        had just changed.  Whether the other pass ran (``w``'s pass made fewer calls, or
        no other loop runs: a plain pass)."""
        others = [x for x in self._crossable() if x != w]
        after = [x for x in others if x > w] or others
        reconciler = self.loop(w).schedule.reconciler
        if not after:
            self.reconcile(w)
            return False
        other = after[0]
        inner = reconciler.actor.hook
        crossing = Crossing(inner, at, lambda: self.loop(other).schedule.turn())
        reconciler.actor.hook = crossing
        try:
            self.reconcile(w)
        finally:
            reconciler.actor.hook = inner
        if crossing.ran:
            self.last = LoopOutcome("reconcile", "crossed")
        return crossing.ran

    def _crossable(self) -> list[str]:
        sim = self.sim
        return sorted(
            x
            for x in sim.started
            if x not in sim.killed and x not in self.ended and sim.workers[x].up
        )

    def reconciler_reaches(self, w: str) -> bool:
        """Whether the reconciler of ``w``'s loop has every link up (its pass then met no
        store failure but an injected fault)."""
        loop = self.loops.get(w)
        return loop is not None and not loop.schedule.reconciler.actor.links.down

    def running(self) -> list[tuple[str, AttemptId]]:
        """Every handler the loops may step: (incarnation, attempt)."""
        return [
            (w, a)
            for w, ex in sorted(self.executors.items())
            if w not in self.ended
            for a, e in sorted(ex.executions.items(), key=lambda x: str(x[0]))
            if e.live
        ]

    def stop(self, w: str) -> None:
        """``w``'s process is gone (a crash): its handler threads end with it."""
        ex = self.executors.get(w)
        if ex is not None:
            ex.kill_all()
        if w in self.loops:
            self.ended.add(w)
        self.sim.looped.discard(w)

    def close(self) -> None:
        """End every loop's threads (the drain takes over the incarnations, or the run is
        over)."""
        for w in list(self.executors):
            self.stop(w)

    # -- the loop's promises ----------------------------------------------------------------
    def problems(self, op: str, w: str, faulted: bool) -> list[str]:
        """The promises a clean loop step (``faulted``: a fault fired in it) of ``w``
        broke (module docstring)."""
        if self.views:
            return self.views[:1]  # faulted or not: a handler's view is the attempt's
        sim = self.sim
        wk: Worker = sim.workers[w]
        loop = self.loops.get(w)
        if op == "loop-turn" and w in self.stop_asked and loop is not None:
            lingering = self._lingering(w, loop)  # faulted or not: the stop is the loop's own
            if lingering:
                return lingering
        if op == "loop-turn" and loop is not None and self.pause is None:
            return self._spurious_end(w, loop)  # faulted or not: an end needs its reason
        if op == "loop-turn" and loop is not None:
            outlasted = self._outlasted(w)  # faulted or not: the budget is the loop's
            if outlasted:
                return outlasted
        if faulted or wk.actor.links.down or not wk.up:
            self.troubled.update(a for a in self.ends if a not in self.sent)
            if op == "loop-turn":
                self.rough_turn[w] = sim.clock.now()
        if loop is None or faulted or wk.actor.links.down or not wk.up or w in self.ended:
            return []
        out: list[str] = []
        now = sim.clock.now()
        result = self.pause
        if op == "loop-turn" and result is not None:
            _, rows = sim.stores.durable.liveness(now)
            seen = {wid: at for wid, up, at in rows if up}
            if w in seen:
                self.clean_at[w] = now
            out.extend(self._unlearned(w, now))
            if w in seen and now - seen[w] >= loop.beat_every:
                out.append(
                    f"the heartbeat of {w} is {now - seen[w]:g}s old after a clean turn of "
                    f"its loop (it beats every {loop.beat_every:g}s)"
                )
            if result.wait is Wait.HANDLER and loop.deadline is None:
                # a slot is held by a live handler, or by its loop's end of an attempt left
                # for a later turn (a store was away; its handler may have returned)
                live = len(self.executors[w].live()) + sum(
                    1
                    for actx, execution in loop.running.values()
                    if actx.end_pending and execution.done()
                )
                if live < wk.concurrency:
                    out.append(
                        f"the loop of {w} waits for a handler with {live} of its "
                        f"{wk.concurrency} slots running one"
                    )
        if op == "loop-turn" and result is not None:
            out.extend(self._stuck_ends(w, loop, now))
            out.extend(self._unnoticed(w))
            out.extend(self._unrenewed(w, loop))
            out.extend(self._overrun(w, loop))
            for a in self.ended_by_turn:
                out.extend(self._unreleased(w, a, "after its loop ended it"))
            out.extend(self._idle(w, loop))
            out.extend(self._unactivated(w, loop))
            out.extend(self._orphaned(w, loop))
        if op == "loop-handler" and self.stepped is not None:
            a, after = self.stepped
            if a == self.settled or after >= 2:
                out.extend(self._unsent(w, a))
        if op == "loop-handler" and self.settled is not None:
            held = loop.running.get(self.settled)
            if held is None or not held[0].end_pending:  # else its loop's end releases it
                out.extend(self._unreleased(w, self.settled, "after its settlement"))
        reads = (JobOperation.DURABLE_READ, JobOperation.COORD_READ)
        if op.startswith("loop-reconcile") and not any(r in sim.hook.last for r in reads):
            out.append(f"a scheduled reconcile pass of {w} read nothing (it was skipped)")
        return out

    def declarations(self, steps: Iterable[tuple[Any, Any]]) -> list[tuple[str, str]]:
        """The declarations of incarnations by others among a step's spec ``steps``
        (:func:`~remora.sim.jobs.judgement.declared_by_other`), as (incarnation, actor);
        each one's time is noted for :meth:`_unlearned`."""
        out = []
        for r, _ in steps:
            w = declared_by_other(r)
            if w is not None:
                out.append((w, str(r.actor)))
                self.declared_at.setdefault(w, self.sim.clock.now())
        return out

    def spurious_declarations(self, declared: Iterable[tuple[str, str]]) -> list[str]:
        """No spurious declaration (the job side's "no spurious fence"), judged from the
        durable store's own record — a step's ``CrashWorker(w)`` by another actor,
        ``declared`` (:meth:`declarations`) — and
        independent of the loop's own beat period: a loop that took a clean turn at ``t``
        left a heartbeat younger than the documented cadence (``down_after`` /
        :data:`BEATS_PER_DOWN_AFTER`), so nobody may declare it down before ``t`` +
        ``down_after`` minus that cadence.  A loop that misses a turn or two keeps its
        incarnation; a heartbeat period as long as ``down_after`` (or a declarer that does
        not wait for the whole ``down_after``) takes a healthy worker out — its handlers
        abandoned, its jobs retried — and no spec step is wrong: a worker may always go
        down.  (An incarnation no loop drives: :meth:`early_declarations`.)"""
        down_after = self.sim.stores.config.down_after_s
        margin = down_after - down_after / BEATS_PER_DOWN_AFTER
        now = self.sim.clock.now()
        out = []
        for w, actor in declared:
            if w not in self.clean_at:
                continue  # an incarnation whose loop never turned clean: early_declarations
            quiet = now - self.clean_at[w]
            if quiet < margin - 1e-9:
                out.append(
                    f"{w} was declared down by {actor} {quiet:g}s after a clean turn of its "
                    f"loop: a loop beats {BEATS_PER_DOWN_AFTER} times per down_after "
                    f"({down_after:g}s), so it may be declared only {margin:g}s after its "
                    f"last clean turn"
                )
        return out

    def _stuck_ends(self, w: str, loop: WorkerLoop, now: float) -> list[str]:
        """A loop's end of an attempt tried in a clean turn (no fault, its links up, the
        incarnation up) is over by the turn's end: every one of its steps either took or
        was moot, none had a store away — unless it waits for a stop condition
        (``stop`` first: a rejected outcome's attempt goes on until one holds).  An end
        left pending for no reason holds its slot for good."""
        out = []
        for a, (actx, _) in sorted(loop.running.items()):
            left = actx.end_left
            tried = actx.end_next_try != self.end_tries.get(a, 0.0)  # in this turn
            if left and left[0] != "stop" and tried:
                out.append(
                    f"the loop of {w} tried to end {a} in a clean turn and left "
                    f"{list(left)} pending"
                )
        return out

    def early_declarations(self, declared: Iterable[tuple[str, str]]) -> list[str]:
        """No early declaration of an incarnation the simulation beats on its ticks
        (:attr:`~remora.sim.jobs.simulation.Simulation.beats`; its loop, if any, never
        turned clean): nobody may declare it down before its last heartbeat is
        ``down_after`` old."""
        down_after = self.sim.stores.config.down_after_s
        now = self.sim.clock.now()
        return [
            f"{w} was declared down by {actor} {now - beat:g}s after its last heartbeat "
            f"(down_after {down_after:g}s)"
            for w, actor in declared
            if w not in self.clean_at
            and (beat := self.sim.beats.get(w)) is not None
            and now - beat < down_after - 1e-9
        ]

    def _unlearned(self, w: str, now: float) -> list[str]:
        """A declared incarnation learns it is down within one heartbeat period (the
        contract's cadence, :data:`BEATS_PER_DOWN_AFTER`): a clean turn that much after
        another incarnation declared ``w`` down ends ``w``'s loop — its heartbeat was due
        (no beat can have landed since the declaration) and matched no row.  A loop that
        runs on is a zombie process: it takes steps the fences refuse, and holds its
        slots, and never exits so that its supervisor could start a new incarnation; the
        down marks usually tell it first, but not after a wipe, before they are
        republished."""
        at = self.declared_at.get(w)
        period = self.sim.stores.config.down_after_s / BEATS_PER_DOWN_AFTER
        if at is None or now - at < period - 1e-9:
            return []
        return [
            f"the loop of {w} took a clean turn {now - at:g}s after {w} was declared down and "
            f"runs on: it must learn within one heartbeat period ({period:g}s)"
        ]

    def _spurious_end(self, w: str, loop: WorkerLoop) -> list[str]:
        """A loop's end has its reason (:meth:`WorkerLoop.turn`): asked to stop (and
        drained, or past its grace), a store away past the outage budget, or its
        incarnation knowing it is down (it learned a declaration: its heartbeat refused, a
        down mark) — never a failed call alone.  A loop that ends on a transient failure
        takes a healthy worker out (its process exits, its handlers are abandoned) and no
        spec step is wrong: a worker may always go down."""
        wk: Worker = self.sim.workers[w]
        if not loop.failed:
            if loop.stop.is_set():
                return []
            why = "nobody asked it to stop"
        elif isinstance(loop.failed[-1], WorkerDown):
            if not wk.up:
                return []
            why = f"it failed with {loop.failed[-1]} though {w} does not know it is down"
        else:
            if self.outlasted is not None:
                return []
            why = f"it failed with {loop.failed[-1]} though no store is away past its budget"
        return [f"the loop of {w} ended: {why}"]

    def _outlasted(self, w: str) -> list[str]:
        """An outage budget's promise (``--outage-budget``, :class:`~remora.worker.outage.
        OutageWatch`): a loop one of whose calls (its incarnation's, its reconciler's)
        met its link to a store down more than its budget ago, the link down ever since,
        ends at its next turn
        (:class:`~remora.errors.OutageExceeded`: the process exits 1 and its supervisor
        sees it) — judged from the simulation's own record of the links, not from the
        watch.  A loop that rides an outage out forever keeps its slots and its
        reservations while it can do nothing, and nobody is told."""
        budget = self.budgets.get(w)
        if budget is None:
            return []
        now = self.sim.clock.now()
        return [
            f"the loop of {w} runs on {now - since:g}s after a call met its link to the "
            f"{svc.value} store down (down ever since), past its outage budget ({budget:g}s)"
            for (x, svc), since in sorted(self.cut_since.items(), key=lambda kv: kv[0][1].value)
            if x == w and now - since > budget + 1e-9
        ]

    def _unnoticed(self, w: str) -> list[str]:
        """A tend's promise (:meth:`~remora.jobs.attempt.AttemptContext.tend`): an executing
        attempt that a clean turn tended, whose job has a cancel notice or whose lease is
        gone or no longer live, knows it must stop (``cancel_seen``) — else its handler is
        never told (``ctx.cancelled`` stays false) and runs on, its output staged for an
        attempt that lost the job, until it ends by itself."""
        why = {"notice": "its job has a cancel notice", "lost": "its lease is gone or dead"}
        return [
            f"a clean turn of the loop of {w} tended {actx.attempt} and did not notice that "
            f"{why[seen]} (it does not know it must stop)"
            for actx, seen in zip(self.tended, self.tend_reach, strict=True)
            if seen in why and actx.local.state == EXECUTING and not actx.local.cancel_seen
        ]

    def _unrenewed(self, w: str, loop: WorkerLoop) -> list[str]:
        """A tend's cadence (:class:`~remora.jobs.loop.WorkerLoop`: an executing attempt is
        tended once a tick): the first clean turn of a loop in a tick leaves none of its
        running attempts' leases renewable — every attempt still executing, with no outcome
        in flight, its handler not done and no cancel notice, whose lease the spec lets its
        incarnation renew (``RenewLease``'s guard on the coordination store after the
        turn), was renewed.  A loop that tends less often (a tick counted as not yet
        passed) lets a healthy handler's lease age towards its expiry — the attempt reaped
        and retried though its worker is well — and no spec step is wrong: a lease may
        always expire.  (Only the tick's first turn: a later one may rightly skip an
        attempt an earlier, faulted turn of the tick tended.)"""
        if not self.first_in_tick:
            return []
        cfg = self.sim.stores.config
        coord = self.coord_after  # read once, after the turn
        guards = self.sim.stores.guards
        out = []
        for a, (actx, _) in sorted(loop.running.items()):
            local = actx.local
            if (
                local.state != EXECUTING
                or local.outcome_sent
                or local.handler_done
                or actx.abandoned
                or a.job in coord.notices
            ):
                continue
            if guards.can_renew(coord, a, w, cfg.tick_ms, cfg.lease_ticks):
                lease = coord.leases[a]
                ticks = (coord.now_ms - lease.at_ms) // cfg.tick_ms
                out.append(
                    f"the first clean turn of the loop of {w} in its tick left the lease of "
                    f"{a} {ticks} tick(s) old and renewable (a loop tends each running "
                    f"attempt once a tick)"
                )
        return out

    def _idle(self, w: str, loop: WorkerLoop) -> list[str]:
        """A dispatch's promise (:class:`~remora.jobs.loop.Dispatcher`): a reservation a
        clean turn took and still holds, of a job that is terminal or cancelling (when the
        spec's ``ReleaseReservation`` lets its holder give it back), is in the loop's hands
        — its ``AuthorizeAttempt`` to be tried again (the store was unavailable) or an
        attempt it authorized waiting to activate — else nobody uses it and the job's
        cancellation or cleanup waits until it expires (a refused authorization releases
        its reservation).  No spec step is wrong: a reservation may always expire."""
        wk: Worker = self.sim.workers[w]
        out = []
        for job, rid in sorted(self.reserved.items()):
            phase = self.sim.stores.durable.job(job).phase
            if not (phase.terminal or phase is Phase.CANCELLING):
                continue  # the spec lets its holder release it only then (it waits)
            if wk.reservations.get(job) == rid and (
                job in loop.dispatcher.unauthorized
                or any(
                    a.job == job and local.rid == rid and local.state == AUTHORIZED
                    for a, local in wk.attempts.items()
                )
            ):
                continue
            out.append(
                f"a clean turn of the loop of {w} reserved {job} and left the reservation "
                f"idle: no authorization or activation of its own waits for it, and the job "
                f"is {phase.value} (it waits for the reservation to expire)"
            )
        return out

    def _lingering(self, w: str, loop: WorkerLoop) -> list[str]:
        """A stop's promises (``remora jobs worker`` on SIGTERM, :meth:`WorkerLoop.turn`):
        a turn of a loop asked to stop takes no new work (it reserves nothing, starts no
        attempt), and ends the loop once it must (:meth:`_observe_stop`): its previous
        turn, already stopping, began with no handler running (drained), or its grace
        has run out.  A stopping loop that lingers holds a deploy up (every idle worker
        waits out its grace) or never exits (a handler that never returns); one that takes
        work abandons it at the deadline.  No spec step is wrong either way."""
        out = []
        if self.started:
            out.append(f"the loop of {w} started {self.started[0]} after it was asked to stop")
        if self.reserved:
            out.append(f"the loop of {w} reserved {min(self.reserved)} after it was asked to stop")
        if self.pause is not None and self.must_end:
            out.append(
                f"the loop of {w}, asked to stop {self.sim.clock.now() - self.stop_asked[w]:g}s "
                f"ago, took a turn and runs on though {' and '.join(self.must_end)} (its grace "
                f"is {loop.grace:g}s)"
            )
        return out

    def _due_activations(self, w: str) -> list[AttemptId]:
        """The attempts ready to activate at the start of the last turn of ``w``'s loop a
        tick or more after the last turn that may have been refused their activation (one
        that began with them not ready, or authorized them): a turn must retry those."""
        tick = self.sim.stores.config.tick_ms / 1000
        now = self.sim.clock.now()
        return sorted(
            (
                a
                for a in self.ready_at_start
                if now - self.unready_at.get((w, a), float("-inf")) >= tick - 1e-9
            ),
            key=str,
        )

    def _unactivated(self, w: str, loop: WorkerLoop) -> list[str]:
        """An activation's promise (:meth:`~remora.jobs.loop.Dispatcher.
        awaiting_activation`): a clean turn that begins with a slot free while an
        authorized attempt of its incarnation is ready to activate (the spec enables its
        ``ActivateAttempt`` and no documented reason for refusing it holds) starts an
        attempt — when a tick or more has passed since the last turn that began with that
        attempt not ready or authorized it (only such a turn may have been refused its
        activation: a correct runtime does not refuse a ready one; the dispatcher tries a
        refused activation again once a tick).  An activation refused earlier (another
        attempt's lease still live) must be tried again; given up,
        the attempt stays authorized until its reservation expires and the reaper takes it
        back — a wasted attempt, its checkpoint's resumption lost, and the job waits a
        reservation period for nothing.  No spec step is wrong: a reservation may always
        expire."""
        if not self.slot_free or self.started or loop.deadline is not None:
            return []
        late = self._due_activations(w)
        if not late:
            return []
        return [
            f"a clean turn of the loop of {w} with a slot free started nothing though "
            f"{late[0]} is ready to activate (the spec enables its ActivateAttempt and no "
            f"documented reason refuses it) a tick or more after a refusal was possible"
        ]

    def missent(self, w: str, steps: Iterable[tuple[Any, Any]], op: str = "") -> list[str]:
        """What a loop's settlement sends is what its handler asked for: every
        ``SendOutcome`` that ``w`` took in a loop step (``steps``: the spec actions of that
        step) names the outcome ``w``'s handler of the attempt ended with (:attr:`ends`,
        :func:`handler_asks`) — faulted or not, and whichever way the outcome travels (its
        handler's settlement, a batch flushed by a later turn).  A permanent failure sent
        as retryable runs a job its handler refused again until its budget is spent; a
        retryable one sent as permanent gives up a job that would have succeeded; an
        outcome sent for a handler that stopped, or has not ended, settles work nobody
        finished — and every one of these is a step the spec allows.  One exception is
        documented: a success whose output's deferred stage was refused is sent as a
        retryable failure (docs/jobs.md), so a success may travel as a retryable failure
        — but only from a spec state where its stage is not complete (:attr:`staged`): a
        success whose stage did land, sent as a retryable failure, throws that work away
        and spends one of the job's attempts.  A worker may send any outcome, so only the
        handler's own account tells these apart."""
        out = []
        now = self.sim.clock.now()
        for r, s in steps:
            if r.action == Action.ACTIVATE_ATTEMPT and str(r.actor) == w:
                self.activated.setdefault(AttemptId.parse(str(r.params["a"])), now)
            if r.action == Action.COOPERATIVE_STOP and str(r.actor) == w:
                stopped = AttemptId.parse(str(r.params["a"]))
                if stopped.token == 1 and stopped.job in self.gives_up and stopped in self.ends:
                    self.give_up_reach.add("stopped once its lease was lost")
            if r.action == Action.RENEW_LEASE and str(r.actor) == w and op == "loop-turn":
                out += self._renewed_ended(w, AttemptId.parse(str(r.params["a"])))
            if r.action != Action.SEND_OUTCOME or str(r.actor) != w:
                continue
            a = AttemptId.parse(str(r.params["a"]))
            sent = str(r.params["outcome"])
            self.sent.add(a)
            if sent == Outcome.RETRYABLE.value and self.timed_out(a, now):
                # the attempt overran its timeout: a retryable failure whatever its handler
                # asked for, or before it ended (docs/jobs.md)
                how = "ended by its loop" if op == "loop-turn" else "settled by its handler"
                self.timeout_reach.add(how)
                if 0 < self.handler_timeout < self.timeouts.get(a.job, 0.0):
                    self.timeout_reach.add("by its handler's, its job's larger")
                continue
            asked = self.ends.get(a, "")
            if (
                asked == Outcome.SUCCESS.value
                and sent == Outcome.RETRYABLE.value
                and not self.staged(s, a)
            ):
                continue  # a refused stage: a retryable failure (docs)
            if a not in self.ends:
                out.append(f"the loop of {w} sent {sent} for {a}, whose handler has not ended")
            elif self.ends[a] != sent:
                asked = self.ends[a] or "no outcome (it stopped cooperatively)"
                out.append(f"the loop of {w} sent {sent} for {a}, whose handler asked for {asked}")
        return out

    def _orphaned(self, w: str, loop: WorkerLoop) -> list[str]:
        """After a clean turn of a loop that is not stopping: every attempt its incarnation
        holds executing is one its loop runs (a handler, or its settlement under way, or
        the loop's own end of it).  One the loop forgot while the incarnation's record
        still says executing holds a slot for good — the incarnation counts it against its
        concurrency (``ExecutingFor``) — and nothing renews, ends or stops it: its lease
        is reaped and its job retried elsewhere, but the incarnation never learns it.
        Every step is one the spec allows."""
        if loop.deadline is not None or w in self.stop_asked:
            return []
        wk: Worker = self.sim.workers[w]
        return [
            f"{w} holds {a} executing, but its loop runs no handler for it (its slot is "
            f"taken for good)"
            for a, local in sorted(wk.attempts.items(), key=lambda x: str(x[0]))
            if local.state == EXECUTING and a not in loop.running
        ][:1]

    def _renewed_ended(self, w: str, a: AttemptId) -> list[str]:
        """The heartbeat's promise (docs/jobs.md, *Handler API*; :func:`~remora.jobs.
        settlement.settle`): a lease is renewed only while its handler runs.  Once the
        handler has ended, the attempt's settlement sends its outcome or waits for a stop
        condition without renewing — a handler that gave up on its own (``Cancelled``
        unasked) loses its lease within a lease period and the job is retried.  A lease
        renewed after its handler ended keeps such a job, and its slot, forever while the
        incarnation runs; every renewal is a step the spec allows."""
        if a not in self.ended_at_turn:
            return []
        asked = self.ends.get(a) or "no outcome (it stopped cooperatively)"
        return [f"the loop of {w} renewed the lease of {a}, whose handler had ended ({asked})"]

    def set_handler_timeout(self, seconds: float) -> None:
        """Register the run's handler with a timeout of ``seconds`` (0: none), as
        ``@handler(..., timeout=)`` does."""
        self.handler_timeout = seconds
        self.registry.handler(HANDLER, timeout=seconds or None)(self.handler)

    def timeout_of(self, a: AttemptId) -> float:
        """The timeout of ``a`` in seconds (0: none): the smaller of its handler's and its
        job's, as docs/jobs.md states it — stated here on its own, never read from
        :class:`~remora.jobs.attempt.AttemptContext`, which it judges."""
        limits = [t for t in (self.handler_timeout, self.timeouts.get(a.job, 0.0)) if t]
        return min(limits, default=0.0)

    def timed_out(self, a: AttemptId, now: float) -> bool:
        """Whether ``a`` has run its timeout (:meth:`timeout_of`) by ``now`` (from its
        activation, as the run saw it: :attr:`activated`)."""
        timeout = self.timeout_of(a)
        start = self.activated.get(a)
        return bool(timeout) and start is not None and now - start >= timeout

    def _overrun(self, w: str, loop: WorkerLoop) -> list[str]:
        """A timeout's promise (:class:`~remora.jobs.loop.WorkerLoop`, docs/jobs.md): an
        attempt that overran its job's timeout is asked to stop, and a turn at least the
        loop's ``cancel_grace`` after it ends it as a retryable failure — judged at a clean
        turn, of an attempt still executing whose handler has not ended (its settlement
        decides then), that saw no stop condition of its own and sent nothing, whose
        retryable failure the spec enables, with no rough turn of its loop within the last
        tick (a failed try waits a tick).  One that is never ended holds its slot and its
        job's lease for as long as its handler runs: a job with a timeout hangs anyway."""
        now = self.sim.clock.now()
        tick = self.sim.config.jobs_config.tick_ms / 1000
        wk: Worker = self.sim.workers[w]
        out = []
        for a in sorted(loop.running, key=str):
            local = wk.attempts.get(a)
            if (
                not self.timed_out(a, now)
                or local is None
                or local.state != EXECUTING
                or local.cancel_seen
                or local.outcome_sent
                or a in self.ends
            ):
                self.overran.pop(a, None)
                continue
            first = self.overran.setdefault(a, now)
            if (
                now - first >= loop.cancel_grace
                and now - self.rough_turn.get(w, -tick) >= tick
                and self.sendable(w, a, Outcome.RETRYABLE.value)
            ):
                out.append(
                    f"a clean turn of the loop of {w} left {a} running "
                    f"{now - self.activated[a]:g}s after its activation (its timeout "
                    f"is {self.timeout_of(a):g}s; a clean turn saw it overrun "
                    f"{now - first:g}s ago, its grace is {loop.cancel_grace:g}s)"
                )
        return out

    def _unsent(self, w: str, a: AttemptId) -> list[str]:
        """A clean settlement sends what its handler asked for: once the handler of ``a``
        ended asking for an outcome (:attr:`ends`), at a clean step of it that ended its
        settlement or came two or more steps after the handler's end (a batched completion
        waits one step for others to join), with no fault since the handler ended
        (:attr:`troubled`), either the outcome
        was sent or the spec no longer enables sending it (no documented reason for a
        refusal holding) — unless the settlement saw its job's cancel or its lease lost
        (then it stops cooperatively instead: docs/jobs.md).  A settlement that drops an
        outcome leaves the attempt to its lease's expiry and the reaper: a lease period
        lost, and the handler's error gone from the job's history (it shows "reaped")."""
        asked = self.ends.get(a)
        local = self.sim.workers[w].attempts.get(a)
        if asked is None or a in self.sent or a in self.troubled or local is None:
            return []
        if local.cancel_seen or not self.sendable(w, a, asked):
            return []
        return [
            f"the handler of {a} in the loop of {w} asked for {asked}, and its settlement "
            f"ended without sending it though the spec enables it"
        ]

    def _unreleased(self, w: str, a: AttemptId, when: str) -> list[str]:
        """A clean settlement's promise (:func:`~remora.jobs.settlement.settle`), and a
        clean turn's that ended an attempt itself (``AttemptContext.end_from_loop``: a
        timeout's retryable failure, a stop condition's grace outlived): an attempt whose
        settlement (or whose end by its loop) came while its incarnation stayed up and
        connected was finished or stopped, and its lease is released — else a cancelled,
        stopped or timed-out attempt keeps its job's lease until it expires (or a
        reconcile pass releases it), delaying the job's next step for nothing."""
        lease = self.sim.stores.coordination.snapshot().leases.get(a)
        if lease is None or not lease.live or lease.worker != w:
            return []
        state = self.sim.workers[w].attempts[a].state
        return [
            f"the lease of {a} is still held {when} in the loop of {w} ({state}): a clean "
            f"settlement releases it"
        ]


__all__ = [
    "BEATS_PER_DOWN_AFTER",
    "HANDLER",
    "PRODUCTION_LOOP",
    "LoopHung",
    "LoopOutcome",
    "LoopParts",
    "PausingClock",
    "SimLoops",
    "SteppedExecution",
    "SteppedExecutor",
]
