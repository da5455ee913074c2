"""Hypothesis state machines over the real job runtime.

:class:`JobRuntimeMachine` is a :class:`~hypothesis.stateful.RuleBasedStateMachine` whose
rules are the runtime's steps — client (submit, cancel), worker (reserve, authorize,
activate, renew, advance/stage, checkpoint, report progress, send outcome, process outcome,
cooperative stop, record stop, release lease/reservation, credential writes), reconciler
(every ambient action by name, and whole reconcile passes, which include credential
cleanup), environment (tick, crash, clean shutdown, start an incarnation, drop/restore a
link per worker and service, wipe the coordination store) — and most of them may carry fault
selectors: the *n*-th call of an operation in the step aborts or loses its reply
(``unknown-committed``/``unknown-aborted``, on every durable, coordination, target and vault
write).  Each rule builds one :class:`~remora.sim.jobs.trace.JobStep` and runs it through
the shared executor :class:`~remora.sim.jobs.run.JobRun`, over the memory stores with
logical time.

* **Invariant** — refinement at every step: the step is enabled in alpha(before) and yields
  exactly alpha(after); every spec invariant and action property holds on alpha (checked
  inside :meth:`JobRun.execute`).
* **Teardown** — the fault-free fair drain must reach the runtime's quiescence, and every
  committed result must be the winning attempt's staged output
  (:meth:`JobRun.judge`).
* A failing run is exported atomically as a ``job-schedule-v1`` trace to
  ``artifacts/failures/hypothesis-<Machine>.json`` (or ``$REMORA_ARTIFACT_DIR``); the final
  shrunk example's trace is the one that remains, and the failure names the
  ``remora sim-jobs --replay`` command.

:class:`JobRaceMachine` composes each dangerous combination (a cancel or a reap, then the
old holder acts; a stale outcome after a replacement; a wipe under a reservation; a
credential write losing a reply, then its writer gone; ...) in one rule step, and sweeps
every step kind's lost replies in turn — so reaching them does not hang on the search's
luck.  Both share :class:`JobMachineBase` (the run, the executor, the checks).

Each class records its **reach** (``reach``): step kinds and their results, the calls each
step kind made, the faults that fired (and in which step kind), links dropped and
restored, the spec actions taken, outcomes sent, races composed; ``tests/stateful/
test_job_machines.py`` requires all of it, jointly, under the ``ci`` profile.

Size it with class attributes (``jobs``, ``workers``, ``concurrency`` and the limits)::

    class Bigger(JobRuntimeMachine):
        jobs = ("j1", "j2", "j3", "j4")

    TestBigger = Bigger.TestCase
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import attrs
from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from remora.clock import LogicalClock
from remora.faults import UNKNOWN_OUTCOMES
from remora.faults import Outcome as IOOutcome
from remora.jobs.io import JobOperation
from remora.jobs.model import DEFAULT_QUEUE, AttemptId, JobsConfig, Service
from remora.jobs.model import Outcome as JobOutcome
from remora.jobs.stores import Stores
from remora.outputs import write_output
from remora.sim.artifacts import failures_dir, job_replay_command
from remora.sim.jobs.judgement import JUDGEMENTS
from remora.sim.jobs.loops import PRODUCTION_LOOP, LoopParts
from remora.sim.jobs.run import LOOP_OPS, JobRun, JobRunFailure
from remora.sim.jobs.simulation import Parts
from remora.sim.jobs.trace import (
    CROSS_CALLS,
    FAULT_OUTCOMES,
    KILL_OPERATIONS,
    PLAIN,
    JobConfig,
    JobFault,
    JobKind,
    JobStep,
    JobTrace,
    new_trace,
)

FAULT_CHOICES: tuple[tuple[JobOperation, IOOutcome], ...] = tuple(
    (op, o) for op in JobOperation for o in sorted(FAULT_OUTCOMES[op], key=lambda x: x.value)
)
"""Every fault a selector can name: (operation, outcome)."""

_O = JobOperation
_NO_VAULT = tuple(o for o in JobOperation if o not in (_O.VAULT_READ, _O.VAULT_WRITE))
STEP_CALLS: dict[str, tuple[JobOperation, ...]] = {
    "submit": (_O.DURABLE_WRITE,),
    "cancel": (_O.COORD_WRITE, _O.DURABLE_WRITE),
    "start": (_O.DURABLE_WRITE,),
    "shutdown": (_O.DURABLE_WRITE,),
    "reconcile": tuple(JobOperation),
    # the mark, the fence, the declaration; the let-go of a mark whose declaration failed
    "declare-down": (_O.COORD_WRITE, _O.TARGET_WRITE, _O.DURABLE_WRITE),
    "enqueue": (_O.COORD_READ, _O.COORD_WRITE, _O.DURABLE_READ),
    "tick": (_O.DURABLE_WRITE,),  # the running incarnations' heartbeats
    "publish-cancel-notice": (_O.COORD_WRITE, _O.DURABLE_READ),
    "clean-terminal": (_O.COORD_WRITE, _O.DURABLE_READ),
    "clear-stale-progress": (_O.COORD_WRITE, _O.DURABLE_READ),
    "reconciler-release-reservation": (_O.COORD_WRITE, _O.DURABLE_READ),
    "expire-reservation": (_O.COORD_WRITE, _O.DURABLE_READ),
    "schedule-retry": (_O.DURABLE_WRITE,),
    "finalize-cancel": (_O.COORD_WRITE, _O.DURABLE_READ, _O.DURABLE_WRITE),
    "invalidate-checkpoint": (_O.DURABLE_WRITE,),
    "reconciler-release-lease": (_O.COORD_WRITE, _O.DURABLE_READ),
    "cleanup-stage": (_O.DURABLE_READ, _O.TARGET_READ, _O.TARGET_WRITE),
    "reap": (_O.COORD_READ, _O.COORD_WRITE, _O.DURABLE_READ, _O.DURABLE_WRITE),
    "expire-lease": (_O.COORD_WRITE,),
    "reconciler-process-outcome": (_O.DURABLE_WRITE, _O.TARGET_READ),
    "reserve": (_O.COORD_WRITE, _O.COORD_READ),  # a lost reply: the id is read back
    "authorize": (_O.COORD_READ, _O.DURABLE_WRITE),
    "release-reservation": (_O.COORD_WRITE, _O.DURABLE_READ),
    "activate": (_O.COORD_WRITE, _O.DURABLE_READ),
    "renew": (_O.COORD_WRITE,),
    "report-progress": (_O.COORD_WRITE,),
    "checkpoint": (_O.DURABLE_WRITE,),
    "cooperative-stop": (_O.COORD_READ, _O.DURABLE_READ),
    "advance": (_O.TARGET_WRITE,),
    "send-outcome": (_O.DURABLE_WRITE,),
    "process-outcome": (_O.DURABLE_WRITE, _O.TARGET_READ),
    "complete": (_O.DURABLE_WRITE, _O.TARGET_READ),
    "record-stop": (_O.DURABLE_READ, _O.DURABLE_WRITE),
    "release-lease": (_O.COORD_WRITE,),
    "put-secret": (_O.DURABLE_READ, _O.DURABLE_WRITE, _O.VAULT_READ, _O.VAULT_WRITE),
    # an incarnation's production loop: a turn (heartbeat, tending, dispatch, ending an
    # overdue attempt), its handler's next stretch (the simulation's handler stages and
    # checkpoints, then the settlement; it writes no secret), its reconcile schedule
    "loop-turn": _NO_VAULT,
    "loop-handler": _NO_VAULT,
    "loop-reconcile": _NO_VAULT,  # the loop machine writes no secret: no vault call
    "loop-reconcile-crossed": _NO_VAULT,
    "loop-stop": (),  # it only asks the loop to stop
}
"""The operations each step kind may call (environment steps — crash, wipe, link
changes — call none; a tick renews the running incarnations' heartbeats).  Fault
selectors are drawn from a step's own operations, so a drawn fault fires instead of naming
a call the step never makes; ``test_job_machines.py`` checks every call a run observed is
listed here."""

_durable_unknown = st.tuples(
    st.sampled_from([IOOutcome.UNKNOWN_COMMITTED, IOOutcome.UNKNOWN_ABORTED]), st.integers(1, 2)
).map(lambda t: JobFault(JobOperation.DURABLE_WRITE, t[1], t[0]))
_step_faults: dict[str, st.SearchStrategy[tuple[JobFault, ...]]] = {}


def kill_point(ops: tuple[JobOperation, ...]) -> st.SearchStrategy[JobFault] | None:
    """A kill point of a step that writes two stores or more (``ops``: its calls; None
    for any other step — a kill after a single store's write is a crash after the step):
    the process dies right after the 1st or 2nd call of one of its writes (durable,
    coordination, target, vault: :data:`~remora.sim.jobs.trace.KILL_OPERATIONS`), which
    committed (the cut between the stores), failed, or lost its reply — nothing more of
    the step runs, not even the resolution of that reply."""
    writes = sorted((o for o in ops if o in KILL_OPERATIONS), key=lambda o: o.value)
    if len(writes) < 2:
        return None
    outcomes = [IOOutcome.COMMIT, IOOutcome.ABORT, *sorted(UNKNOWN_OUTCOMES, key=str)]
    return st.tuples(st.sampled_from(writes), st.integers(1, 2), st.sampled_from(outcomes)).map(
        lambda t: JobFault(t[0], t[1], t[2], kill=True)
    )


def step_faults(op: str, *, some: bool = False) -> st.SearchStrategy[tuple[JobFault, ...]]:
    """A step's fault selectors: none half the time (never with ``some``), else (for a
    step that writes durably) a lost durable COMMIT reply, or one or two selectors on the
    operations the step calls (:data:`STEP_CALLS`), each with any outcome that operation
    can have."""
    key = f"{op}+" if some else op
    if key not in _step_faults:
        ops = STEP_CALLS.get(op, ())
        if not ops:
            _step_faults[key] = st.just(())
        else:
            choices = [(o, out) for (o, out) in FAULT_CHOICES if o in ops]
            one = st.tuples(st.sampled_from(choices), st.integers(1, 2)).map(
                lambda t: JobFault(t[0][0], t[1], t[0][1])
            )
            alts: list[st.SearchStrategy[tuple[JobFault, ...]]] = []
            if not some:
                alts += [st.just(()), st.just(())]
            if JobOperation.DURABLE_WRITE in ops:
                alts.append(st.lists(_durable_unknown, min_size=1, max_size=1).map(tuple))
            alts.append(st.lists(one, min_size=1, max_size=2).map(tuple))
            _step_faults[key] = st.one_of(alts)
    return _step_faults[key]


def committed_cut(ops: tuple[JobOperation, ...]) -> st.SearchStrategy[JobFault]:
    """The cut itself, over every write of a step that writes both stores (its 1st or
    2nd durable or coordination write): that write committed and the process died right
    after it — whatever the step's order of writes, one of these leaves one store written
    and the other not.  :func:`kill_point` draws it among all its outcomes (one in
    sixteen); the cut rules draw it on its own as well, so that each write's cut comes up
    within a budget the suite can afford."""
    writes = sorted((o for o in ops if o in KILL_OPERATIONS), key=lambda o: o.value)
    return st.tuples(st.sampled_from(writes), st.integers(1, 2)).map(
        lambda t: JobFault(t[0], t[1], IOOutcome.COMMIT, kill=True)
    )


def cut_faults(op: str) -> st.SearchStrategy[tuple[JobFault, ...]]:
    """A cross-store step's cut, always: a write committed and its process killed right
    after it (:func:`committed_cut`), a kill point after one of its writes, or one
    selector on one of its writes (the second store's write fails or loses its reply, or
    the first's) — for the rules that exist to cut a step between its stores (a fault-free
    run of the step is the reconcile pass's)."""
    ops = tuple(o for o in STEP_CALLS[op] if not o.value.endswith("-read"))
    choices = [(o, out) for (o, out) in FAULT_CHOICES if o in ops]
    one = st.tuples(st.sampled_from(choices), st.integers(1, 2)).map(
        lambda t: JobFault(t[0][0], t[1], t[0][1])
    )
    kill = kill_point(ops)
    assert kill is not None, f"{op} writes neither store"
    alts = [st.tuples(committed_cut(ops)), st.tuples(kill), st.tuples(one)]
    if JobOperation.DURABLE_WRITE in ops:  # the first durable COMMIT's reply lost, either way
        lost = st.sampled_from([IOOutcome.UNKNOWN_COMMITTED, IOOutcome.UNKNOWN_ABORTED])
        alts.append(st.tuples(lost.map(lambda o: JobFault(JobOperation.DURABLE_WRITE, 1, o))))
    return st.one_of(alts)


SWARM = ("crash", "wipe", "links", "cancel", "faults", "reconcile")
"""Rule families a run may switch off (swarm testing)."""

PER_JOB_RECONCILER = (
    "enqueue",
    "publish-cancel-notice",
    "clean-terminal",
    "clear-stale-progress",
    "reconciler-release-reservation",
    "expire-reservation",
    "schedule-retry",
    "finalize-cancel",
    "invalidate-checkpoint",
)
PER_ATTEMPT_RECONCILER = (
    "reconciler-release-lease",
    "cleanup-stage",
    "reap",
    "expire-lease",
    "reconciler-process-outcome",
)


def _final_run() -> bool:
    try:
        return bool(current_build_context().is_final)
    except InvalidArgument:
        return True


class JobScheduleFailure(AssertionError):
    """A job-machine run failed; ``failure`` is what ``remora sim-jobs --replay`` reports
    for the exported trace at ``trace_path``."""

    def __init__(self, failure: str, detail: str, trace_path: str) -> None:
        super().__init__(f"{failure}\n{detail}\nreplay: {job_replay_command(trace_path)}")
        self.failure = failure
        self.trace_path = trace_path


#: The job kinds' paths the machines must reach (``("kinds", name)`` in the reach).
KINDS = (
    "delayed refused until due",
    "delayed enqueued when due",
    "another queue reserved",
    "a priority reserved",
)

StoresFactory = Callable[[LogicalClock, JobsConfig], Stores]
"""Builds one run's stores on its clock (see :class:`~remora.sim.jobs.run.JobRun`)."""


HANDLER_OUTCOMES = st.lists(st.sampled_from(list(JobOutcome)), min_size=1, max_size=2)
"""A job's scripted handler: the outcome of its first attempt, and of every later one."""


@functools.cache
def timeouts_of(max_timeout: int) -> st.SearchStrategy[int]:
    """A job's (or its handler's) timeout in ticks: none in half the runs (a short one
    ends most attempts, and runs whose attempts all time out reach little else)."""
    return st.one_of(st.just(0), st.integers(2, max_timeout)) if max_timeout >= 2 else st.just(0)


@functools.cache
def kinds_of(
    max_delay: int,
    queues: tuple[str, ...],
    priorities: tuple[int, int],
    max_timeout: int,
    give_up: bool,
) -> st.SearchStrategy[JobKind]:
    """A job's kind.  Built once per machine shape: a strategy built anew for every
    example costs the search more than some of its steps."""
    return st.builds(
        JobKind,
        delay=st.integers(0, max_delay),
        queue=st.sampled_from(queues),
        priority=st.integers(*priorities),
        timeout=timeouts_of(max_timeout),
        # one job in four, where handlers may give up (shrinks to none)
        gives_up=st.sampled_from((False, False, False, True)) if give_up else st.just(False),
    )


class JobMachineBase(RuleBasedStateMachine):
    """What every job machine shares: the run, its setup (handlers, swarm), the step
    executor with its reach record, the trace export, the preconditions' views, time and
    whole reconcile passes, and the checks (refinement in every step, the drain and its
    judgement in the teardown).  The rule sets are the subclasses'."""

    jobs: ClassVar[tuple[str, ...]] = ("j1", "j2", "j3")
    workers: ClassVar[tuple[str, ...]] = ("w1", "w2", "w3")
    concurrency: ClassVar[int] = 2
    max_attempts: ClassVar[int] = 3
    max_progress: ClassVar[int] = 2
    lease_ticks: ClassVar[int] = 2
    reservation_ticks: ClassVar[int] = 2
    global_limit: ClassVar[int] = 3
    max_credential_intents: ClassVar[int] = 1
    max_coord_losses: ClassVar[int] = 2
    max_partitions: ClassVar[int] = 3
    mutation: ClassVar[str | None] = None
    #: The incarnations run the embedded mode (``remora jobs worker`` without
    #: ``--redis``: :meth:`~remora.sim.jobs.simulation.Simulation.embed`).
    embedded: ClassVar[bool] = False
    #: The job kinds a run submits: delayed up to ``max_delay`` ticks (``submit --in``),
    #: in one of ``queues``, with a priority in ``priorities`` (each job drawn; shrinks to
    #: a plain job).
    max_delay: ClassVar[int] = 2
    queues: ClassVar[tuple[str, ...]] = (DEFAULT_QUEUE, "bulk")
    priorities: ClassVar[tuple[int, int]] = (-1, 2)
    #: A job's timeout: half the jobs none, the others from 2 to ``max_timeout`` ticks
    #: (``submit --timeout``; 0 or 1: no job has one) — only the production loop enforces
    #: one, so only the loop machine draws it.  The handler's own timeout is drawn the
    #: same way, once per run (:attr:`~remora.sim.jobs.trace.JobConfig.handler_timeout`).
    max_timeout: ClassVar[int] = 0
    #: Whether a job's handler may give up on its own at its first attempt (``Cancelled``
    #: unasked: :attr:`~remora.sim.jobs.trace.JobKind.gives_up`) — only a handler the
    #: production loop runs does, so only the loop machine draws it.
    handlers_give_up: ClassVar[bool] = False
    swarm: ClassVar[tuple[str, ...]] = SWARM
    #: A second configuration of the stores (the machines over PostgreSQL + Redis): every
    #: step runs on both runs, which must agree after it (:meth:`differential`).  The
    #: factory may have an ``audit() -> list[str]`` method: what its stores hold that
    #: their snapshots do not show and the durable store does not imply (checked after
    #: the drain).
    twin_backends: ClassVar[StoresFactory | None] = None
    #: The judgement's checks every step and the drain make
    #: (:data:`~remora.sim.jobs.judgement.JUDGEMENTS`).
    judging: ClassVar[frozenset[str]] = JUDGEMENTS
    #: What the runtime and the incarnations' production loops are built from (None: the
    #: config's mutation's parts; a planted bug's test gives a subclass here).
    parts: ClassVar[Parts | None] = None
    loop_parts: ClassVar[LoopParts] = PRODUCTION_LOOP
    #: Whether a drawn selector's kill point kills its process (off: the kill is dropped,
    #: and a selector that only killed after a commit with it — what a test shows a bug
    #: survives without).
    kill_points: ClassVar[bool] = True
    reach: ClassVar[set[tuple[str, ...]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.reach = set()

    def __init__(self) -> None:
        super().__init__()
        self.run: JobRun | None = None
        self.twin: JobRun | None = None
        self.failed = False
        self._fired = 0
        self._kills = 0
        self.off: frozenset[str] = frozenset()
        self._cache: dict[str, Any] = {}

    def _durable(self) -> Any:
        """The durable snapshot after the last step: what the refinement check read
        (preconditions ask often; it costs nothing)."""
        assert self.run is not None
        return self.run.chk.last_view.durable

    def _coord(self) -> Any:
        """The coordination snapshot after the last step (as :meth:`_durable`)."""
        assert self.run is not None
        return self.run.chk.last_view.coordination

    def on(self, family: str) -> bool:
        return self.run is not None and family not in self.off

    @classmethod
    def config(cls) -> JobConfig:
        return JobConfig(
            jobs=cls.jobs,
            workers=cls.workers,
            concurrency=cls.concurrency,
            max_attempts=cls.max_attempts,
            max_progress=cls.max_progress,
            lease_ticks=cls.lease_ticks,
            reservation_ticks=cls.reservation_ticks,
            global_limit=cls.global_limit,
            max_credential_intents=cls.max_credential_intents,
            max_coord_losses=cls.max_coord_losses,
            max_partitions=cls.max_partitions,
            mutation=cls.mutation,
            embedded=cls.embedded,
        )

    @initialize(data=st.data())
    def setup(self, data: st.DataObject) -> None:
        handlers = {j: tuple(data.draw(HANDLER_OUTCOMES, label=f"handler {j}")) for j in self.jobs}
        # Swarm testing: each run switches whole families of destructive rules off (or
        # keeps them), so some runs go deep into the protocol while others are fault storms.
        self.off = frozenset(
            f for f in self.swarm if data.draw(st.booleans(), label=f"swarm off {f}")
        )
        plain = (
            self.max_delay == 0
            and len(self.queues) == 1
            and self.priorities == (0, 0)
            and self.max_timeout == 0
        )
        timeouts = timeouts_of(self.max_timeout)
        kinds = (
            {}
            if plain
            else {
                j: data.draw(
                    kinds_of(
                        self.max_delay,
                        self.queues,
                        self.priorities,
                        self.max_timeout,
                        self.handlers_give_up,
                    ),
                    label=f"kind {j}",
                )
                for j in self.jobs
            }
        )
        kinds = {j: k for j, k in kinds.items() if k != PLAIN}
        # the handler's own timeout (``@handler(..., timeout=)``), in half the runs: an
        # attempt's timeout is the smaller of it and its job's
        # a twin whose target lives in its durable store's database fuses a completion's
        # stage write into its durable transaction: the memory + SQLite run does too
        # (``fuses_stage`` on the factory), or a fault would part the two runs
        fused = bool(getattr(type(self).twin_backends, "fuses_stage", False))
        config = attrs.evolve(
            self.config(),
            handler_timeout=data.draw(timeouts, label="handler timeout"),
            fused_stage=fused,
        )
        self.run = JobRun(
            config,
            handlers,
            judging=self.judging,
            kinds=kinds,
            parts=self.parts,
            loop_parts=self.loop_parts,
        )
        twin = type(self).twin_backends
        if twin is not None:
            self.twin = JobRun(config, handlers, backends=twin, judging=self.judging, kinds=kinds)
        self._do(JobStep("start", worker=self.workers[0]))

    # -- the trace ---------------------------------------------------------------------------
    def trace(self) -> JobTrace:
        assert self.run is not None
        return new_trace(
            self.run.config,
            self.run.handlers,
            tuple(self.run.steps),
            f"hypothesis:{type(self).__name__}",
            self.run.kinds,
        )

    def export(self) -> str:
        path = failures_dir() / f"hypothesis-{type(self).__name__}.json"
        if _final_run() or not path.exists():
            write_output(path, self.trace().dumps(), parents=True)
        note(f"trace written: {job_replay_command(path)}")
        return str(path)

    def fail(self, exc: JobRunFailure) -> None:
        self.failed = True
        path = self.export()
        raise JobScheduleFailure(exc.failure, exc.detail, path) from None

    # -- steps -------------------------------------------------------------------------------
    def _reach_kinds(self, step: JobStep, kind: str) -> None:
        """The job kinds' paths a step reached (:data:`KINDS`): an ``Enqueue`` of a delayed
        job refused until due, a delayed job enqueued once due, a job of another queue
        and a job with a priority reserved."""
        run = self.run
        if run is None or not run.kinds:
            return
        reach = type(self).reach
        not_due = run.due.get(str(step.job), 0.0) > run.sim.clock.now()
        if step.op == "enqueue" and kind in ("refused", "noop") and not_due:
            reach.add(("kinds", "delayed refused until due"))
        c = self.sim.stores.coordination.snapshot()
        for j, k in run.kinds.items():
            if k.delay and j in c.queued:
                reach.add(("kinds", "delayed enqueued when due"))
            if j in c.reservations:
                if k.queue != DEFAULT_QUEUE:
                    reach.add(("kinds", "another queue reserved"))
                if k.priority:
                    reach.add(("kinds", "a priority reserved"))

    def _do(self, step: JobStep) -> str:
        assert self.run is not None
        self._cache.clear()
        if step.faults and "faults" in self.off:
            step = attrs.evolve(step, faults=())
        if not self.kill_points and any(f.kill for f in step.faults):
            kept = (attrs.evolve(f, kill=False) for f in step.faults)
            step = attrs.evolve(
                step, faults=tuple(f for f in kept if f.outcome in FAULT_OUTCOMES[f.operation])
            )
        try:
            kind = self.run.execute(step)
            if self.twin is not None:
                self._twin(lambda: self.twin.execute(step))  # type: ignore[union-attr]
                self.differential()
        except JobRunFailure as exc:
            self.fail(exc)
        finally:
            self._cache.clear()
        reach = type(self).reach
        reach.add(("op", step.op, kind))
        if step.op in ("send-outcome", "complete") and step.outcome is not None and kind == "ok":
            reach.add(("sent", step.outcome.value))
        if step.service is not None and kind == "ok":
            reach.add(("link", step.op, str(step.worker), step.service.value))
        for called in self.run.hook.last:
            reach.add(("calls", step.op, called.value))
        if step.op in LOOP_OPS and kind == "ok":
            last = self.run.loops.last
            if last is not None:
                reach.add(("loop", last.what, last.result))
            for seen in self.run.loops.tend_reach:
                reach.add(("loop-tend", seen))
            for seen in self.run.loops.process_reach:
                reach.add(("loop-process", seen))
            for seen in self.run.loops.timeout_reach:
                reach.add(("loop-timeout", seen))
            for seen in self.run.loops.give_up_reach:
                reach.add(("loop-give-up", seen))
            if step.op == "loop-turn":
                for seen in self.run.loops.promise_reach:
                    reach.add(("loop-promise", seen))
            for record, _ in self.run.chk.last_steps:
                action = getattr(record.action, "value", record.action)
                reach.add(("loop-action", step.op, str(action)))
        self._reach_kinds(step, kind)
        for name in self.run.kills[self._kills :]:
            who = "worker" if name in self.sim.workers else name
            reach.add(("kill", step.op, who))
            event(f"kill in {step.op}: {who}")
        self._kills = len(self.run.kills)
        fired = self.run.hook.fired[self._fired :]
        self._fired = len(self.run.hook.fired)
        for op, outcome in fired:
            reach.add(("fault", op, outcome))
            reach.add(("fault-in", step.op, op, outcome))
            event(f"fault {op} {outcome}")
        event(f"{step.op}: {kind}")
        return kind

    @property
    def sim(self) -> Any:
        assert self.run is not None
        return self.run.sim

    def _up(self) -> list[str]:
        return [w for w in self.workers if self.sim.workers[w].up]

    def _unstarted(self) -> list[str]:
        """Incarnations no step has started yet — a start that failed (a lost reply)
        used its id up too: a trace never starts an incarnation twice."""
        assert self.run is not None
        tried = {s.worker for s in self.run.steps if s.op == "start"}
        return [w for w in self.workers if w not in self.sim.started and w not in tried]

    def _local(self, *states: str) -> list[tuple[str, AttemptId]]:
        return [
            (w, a)
            for w in self._up()
            for a, la in sorted(self.sim.workers[w].attempts.items(), key=lambda x: str(x[0]))
            if not states or la.state in states
        ]

    def _rows(self) -> list[AttemptId]:
        return sorted((r.id for r in self._durable().attempts), key=str)

    def _submitted(self) -> list[str]:
        assert self.run is not None
        return [j for j in self.jobs if j in self.run.submitted]

    def _started(self) -> list[str]:
        return [w for w in self.workers if w in self.sim.started]

    def has_started(self) -> bool:
        return self.run is not None and bool(self._started())

    def has_up(self) -> bool:
        return self.run is not None and bool(self._up())

    def has_unstarted(self) -> bool:
        return self.run is not None and bool(self._unstarted())

    def has_unsubmitted(self) -> bool:
        return self.run is not None and len(self.run.submitted) < len(self.jobs)

    def has_submitted(self) -> bool:
        return self.run is not None and bool(self.run.submitted)

    def has_rows(self) -> bool:
        return self.run is not None and bool(self._rows())

    def has_local(self) -> bool:
        return self.run is not None and bool(self._local())

    def has_authorized(self) -> bool:
        return self.run is not None and bool(self._local("authorized"))

    def has_executing(self) -> bool:
        return self.run is not None and bool(self._local("executing"))

    def has_reservation(self) -> bool:
        return self.run is not None and any(self.sim.workers[w].reservations for w in self._up())

    def has_down_link(self) -> bool:
        return self.run is not None and any(
            self.sim.workers[w].actor.links.down for w in self.workers
        )

    def _attempt_step(
        self, op: str, pick: tuple[str, AttemptId], fs: tuple[JobFault, ...], **kw: Any
    ) -> JobStep:
        w, a = pick
        return JobStep(op, worker=w, job=a.job, token=a.token, faults=fs, **kw)

    # -- checks ------------------------------------------------------------------------------
    def _twin(self, op: Callable[[], object]) -> None:
        try:
            op()
        except JobRunFailure as exc:
            raise JobRunFailure(f"{exc.failure} (on the twin's stores)", exc.detail) from None

    def differential(self) -> None:
        """The two configurations agree: every step of both (the drain's too) had the
        same result kind, and what :meth:`JobRun.observable` shows is equal."""
        assert self.run is not None and self.twin is not None
        mine, theirs = self.run.trail, self.twin.trail
        for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
            if a != b:
                raise JobRunFailure(
                    f"ERROR differential: step {a[0]} was {a[1]} on memory + SQLite, "
                    f"{b[0]} {b[1]} on the twin's stores",
                    f"at step {i} of {len(mine)}",
                )
        if len(mine) != len(theirs):
            raise JobRunFailure(
                "ERROR differential: the runs took different steps",
                f"{len(mine)} on memory + SQLite, {len(theirs)} on the twin's stores",
            )
        left, right = self.run.observable(), self.twin.observable()
        for part, value in left.items():
            if value != right[part]:
                raise JobRunFailure(
                    f"ERROR differential: the {part} differs after {mine[-1][0]}",
                    f"memory + SQLite: {value!r}\ntwin: {right[part]!r}",
                )

    @invariant()
    def refinement(self) -> None:
        """Checked inside every step (:meth:`JobRun.execute`): here, only the record."""
        if self.run is not None:
            for name in self.run.chk.actions:
                type(self).reach.add(("action", name))

    def teardown(self) -> None:
        if self.run is None:
            return
        try:
            if not self.failed:
                self._teardown()
        finally:
            self.run.close()  # the loops' handler threads end with the example

    def _teardown(self) -> None:
        assert self.run is not None
        try:
            self.run.drain()
            self.run.judge()
            if self.twin is not None:
                twin = self.twin
                self._twin(twin.drain)
                self.differential()
                self._twin(twin.judge)
                audit = getattr(type(self).twin_backends, "audit", None)
                problems = audit() if audit is not None else []
                if problems:
                    raise JobRunFailure(
                        f"ERROR not-quiescent: {problems[0]} (on the twin's stores)",
                        "; ".join(problems),
                    )
        except JobRunFailure as exc:
            self.fail(exc)
        reach = type(self).reach
        for name in self.run.chk.actions:
            reach.add(("action", name))
        reach.add(("drain", "quiescent"))
        sim = self.run.sim
        if any(not sim.stores.durable.worker_up(w) for w in sim.killed):
            reach.add(("drain", "a killed incarnation declared down"))
            event("drain: a killed incarnation declared down")

    # -- time and whole reconcile passes (every machine) -------------------------------------
    def something_ages(self) -> bool:
        if self.run is None:
            return False
        c = self._coord()
        if c.reservations or any(lease.live for lease in c.leases.values()):
            return True
        # a delayed job waits for its time: without a tick it never becomes due
        return bool(self._not_yet_due())

    def _not_yet_due(self) -> list[str]:
        """The submitted delayed jobs whose time has not come."""
        if self.run is None:
            return []
        now = self.sim.clock.now()
        return sorted(j for j, due in self.run.due.items() if due > now and j in self.run.submitted)

    def _due(self, j: str) -> None:
        """Submitted job ``j`` made reservable as far as it can be: time passes until it
        is due (a delayed job), and the reconciler's ``Enqueue`` runs when it is not queued."""
        for _ in range(self.max_delay):
            if j not in self._not_yet_due():
                break
            self._do(JobStep("tick"))
        if j not in self._coord().queued:
            self._do(JobStep("enqueue", job=j))

    @precondition(something_ages)
    @rule()
    def tick(self) -> None:
        """Time passes (only while a lease or a reservation can age or a delayed job waits
        for its time: else a stutter)."""
        self._do(JobStep("tick"))

    @precondition(lambda self: self.on("reconcile"))
    @rule(fs=step_faults("reconcile"))
    def reconcile(self, fs: tuple[JobFault, ...]) -> None:
        self._do(JobStep("reconcile", faults=fs))

    @precondition(lambda self: bool(self._not_yet_due()))
    @rule(data=st.data())
    def enqueue_early(self, data: st.DataObject) -> None:
        """A delayed job's ``Enqueue`` tried before its time (the spec does not enable it:
        the runtime must refuse it, for the judgement's documented reason, not due)."""
        j = data.draw(st.sampled_from(self._not_yet_due()), label="job")
        self._do(JobStep("enqueue", job=j))


class JobRuntimeMachine(JobMachineBase):
    """The real job runtime under rules, faults and refinement (module docstring)."""

    # the shared views, by name for the preconditions below
    has_unsubmitted = JobMachineBase.has_unsubmitted
    has_unstarted = JobMachineBase.has_unstarted
    has_down_link = JobMachineBase.has_down_link
    has_submitted = JobMachineBase.has_submitted
    has_rows = JobMachineBase.has_rows
    has_reservation = JobMachineBase.has_reservation
    has_authorized = JobMachineBase.has_authorized
    has_executing = JobMachineBase.has_executing
    has_local = JobMachineBase.has_local

    # -- client ------------------------------------------------------------------------------
    @precondition(has_unsubmitted)
    @rule(data=st.data(), fs=step_faults("submit"))
    def submit(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        assert self.run is not None
        left = [j for j in self.jobs if j not in self.run.submitted]
        self._do(JobStep("submit", job=data.draw(st.sampled_from(left), label="job"), faults=fs))

    @precondition(lambda self: self.can_cancel())
    @rule(data=st.data(), fs=step_faults("cancel"))
    def cancel(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        j = data.draw(st.sampled_from(self._cancellable()), label="job")
        self._do(JobStep("cancel", job=j, faults=fs))

    # -- environment -------------------------------------------------------------------------
    @precondition(has_unstarted)
    @rule(data=st.data(), fs=step_faults("start"))
    def start(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        w = data.draw(st.sampled_from(self._unstarted()))
        self._do(JobStep("start", worker=w, faults=fs))

    @precondition(lambda self: self.has_up() and self.on("crash"))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        self._do(JobStep("crash", worker=data.draw(st.sampled_from(self._up()))))

    @precondition(lambda self: self.has_up() and self.on("crash"))
    @rule(data=st.data(), fs=step_faults("shutdown"))
    def shutdown(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        w = data.draw(st.sampled_from(self._up()))
        self._do(JobStep("shutdown", worker=w, faults=fs))

    @precondition(lambda self: self.has_up() and self.on("links"))
    @rule(data=st.data(), service=st.sampled_from(list(Service)))
    def drop_link(self, data: st.DataObject, service: Service) -> None:
        w = data.draw(st.sampled_from(self._up()))
        self._do(JobStep("drop-link", worker=w, service=service))

    @precondition(has_down_link)
    @rule(data=st.data())
    def restore_link(self, data: st.DataObject) -> None:
        pairs = [
            (w, s)
            for w in self.workers
            for s in sorted(self.sim.workers[w].actor.links.down, key=lambda x: x.value)
        ]
        w, s = data.draw(st.sampled_from(pairs))
        self._do(JobStep("restore-link", worker=w, service=s))

    def can_wipe(self) -> bool:
        return self.on("wipe") and self.sim.wipes < self.max_coord_losses

    def can_cancel(self) -> bool:
        return self.on("cancel") and bool(self._cancellable())

    def _cancellable(self) -> list[str]:
        rows = {r.id: r for r in self._durable().jobs}
        return [j for j in self._submitted() if not rows[j].cancel_requested]

    def has_queued(self) -> bool:
        return self.has_up() and bool(self._coord().queued)

    @precondition(can_wipe)
    @rule()
    def wipe(self) -> None:
        self._do(JobStep("wipe"))

    # -- reconciler --------------------------------------------------------------------------
    @precondition(has_submitted)
    @rule(data=st.data(), op=st.sampled_from(PER_JOB_RECONCILER))
    def reconcile_job(self, data: st.DataObject, op: str) -> None:
        j = data.draw(st.sampled_from(self._submitted()), label="job")
        fs = data.draw(step_faults(op), label="faults")
        self._do(JobStep(op, job=j, faults=fs))

    @precondition(has_rows)
    @rule(data=st.data(), op=st.sampled_from(PER_ATTEMPT_RECONCILER))
    def reconcile_attempt(self, data: st.DataObject, op: str) -> None:
        # attempts holding a live lease first: the reaper's steps matter most on them
        live = {a for a, lease in self._coord().leases.items() if lease.live}
        rows = sorted(self._rows(), key=lambda a: (a not in live, str(a)))
        a = data.draw(st.sampled_from(rows), label="attempt")
        fs = data.draw(step_faults(op), label="faults")
        self._do(JobStep(op, job=a.job, token=a.token, faults=fs))

    # -- workers -----------------------------------------------------------------------------
    @precondition(lambda self: self.has_up() and self.has_submitted())
    @rule(data=st.data(), fs=step_faults("reserve"))
    def reserve(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        queued = sorted(self._coord().queued)
        w = data.draw(st.sampled_from(self._up()), label="worker")
        j = data.draw(st.sampled_from(queued or self._submitted()), label="job")
        self._do(JobStep("reserve", worker=w, job=j, faults=fs))

    @precondition(lambda self: self.has_queued())
    @rule(data=st.data(), fs=step_faults("authorize"))
    def dispatch(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        """A worker takes a queued job: reserve, authorize (with the faults), activate."""
        w = data.draw(st.sampled_from(self._up()), label="worker")
        queued = sorted(self._coord().queued)
        j = data.draw(st.sampled_from(queued), label="job")
        if self._do(JobStep("reserve", worker=w, job=j)) != "ok":
            return
        if self._do(JobStep("authorize", worker=w, job=j, faults=fs)) != "ok":
            return
        token = self.sim.stores.durable.job(j).current_token
        self._do(JobStep("activate", worker=w, job=j, token=token))

    @precondition(has_reservation)
    @rule(data=st.data(), release=st.booleans())
    def authorize(self, data: st.DataObject, release: bool) -> None:
        pairs = [(w, j) for w in self._up() for j in sorted(self.sim.workers[w].reservations)]
        w, j = data.draw(st.sampled_from(pairs), label="reservation")
        op = "release-reservation" if release and data.draw(st.booleans()) else "authorize"
        if op == "release-reservation" and data.draw(st.booleans(), label="cancelled first"):
            # the worker's own release is enabled once its job is cancelling or terminal
            self._do(JobStep("cancel", job=j))
        fs = data.draw(step_faults(op), label="faults")
        self._do(JobStep(op, worker=w, job=j, faults=fs))

    @precondition(has_authorized)
    @rule(data=st.data(), fs=step_faults("activate"))
    def activate(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        pick = data.draw(st.sampled_from(self._local("authorized")), label="attempt")
        self._do(self._attempt_step("activate", pick, fs))

    @precondition(has_executing)
    @rule(
        data=st.data(),
        op=st.sampled_from(
            ["put-secret", "renew", "report-progress", "checkpoint", "cooperative-stop"]
        ),
    )
    def tend(self, data: st.DataObject, op: str) -> None:
        pick = data.draw(st.sampled_from(self._local("executing")), label="attempt")
        fs = data.draw(step_faults(op), label="faults")
        self._do(self._attempt_step(op, pick, fs))

    @precondition(has_executing)
    @rule(data=st.data(), fs=step_faults("advance"))
    def advance(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        pick = data.draw(st.sampled_from(self._local("executing")), label="attempt")
        amount = data.draw(st.integers(1, self.max_progress), label="amount")
        self._do(self._attempt_step("advance", pick, fs, amount=amount))

    @precondition(has_executing)
    @rule(data=st.data(), outcome=st.sampled_from(list(JobOutcome)), fs=step_faults("send-outcome"))
    def send_outcome(
        self, data: st.DataObject, outcome: JobOutcome, fs: tuple[JobFault, ...]
    ) -> None:
        pick = data.draw(st.sampled_from(self._local("executing")), label="attempt")
        self._do(self._attempt_step("send-outcome", pick, fs, outcome=outcome))

    @precondition(has_executing)
    @rule(data=st.data(), outcome=st.sampled_from(list(JobOutcome)), fs=step_faults("complete"))
    def complete(self, data: st.DataObject, outcome: JobOutcome, fs: tuple[JobFault, ...]) -> None:
        """``SendOutcome`` and ``ProcessOutcome`` fused in one durable transaction.  A
        success is sent as a handler sends it, its output staged in full first (else the
        step is refused before its transaction and its faults never fire)."""
        pick = data.draw(st.sampled_from(self._local("executing")), label="attempt")
        w, a = pick
        local = self.sim.workers[w].attempts[a]
        full = self._attempt_step("advance", pick, (), amount=local.max_progress)
        short = outcome is JobOutcome.SUCCESS and local.progress < local.max_progress
        if short and self._do(full) != "ok":
            return
        self._do(self._attempt_step("complete", pick, fs, outcome=outcome))

    @precondition(has_local)
    @rule(
        data=st.data(),
        op=st.sampled_from(["process-outcome", "record-stop", "release-lease"]),
    )
    def finish(self, data: st.DataObject, op: str) -> None:
        pick = data.draw(st.sampled_from(self._local()), label="attempt")
        fs = data.draw(step_faults(op), label="faults")
        self._do(self._attempt_step(op, pick, fs))

    @precondition(has_executing)
    @rule(data=st.data(), fs=step_faults("process-outcome"), fused=st.booleans())
    def run_to_outcome(self, data: st.DataObject, fs: tuple[JobFault, ...], fused: bool) -> None:
        """A handler running to its end: a partial stage checkpointed and reported, a tick
        and a lease renewal, the full stage, the scripted outcome sent and processed — in
        one transaction when ``fused``, as the production loop does (faults apply to the
        last of these steps)."""
        assert self.run is not None
        pick = data.draw(st.sampled_from(self._local("executing")), label="attempt")
        w, a = pick
        local = self.sim.workers[w].attempts[a]
        if local.progress + 1 < self.max_progress:  # a partial stage, checkpointed
            self._do(self._attempt_step("advance", pick, (), amount=local.progress + 1))
            self._do(self._attempt_step("checkpoint", pick, ()))
            self._do(self._attempt_step("report-progress", pick, ()))
        self._do(JobStep("tick"))
        self._do(self._attempt_step("renew", pick, ()))
        self._do(self._attempt_step("put-secret", pick, ()))
        if local.progress < self.max_progress:
            self._do(self._attempt_step("advance", pick, (), amount=self.max_progress))
        if fused:
            self._do(self._attempt_step("complete", pick, fs, outcome=self.run.scripted(a)))
            return
        self._do(self._attempt_step("send-outcome", pick, (), outcome=self.run.scripted(a)))
        self._do(self._attempt_step("process-outcome", pick, fs))

    def has_live_lease(self) -> bool:
        return self.run is not None and any(lease.live for lease in self._coord().leases.values())

    @precondition(has_live_lease)
    @rule(data=st.data(), fs=step_faults("reap"))
    def lose_lease(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        """A worker goes silent: time passes until its lease ages out, the reaper expires
        it and reaps the attempt (faults apply to the reap) — the worker may still act."""
        live = sorted((a for a, lease in self._coord().leases.items() if lease.live), key=str)
        a = data.draw(st.sampled_from(live), label="lease")
        for _ in range(self.lease_ticks):
            self._do(JobStep("tick"))
        self._do(JobStep("expire-lease", job=a.job, token=a.token))
        self._do(JobStep("reap", job=a.job, token=a.token, faults=fs))

    @precondition(lambda self: self.has_authorized() or self.has_executing())
    @rule(
        data=st.data(),
        interference=st.sampled_from(["cancel-finalize", "reap", "cancel", "wipe", "none"]),
        then=st.sampled_from(
            [
                "renew",
                "activate",
                "report-progress",
                "checkpoint",
                "advance",
                "send-outcome",
                "complete",
                "put-secret",
            ]
        ),
    )
    def zombie(self, data: st.DataObject, interference: str, then: str) -> None:
        """Fencing under attack: something takes an attempt's authority or coordination
        state away (a cancel, a cancel finalized, a lost lease reaped, a wipe), time passes,
        and the attempt's worker — unaware — takes its next step (faults apply to it)."""
        assert self.run is not None
        # executing attempts first (a stale lease, a stale stage), then authorized ones
        pick = data.draw(
            st.sampled_from(self._local("executing") + self._local("authorized")), label="attempt"
        )
        w, a = pick
        local = self.sim.workers[w].attempts[a]
        if (
            then == "report-progress"
            and local.state == "executing"
            and local.progress < self.max_progress
        ):  # a new hint to report
            self._do(self._attempt_step("advance", pick, (), amount=local.progress + 1))
        if interference.startswith("cancel"):
            self._do(JobStep("cancel", job=a.job))
            if interference == "cancel-finalize":
                self._do(JobStep("finalize-cancel", job=a.job))
        elif interference == "reap":
            for _ in range(self.lease_ticks):
                self._do(JobStep("tick"))
            self._do(JobStep("expire-lease", job=a.job, token=a.token))
            self._do(JobStep("reap", job=a.job, token=a.token))
        elif interference == "wipe" and self.sim.wipes < self.max_coord_losses:
            self._do(JobStep("wipe"))
        self._do(JobStep("tick"))
        kw: dict[str, Any] = {}
        if then == "advance":
            kw["amount"] = self.max_progress
        elif then in ("send-outcome", "complete"):
            kw["outcome"] = self.run.scripted(a)
        fs = data.draw(step_faults(then), label="faults")
        self._do(self._attempt_step(then, pick, fs, **kw))


LOST_VAULT_REPLIES: tuple[JobFault, ...] = (
    *(
        JobFault(JobOperation.VAULT_WRITE, 1, o)
        for o in (IOOutcome.UNKNOWN_COMMITTED, IOOutcome.UNKNOWN_ABORTED, IOOutcome.ABORT)
    ),
    JobFault(JobOperation.VAULT_READ, 1, IOOutcome.ABORT),
)
"""What the vault credential race loses: the vault write's reply (after or without the
write), the write itself, or the vault read."""
LOST_CREDENTIAL_COMMITS: tuple[JobFault, ...] = tuple(
    JobFault(JobOperation.DURABLE_WRITE, n, o)
    for n in range(4, 0, -1)
    for o in (IOOutcome.UNKNOWN_ABORTED, IOOutcome.UNKNOWN_COMMITTED)
)
"""What the durable credential race loses: the COMMIT reply of commit (4), record (3),
begin (2) or prepare (1) — the commit's first: lost before it committed, it leaves a
written intent with a live secret, the reconciler's cleanup case."""


class JobCutMachine(JobRuntimeMachine):
    """:class:`JobRuntimeMachine` with the steps that write both stores cut between their
    writes by construction (issue 21, item 3): every ``cut_*`` rule's step carries a kill
    point or a failed / reply-lost write (:func:`cut_faults`, kept when the swarm turns
    the general rules' faults off) — a cancel (the mirror's cancel mark, then the durable
    request), a reconcile pass (floors, marks, then durable steps), and the reconciler's
    ``CrashWorker`` of one incarnation (:meth:`declare_down`).  Each rule also composes
    what its cut needs to matter: a declaration is enabled (another incarnation up, the
    heartbeat expired), a declared live incarnation comes back and keeps taking steps, and
    a killed reconciler is restarted and runs a fresh fault-free full pass — the pass the
    judgement of the marks (``stale_marks``) reads.  A machine of its own, so that the
    general machines' draws (what their budgets and planted-bug hunts were measured with)
    stay as they were."""

    def _cut(self, step: JobStep) -> str:
        """A cut rule's step keeps its cut when the swarm switched the fault family off
        (that switch thins the general rules' draws; these rules exist to cut)."""
        off = self.off
        self.off = off - {"faults"}
        try:
            return self._do(step)
        finally:
            self.off = off

    #: Whether a declared incarnation still cut off takes steps (``zombie``); off only in
    #: a control (the draws stay the same).
    zombies: ClassVar[bool] = True

    def _durably_up(self) -> set[str]:
        _, rows = self.sim.stores.durable.liveness(self.sim.clock.now())
        return {x for x, _, _ in rows}

    def _fresh_pass(self) -> None:
        """A fault-free full reconcile pass (after a kill: the restarted reconciler's)."""
        type(self).reach.add(("cut", "fresh pass"))
        self._do(JobStep("reconcile"))

    def _take_job(self, w: str, data: st.DataObject, label: str) -> bool:
        """Incarnation ``w`` reserves a drawn job (a queued one if any), authorizes and
        activates it, as far as each step is taken (a job is submitted first when none
        is queued and one is left; time passes until a delayed one is due, and it is
        enqueued); whether its reservation was."""
        assert self.run is not None
        left = [j for j in self.jobs if j not in self.run.submitted]
        if not self._coord().queued and left:
            self._do(JobStep("submit", job=left[0]))
        jobs = sorted(self._coord().queued) or self._submitted()
        if not jobs:
            return False
        j = data.draw(st.sampled_from(jobs), label=label)
        self._due(j)
        if self._do(JobStep("reserve", worker=w, job=j)) != "ok":
            return False
        if self._do(JobStep("authorize", worker=w, job=j)) == "ok":
            token = self.sim.stores.durable.job(j).current_token
            self._do(JobStep("activate", worker=w, job=j, token=token))
        return True

    SEQUEL_STEPS = (
        "renew",
        "advance",
        "report-progress",
        "checkpoint",
        "send-outcome",
        "cooperative-stop",
    )
    """What a declared live incarnation's executing attempt may do next: every step the
    runtime takes for an attempt it runs (the stage write, the outcome and the tend's stop
    among them)."""

    def _sequel(self, w: str, data: st.DataObject) -> None:
        """A declared live incarnation keeps running: it reserves a job, authorizes and
        activates it, and each of its executing attempts takes up to three drawn next
        steps of its own (:data:`SEQUEL_STEPS`: a renewal, a stage write, a progress
        report, a checkpoint, its outcome) — each refused if its declaration took (the mark, the
        target's fence, the durable row), each a spec step if it did not."""
        if not self.sim.workers[w].up:
            return
        if self._take_job(w, data, "sequel job"):
            type(self).reach.add(("cut", "a declared incarnation reserved"))
        for x, a in self._local("executing"):
            if x != w:
                continue
            ops = data.draw(
                st.lists(st.sampled_from(self.SEQUEL_STEPS), min_size=1, max_size=3, unique=True),
                label="sequel steps",
            )
            for op in ops:
                local = self.sim.workers[w].attempts.get(a)
                if local is None or local.state != "executing":
                    break
                kw: dict[str, Any] = {}
                if op == "advance":
                    kw["amount"] = local.progress + 1
                    if kw["amount"] > self.max_progress:
                        continue
                elif op == "send-outcome":
                    assert self.run is not None
                    kw["outcome"] = self.run.scripted(a)
                down = "down" if w not in self._durably_up() else "up"
                # noted before the step too: a step the judgement fails ends the run here
                type(self).reach.add(("cut", "a declared incarnation's attempt", down))
                result = self._do(self._attempt_step(op, (x, a), (), **kw))
                type(self).reach.add(("cut", "a declared incarnation's attempt", down, op, result))

    def _declarable(self) -> list[str]:
        """The incarnations a declaration could take down: started and durably up, with
        another durably up or one left to start (``OtherCapacity``) — a declaration of
        any other is refused by its guard and cuts nothing."""
        if self.run is None or not self.on("reconcile"):
            return []
        up = self._durably_up()
        spare = bool(self._unstarted())
        return [w for w in self._started() if w in up and (spare or len(up) > 1)]

    @precondition(lambda self: bool(self._declarable()))
    @rule(
        data=st.data(),
        fs=cut_faults("declare-down"),
        pass_first=st.booleans(),
        busy=st.booleans(),
        zombie=st.booleans(),
    )
    def declare_down(
        self,
        data: st.DataObject,
        fs: tuple[JobFault, ...],
        pass_first: bool,
        busy: bool,
        zombie: bool,
    ) -> None:
        """The reconciler's ``CrashWorker`` of one incarnation, cut between its stores.
        What the cut needs is composed first: an incarnation durably up is declared,
        another one durably up (one is started if none is: the guard needs it); when
        ``busy``, the declared incarnation takes a job to run (a declaration matters most
        to an incarnation that runs an attempt); a live one is cut off from the durable
        store (it keeps running, unable to beat: a connected one's heartbeat never
        expires); time passes until the heartbeat expired.  Then the fence, the mark and
        the durable declaration, with a kill point or a failed write among them.  When
        ``zombie``, the cut-off incarnation keeps taking steps before it can learn of its
        declaration (:meth:`_sequel`: what it reaches — the target, the coordination store
        — must refuse it if the declaration took), in half those runs after a wipe of the
        coordination store (its down mark gone: only the durable store still knows).  Then
        a live incarnation gets its link back and beats (durably up unless the
        declaration committed), and keeps taking steps (:meth:`_sequel`) — after a
        fault-free full pass, or before it when
        ``pass_first`` is off (a mark its declaration did not make durable must not
        outlive that pass: ``stale_marks``)."""
        w = data.draw(st.sampled_from(self._declarable()), label="declared")
        if not (self._durably_up() - {w}) and self._unstarted():
            self._do(JobStep("start", worker=self._unstarted()[0]))
        wk = self.sim.workers[w]
        live = wk.up and w not in self.sim.killed
        if live and busy and not any(x == w for x, _ in self._local("executing")):
            self._take_job(w, data, "declared's job")  # a declaration of a running attempt
        cut_off = live and Service.DURABLE not in wk.actor.links.down
        if cut_off:
            cut_off = self._do(JobStep("drop-link", worker=w, service=Service.DURABLE)) == "ok"
        after = self.sim.config.jobs_config.down_after_s
        for _ in range(16):
            at, rows = self.sim.stores.durable.liveness(self.sim.clock.now())
            seen = {x: t for x, _, t in rows}
            if w not in seen or at - seen[w] >= after:
                break
            self._do(JobStep("tick"))
        kills = len(self.run.kills) if self.run is not None else 0
        result = self._cut(JobStep("declare-down", worker=w, faults=fs))
        killed = self.run is not None and len(self.run.kills) > kills
        type(self).reach.add(("cut", "declare-down", "live" if live else "dead", result))
        if cut_off and zombie and self.zombies:  # still cut off: a zombie acts on what it reaches
            if data.draw(st.booleans(), label="wipe under the zombie") and self.can_wipe():
                self._do(JobStep("wipe"))  # its marks and leases gone with the rest
            self._sequel(w, data)
        if cut_off:  # it comes back and beats: durably up unless the declaration committed
            self._do(JobStep("restore-link", worker=w, service=Service.DURABLE))
            self._do(JobStep("tick"))
        if live and not pass_first:
            self._sequel(w, data)
        if live or killed:
            self._fresh_pass()
        if live and pass_first:
            self._sequel(w, data)

    @precondition(lambda self: bool(self._declarable()))
    @rule(data=st.data())
    def declare_early(self, data: st.DataObject) -> None:
        """A declaration that does not wait for the heartbeat to expire (the public
        :meth:`~remora.jobs.reconciler.Reconciler.declare_down` called at any time): of an
        incarnation that beats, it must be refused — nobody may declare a healthy worker
        down (``spurious_declarations``, from the simulation's own account of its
        heartbeats) — and of one that stopped beating it may take."""
        w = data.draw(st.sampled_from(self._declarable()), label="declared early")
        wk = self.sim.workers[w]
        cfg = self.sim.config.jobs_config
        # cut off from the durable store, its heartbeat ages by the ticks drawn: up to
        # one tick short of expiring (a connected one's is renewed on every tick)
        ticks = data.draw(
            st.integers(0, round(cfg.down_after_s * 1000 / cfg.tick_ms) - 1), label="ticks"
        )
        cut_off = wk.up and w not in self.sim.killed and Service.DURABLE not in wk.actor.links.down
        if cut_off:
            cut_off = self._do(JobStep("drop-link", worker=w, service=Service.DURABLE)) == "ok"
        for _ in range(ticks):
            self._do(JobStep("tick"))
        result = self._do(JobStep("declare-down", worker=w))
        type(self).reach.add(("cut", "early declaration", result))
        if cut_off:
            self._do(JobStep("restore-link", worker=w, service=Service.DURABLE))

    @precondition(lambda self: self.can_cancel())
    @rule(data=st.data(), fs=cut_faults("cancel"))
    def cut_cancel(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        j = data.draw(st.sampled_from(self._cancellable()), label="job")
        self._cut(JobStep("cancel", job=j, faults=fs))

    @precondition(lambda self: self.run is not None and self.on("reconcile"))
    @rule(fs=cut_faults("reconcile"))
    def cut_reconcile(self, fs: tuple[JobFault, ...]) -> None:
        """A reconcile pass cut between its stores; a reconciler it killed is restarted
        and runs a fresh fault-free full pass."""
        assert self.run is not None
        kills = len(self.run.kills)
        self._cut(JobStep("reconcile", faults=fs))
        if len(self.run.kills) > kills:
            self._fresh_pass()


DURABLE_STEPS: tuple[str, ...] = tuple(
    op
    for op, calls in STEP_CALLS.items()
    if JobOperation.DURABLE_WRITE in calls and op not in LOOP_OPS
)
"""The single step kinds that write durably: each must see its COMMIT reply lost both ways
(the loops' steps are judged by their own reach, :data:`LOOP_REACH`)."""


def sweep_faults(op: str) -> tuple[JobFault, ...]:
    """The faults the race machine's sweep cycles through on step kind ``op``: a lost
    durable COMMIT reply (committed, then not) for a step that writes durably, then the
    target's faults for a step that stages or reads the target.  Coordination faults are
    not swept: they would keep the races' deeper steps (a reap after an expiry) from ever
    being enabled; the general machines draw them.  (The vault's faults are the
    credential races' own.)"""
    ops = STEP_CALLS.get(op, ())
    lost = tuple(
        JobFault(JobOperation.DURABLE_WRITE, 1, o)
        for o in (IOOutcome.UNKNOWN_COMMITTED, IOOutcome.UNKNOWN_ABORTED)
        if JobOperation.DURABLE_WRITE in ops
    )
    target = tuple(
        JobFault(io, 1, o)
        for io in (JobOperation.TARGET_READ, JobOperation.TARGET_WRITE)
        for o in sorted(FAULT_OUTCOMES[io], key=lambda x: x.value)
        if io in ops and op != "reconcile"
    )
    return lost + target


SWEEP_OFFSETS = 9
"""A race-machine run's offset into every cycle (sweep faults, credential faults, the
partitions' (worker, service) pairs) is one of this many: no cycle is longer."""

AUTHORITY_RACES = (
    "cancel-then-activate",
    "cancel-then-renew",
    "cancel-then-report",
    "reap-then-act",
    "reap-then-persist",
)
OUTCOME_RACES = ("stale-outcome", "cancel-then-outcome", "finish-then-reconcile")
COORDINATION_RACES = (
    "reconcile-running",
    "wipe-with-reservation",
    "wipe-with-lease",
    "reservation-expires",
    "over-capacity",
)
RACES: tuple[str, ...] = (
    *AUTHORITY_RACES,
    *OUTCOME_RACES,
    *COORDINATION_RACES,
    *(f"partition-{s.value}" for s in Service),
    "credential-then-crash",
    "credential-then-shutdown",
)
"""Every race the race machine composes (its reach names each one it reached)."""
LATE_STEPS = (
    "checkpoint",
    "renew",
    "report-progress",
    "send-outcome",
    "complete",
    "put-secret",
    "advance",
)
RUNNING_RECONCILER = (
    "schedule-retry",
    "reconciler-release-lease",
    "expire-lease",
    "reap",
    "cleanup-stage",
    "finalize-cancel",
    "invalidate-checkpoint",
    "reconciler-process-outcome",
)


RESERVED_NEXT = ("hold", "authorize", "release", "release-by-another", "reconciler-release")
"""What follows a worker's fresh reservation in :class:`JobReservationMachine`, its job
cancelled first or not: nothing for now, its authorization, its release by the worker, by
another up incarnation (which holds no reservation of the job: refused) or by the
reconciler."""


class JobReservationMachine(JobRuntimeMachine):
    """:class:`JobRuntimeMachine` with a reservation's lifetime composed in one rule step
    (:meth:`reservation`): a worker reserves a job (submitted and enqueued first as
    needed), then takes a next step of that reservation (:data:`RESERVED_NEXT`), its job
    cancelled first or not — the worker's own release and the reconciler's must be
    refused unless the job is cancelling or terminal, an authorization of a cancelling job
    too.  Under the general rules a reservation seldom lives to a next step (the dispatch
    authorizes at once, a reservation expires in a tick or two): the worker's own release
    ran in none of 200 examples of the spec-sized machine.  A machine of its own, so the
    general machines' draws stay as they were."""

    def __init__(self) -> None:
        super().__init__()
        self._followed = 0  # the run's reservations followed so far

    @precondition(lambda self: self.has_up())
    @rule(data=st.data(), fs=step_faults("reserve"))
    def reservation(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        assert self.run is not None
        w = data.draw(st.sampled_from(self._up()), label="worker")
        j = data.draw(st.sampled_from(self.jobs), label="job")
        if j not in self.run.submitted:
            self._do(JobStep("submit", job=j))
        self._due(j)
        if self._do(JobStep("reserve", worker=w, job=j, faults=fs)) != "ok":
            return
        if j not in self.sim.workers[w].reservations:  # the reply was lost
            return
        # the next step turns with the run's own follow-ups (as the race machine's sweep
        # turns its faults): a run that reserves often meets each, whatever the draws
        n = 2 * len(RESERVED_NEXT)
        pick = (data.draw(st.integers(0, n - 1), label="next") + self._followed) % n
        self._followed += 1
        cancelled, then = pick % 2 == 1, RESERVED_NEXT[pick // 2]
        if cancelled:
            self._do(JobStep("cancel", job=j))
        if then == "hold":
            result = "held"
        elif then == "reconciler-release":
            result = self._do(JobStep("reconciler-release-reservation", job=j))
        else:
            if then == "release-by-another":
                others = [v for v in self._up() if v != w]
                if not others:
                    return
                w = data.draw(st.sampled_from(others), label="another")
            op = "authorize" if then == "authorize" else "release-reservation"
            faults = data.draw(step_faults(op), label="faults")
            result = self._do(JobStep(op, worker=w, job=j, faults=faults))
        type(self).reach.add(("reserved", "cancelled" if cancelled else "live", then, result))


class JobRaceMachine(JobMachineBase):
    """The dangerous combinations, each composed in one rule step (by construction).

    The general machine's search meets a race such as *cancel, then the old holder renews*
    only when its independent rule draws line up; which races a derandomized ci run meets
    shifts with any change to the rules or the runtime's code paths.  Here every rule
    brings a job (a fresh one first) to the state the race needs — through the runtime's
    own steps: submit, enqueue, reserve, authorize, activate — and then composes the race:

    * authority taken away, then the holder acts: a cancel (finalized or not) before
      ``activate``, ``renew`` or ``report-progress``; a lost lease reaped before a late
      checkpoint, renewal, report, outcome, secret or stage;
    * outcomes racing authority: a reaped attempt sends its outcome after a replacement
      was authorized; an outcome sent, then the job cancelled, then processed; a finished
      attempt, then the reconciler's per-attempt duties on it;
    * coordination races: every reconciler duty on a running attempt; a wipe while a
      reservation is held, then re-enqueue, a second reservation and both authorizations;
      a wipe while an attempt runs, its holder carrying on, then a reconcile pass;
      a reservation that ages out before its authorization; a worker reserving more jobs
      than it has slots;
    * a credential write losing a reply (vault or durable), then the writer crashes or
      shuts down — only the reconciler's cleanup can finish the intent.

    Nothing here knows a mutation: every step is checked by the same refinement step,
    invariants and action properties, and the teardown's drain and quiescence judgement.
    Steps the runtime refuses (the race's state did not arise) are recorded and skipped.
    """

    swarm: ClassVar[tuple[str, ...]] = ()
    # plain jobs: a race brings its job to the state it needs at once (no delay to wait)
    max_delay: ClassVar[int] = 0
    queues: ClassVar[tuple[str, ...]] = (DEFAULT_QUEUE,)
    priorities: ClassVar[tuple[int, int]] = (0, 0)

    def __init__(self) -> None:
        super().__init__()
        self.sweep: int | None = None
        self.swept: dict[str, int] = {}  # per step kind: how many sweep faults fired
        self.turns: dict[str, int] = {}  # per race cycle: how many of its options were used

    @initialize(data=st.data())
    def setup(self, data: st.DataObject) -> None:
        """The run's handlers, then whether it sweeps faults and where each step kind's
        cycle starts (a third of the runs compose their races fault-free)."""
        super().setup(data)
        self.sweep = data.draw(st.sampled_from([None, None, *range(SWEEP_OFFSETS)]), label="sweep")

    def _do(self, step: JobStep) -> str:
        """In a sweeping run, a step kind's executions (those without faults of their own)
        carry the next of its :func:`sweep_faults` until it fires (the step made that
        call); a step whose fault fired is retried at once, fault-free, as a caller
        retries after a lost reply — so the race goes on from the retry's outcome.  Which
        fault a step gets is a function of the run's own steps, not of a draw: a step
        kind a run executes often enough sees each of its lost replies whatever the
        search's luck."""
        if self.sweep is None or step.faults or self.run is None:
            return super()._do(step)
        cycle = sweep_faults(step.op)
        if not cycle:
            return super()._do(step)
        fault = cycle[(self.sweep + self.swept.get(step.op, 0)) % len(cycle)]
        before = len(self.run.hook.fired)
        kind = super()._do(attrs.evolve(step, faults=(fault,)))
        if len(self.run.hook.fired) == before:
            return kind
        self.swept[step.op] = self.swept.get(step.op, 0) + 1
        if step.op == "start":
            return kind  # an incarnation id is never reused: no retry
        if step.op == "tick":
            # the lost reply was a heartbeat's: the next tick renews it — a "retry" would
            # be a second tick, and a race's "less than a lease" would be a whole one
            return kind
        return super()._do(step)

    # -- composing -------------------------------------------------------------------------
    def _job(self, data: st.DataObject, among: set[str] | None = None) -> str:
        """A job for the race (of ``among``, when given): fresh (unsubmitted) ones first,
        then live ones."""
        assert self.run is not None
        phases = {r.id: r.phase for r in self._durable().jobs}
        submitted = self.run.submitted
        order = sorted(
            (j for j in self.jobs if among is None or j in among),
            key=lambda j: (j in submitted, j in phases and phases[j].terminal, j),
        )
        return data.draw(st.sampled_from(order), label="job")

    def _busy(self, w: str) -> int:
        wk = self.sim.workers[w]
        live = [la for la in wk.attempts.values() if la.state in ("authorized", "executing")]
        return len(live) + len(wk.reservations)

    def _worker(self, data: st.DataObject, avoid: str | None = None) -> str | None:
        """An up worker with a free slot, else a new incarnation, else any up worker
        (``avoid`` excluded): an earlier race's attempt must not block this one."""
        up = [w for w in self._up() if w != avoid]
        free = [w for w in up if self._busy(w) < self.concurrency]
        if free:
            return data.draw(st.sampled_from(free), label="worker")
        for w in self._unstarted():
            self._do(JobStep("start", worker=w))
            return w
        return data.draw(st.sampled_from(up), label="worker") if up else None

    def _current(self, j: str) -> AttemptId:
        return AttemptId(j, self.sim.stores.durable.job(j).current_token)

    def _authorized(self, w: str, j: str) -> AttemptId | None:
        """Submit, enqueue, reserve and authorize ``j`` at ``w`` (as far as each applies)."""
        assert self.run is not None
        if j not in self.run.submitted:
            self._do(JobStep("submit", job=j))
        c = self._coord()
        if j not in c.queued and j not in c.reservations:
            self._do(JobStep("enqueue", job=j))
        self._do(JobStep("reserve", worker=w, job=j))
        if self._do(JobStep("authorize", worker=w, job=j)) != "ok":
            return None
        return self._current(j)

    def _running(self, w: str, j: str) -> AttemptId | None:
        a = self._authorized(w, j)
        if a is None or self._do(JobStep("activate", worker=w, job=j, token=a.token)) != "ok":
            return None
        return a

    def _holding(
        self, data: st.DataObject, w: str, j: str, jobs: set[str] | None = None
    ) -> tuple[str, AttemptId] | None:
        """A running attempt for the race: ``j`` brought to executing at ``w``, else (no
        fresh job, no free slot) one already executing somewhere — an earlier race's
        (of one of ``jobs``, when given)."""
        a = self._running(w, j)
        if a is not None:
            return w, a
        live = [
            (v, b)
            for v, b in self._local("executing")
            if (jobs is None or b.job in jobs) and not self.sim.workers[v].attempts[b].outcome_sent
        ]
        return data.draw(st.sampled_from(live), label="holder") if live else None

    def _with_intents(self) -> set[str]:
        """Jobs that may still prepare a credential intent."""
        used: dict[str, int] = {}
        for c in self._durable().credentials:
            used[c.job] = used.get(c.job, 0) + 1
        return {j for j in self.jobs if used.get(j, 0) < self.max_credential_intents}

    def _at(self, op: str, w: str, a: AttemptId, **kw: Any) -> str:
        return self._do(JobStep(op, worker=w, job=a.job, token=a.token, **kw))

    def _lose_lease(self, a: AttemptId) -> None:
        for _ in range(self.lease_ticks):
            self._do(JobStep("tick"))
        self._do(JobStep("expire-lease", job=a.job, token=a.token))
        self._do(JobStep("reap", job=a.job, token=a.token))

    def _late(self, data: st.DataObject, w: str, a: AttemptId, then: str) -> None:
        """The holder's next step, unaware of what happened to its authority."""
        assert self.run is not None
        kw: dict[str, Any] = {}
        if then == "advance":
            kw["amount"] = self.max_progress
        elif then in ("send-outcome", "complete"):
            kw["outcome"] = data.draw(st.sampled_from(list(JobOutcome)), label="outcome")
        self._at(then, w, a, **kw)

    def _reconcile_attempt(self, data: st.DataObject, a: AttemptId) -> None:
        """Every reconciler duty on ``a`` (or its job), in a drawn order."""
        for op in data.draw(st.permutations(RUNNING_RECONCILER), label="reconciler"):
            per_attempt = op in PER_ATTEMPT_RECONCILER
            self._do(JobStep(op, job=a.job, token=a.token if per_attempt else None))

    def _raced(self, kind: str) -> None:
        """The race's state arose: what follows is the race itself (reach, events)."""
        type(self).reach.add(("race", kind))
        event(f"race {kind}")

    def has_worker(self) -> bool:
        return self.run is not None and bool(self._up() or self._unstarted())

    # -- races -------------------------------------------------------------------------------
    def _race_authority(self, data: st.DataObject, kind: str) -> None:
        """Authority taken away (a cancel, finalized or not; a lost lease reaped), then the
        holder acts."""
        j = self._job(data)
        w = self._worker(data)
        if w is None:
            return
        if kind == "cancel-then-activate":
            a = self._authorized(w, j)
            if a is None:
                return
            self._raced(kind)
            self._do(JobStep("cancel", job=j))
            if data.draw(st.booleans(), label="finalize"):
                self._do(JobStep("finalize-cancel", job=j))
            self._at("activate", w, a)
            self._at("record-stop", w, a)  # revoked before it was activated
            return
        picked = self._holding(data, w, j)
        if picked is None:
            return
        w, a = picked
        j = a.job
        self._raced(kind)
        if kind == "reap-then-persist":
            # the reaped holder's durable writes, in a handler's order: a checkpoint of
            # its partial stage, its outcome (the first one it makes may teach it that
            # its lease is gone: what follows is then refused locally)
            self._at("advance", w, a, amount=1)
            self._lose_lease(a)
            self._at("checkpoint", w, a)
            self._late(data, w, a, "send-outcome")
            return
        if kind == "reap-then-act":
            self._at("advance", w, a, amount=1)
            self._lose_lease(a)
            # the zombie keeps going: every late step, in a drawn order
            for then in data.draw(st.permutations(LATE_STEPS), label="then"):
                self._late(data, w, a, then)
            return
        # the job is cancelled (for a renewal: the cancel finalized too — a renewal while
        # the cancel is only requested is a spec step), time passes but less than the
        # lease (it is still live), and the holder, unaware, renews or reports
        self._do(JobStep("cancel", job=j))
        if kind == "cancel-then-renew":
            self._do(JobStep("finalize-cancel", job=j))
        else:
            self._at("advance", w, a, amount=1)  # a new hint to report
        for _ in range(self.lease_ticks - 1):
            self._do(JobStep("tick"))
        self._at("renew" if kind == "cancel-then-renew" else "report-progress", w, a)
        # then it learns of the cancel and winds down
        for then in ("cooperative-stop", "record-stop", "release-lease"):
            self._at(then, w, a)

    def _race_outcome(self, data: st.DataObject, kind: str) -> None:
        """Outcomes racing authority: a stale outcome after a replacement was authorized;
        an outcome, a cancel, then its processing; a finished attempt under the
        reconciler's per-attempt duties."""
        j = self._job(data)
        w = self._worker(data)
        if w is None:
            return
        picked = self._holding(data, w, j)
        if picked is None:
            return
        w, a = picked
        j = a.job
        self._raced(kind)
        outcome = data.draw(st.sampled_from(list(JobOutcome)), label="outcome")
        processor = data.draw(
            st.sampled_from(["process-outcome", "reconciler-process-outcome", "complete"]),
            label="by",
        )
        # the sender accepting its own outcome in the same transaction (no cancel between)
        fused = processor == "complete" and kind != "cancel-then-outcome"
        if processor == "complete" and not fused:
            processor = "process-outcome"
        if kind == "stale-outcome":
            self._at("advance", w, a, amount=self.max_progress)
            self._lose_lease(a)
            self._do(JobStep("schedule-retry", job=j))
            self._do(JobStep("enqueue", job=j))
            other = self._worker(data, avoid=w)
            if other is not None:
                self._do(JobStep("reserve", worker=other, job=j))
                self._do(JobStep("authorize", worker=other, job=j))
            self._at("complete" if fused else "send-outcome", w, a, outcome=outcome)
        elif kind == "cancel-then-outcome":
            self._at("advance", w, a, amount=self.max_progress)
            self._at("send-outcome", w, a, outcome=outcome)
            self._do(JobStep("cancel", job=j))
        else:  # finish-then-reconcile
            self._at("advance", w, a, amount=self.max_progress)
            self._at("complete" if fused else "send-outcome", w, a, outcome=outcome)
        if processor == "process-outcome":
            self._at("process-outcome", w, a)
        elif not fused:
            self._do(JobStep(processor, job=a.job, token=a.token))
        if kind == "cancel-then-outcome":
            self._do(JobStep("finalize-cancel", job=j))
        # the holder winds down (each refused while it still holds authority)
        self._at("record-stop", w, a)
        self._at("release-lease", w, a)
        self._reconcile_attempt(data, a)  # then the reconciler passes over the attempt

    def _race_coordination(self, data: st.DataObject, kind: str) -> None:
        """The reconciler on a running attempt; a wipe under a held reservation or under
        a running attempt; a reservation aging out before its authorization; more
        reservations than slots."""
        j = self._job(data)
        w = self._worker(data)
        if w is None:
            return
        if kind == "wipe-with-lease":
            # the coordination store is lost while an attempt runs (its lease, the live-
            # lease index and the progress hint with it); the holder, unaware, carries on
            # (each step refused or a stutter), then the reconciler rebuilds what the
            # durable store implies
            if self.sim.wipes >= self.max_coord_losses:
                return
            picked = self._holding(data, w, j)
            if picked is None:
                return
            w, a = picked
            self._raced(kind)
            self._do(JobStep("wipe"))
            self._do(JobStep("tick"))
            for then in ("renew", "report-progress", "checkpoint"):
                self._late(data, w, a, then)
            self._do(JobStep("reconcile"))
            return
        if kind == "reconcile-running":
            picked = self._holding(data, w, j)
            if picked is None:
                return
            w, a = picked
            self._raced(kind)
            # mid-way: a partial stage checkpointed (so InvalidateCheckpoint has work),
            # and a tick later the lease renewed (a live holder: still not expirable)
            self._at("advance", w, a, amount=1)
            self._at("checkpoint", w, a)
            self._do(JobStep("tick"))
            self._at("renew", w, a)
            self._reconcile_attempt(data, a)
            return
        if kind == "over-capacity":
            assert self.run is not None
            for k in sorted(self.jobs, key=lambda x: (x != j, x)):
                if k not in self.run.submitted:
                    self._do(JobStep("submit", job=k))
                self._do(JobStep("enqueue", job=k))
                if self._do(JobStep("reserve", worker=w, job=k)) == "ok" and k != j:
                    self._raced(kind)  # a second reservation (the slot check's test)
            return
        if j not in self.run.submitted:  # type: ignore[union-attr]
            self._do(JobStep("submit", job=j))
        self._do(JobStep("enqueue", job=j))
        if self._do(JobStep("reserve", worker=w, job=j)) != "ok":
            return
        if kind == "reservation-expires":
            self._raced(kind)
            for _ in range(self.reservation_ticks):
                self._do(JobStep("tick"))
            self._do(JobStep("expire-reservation", job=j))
            self._do(JobStep("authorize", worker=w, job=j))
            return
        # wipe-with-reservation
        if self.sim.wipes >= self.max_coord_losses:
            return
        self._raced(kind)
        self._do(JobStep("wipe"))
        self._do(JobStep("enqueue", job=j))
        other = self._worker(data, avoid=w)
        if other is not None:
            self._do(JobStep("reserve", worker=other, job=j))
        self._do(JobStep("authorize", worker=w, job=j))
        if other is not None:
            self._do(JobStep("authorize", worker=other, job=j))

    # -- the races, one rule each (so each is as likely as any other) ----------------------
    @precondition(has_worker)
    @rule(data=st.data())
    def race_cancel_then_activate(self, data: st.DataObject) -> None:
        self._race_authority(data, "cancel-then-activate")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_cancel_then_renew(self, data: st.DataObject) -> None:
        self._race_authority(data, "cancel-then-renew")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_cancel_then_report(self, data: st.DataObject) -> None:
        self._race_authority(data, "cancel-then-report")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_reap_then_act(self, data: st.DataObject) -> None:
        self._race_authority(data, "reap-then-act")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_reap_then_persist(self, data: st.DataObject) -> None:
        self._race_authority(data, "reap-then-persist")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_stale_outcome(self, data: st.DataObject) -> None:
        self._race_outcome(data, "stale-outcome")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_cancel_then_outcome(self, data: st.DataObject) -> None:
        self._race_outcome(data, "cancel-then-outcome")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_finish_then_reconcile(self, data: st.DataObject) -> None:
        self._race_outcome(data, "finish-then-reconcile")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_reconcile_running(self, data: st.DataObject) -> None:
        self._race_coordination(data, "reconcile-running")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_wipe_with_reservation(self, data: st.DataObject) -> None:
        self._race_coordination(data, "wipe-with-reservation")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_wipe_with_lease(self, data: st.DataObject) -> None:
        self._race_coordination(data, "wipe-with-lease")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_reservation_expires(self, data: st.DataObject) -> None:
        self._race_coordination(data, "reservation-expires")

    @precondition(has_worker)
    @rule(data=st.data())
    def race_over_capacity(self, data: st.DataObject) -> None:
        self._race_coordination(data, "over-capacity")

    def _turn(self, cycle: str, options: tuple[Any, ...], salt: int = 0) -> Any:
        """The next of ``options`` in this run's turn for ``cycle`` (a race's fault or
        link): by the run's own count from the run's offset, not by a draw — every
        option (at most :data:`SWEEP_OFFSETS` of them) is the first of some run's.  A run
        that does not sweep (a third of them) starts each cycle at ``salt`` (the index of
        the race's job), so its first turn is not always the cycle's first option."""
        assert len(options) <= SWEEP_OFFSETS
        n = self.turns.get(cycle, 0) + (self.sweep if self.sweep is not None else salt)
        return options[n % len(options)]

    @precondition(has_worker)
    @rule(data=st.data())
    def race_partition(self, data: st.DataObject) -> None:
        """A worker cut off from a service — mid-attempt when it runs one (or can start
        one) — keeps taking its steps (each unavailable, or refused), time passes, the
        link comes back and it carries on to the end.  The (worker, service) pair — of the
        first three incarnations — is this run's next in turn (:meth:`_turn`); a pair
        whose worker is down is skipped."""
        j = self._job(data)
        pairs = tuple((w, s) for w in self.workers[:3] for s in Service)
        w, service = self._turn("partition", pairs, self.jobs.index(j))
        if w in self._unstarted():
            self._do(JobStep("start", worker=w))
        if w not in self._up():
            self.turns["partition"] = self.turns.get("partition", 0) + 1
            return
        running = [a for v, a in self._local("executing") if v == w]
        a = running[0] if running else None
        if a is None and self._busy(w) < self.concurrency:
            a = self._running(w, j)
        if self._do(JobStep("drop-link", worker=w, service=service)) != "ok":
            return
        self.turns["partition"] = self.turns.get("partition", 0) + 1
        self._raced(f"partition-{service.value}")
        if a is not None:
            for then in ("renew", "report-progress", "advance", "checkpoint"):
                self._late(data, w, a, then)
        self._do(JobStep("tick"))
        self._do(JobStep("restore-link", worker=w, service=service))
        if a is None:
            return
        # it carries on to the end (freeing its slot for the next race)
        self._at("renew", w, a)
        self._at("advance", w, a, amount=self.max_progress)
        assert self.run is not None
        self._at("send-outcome", w, a, outcome=self.run.scripted(a))
        for then in ("process-outcome", "cooperative-stop", "record-stop", "release-lease"):
            self._at(then, w, a)

    @precondition(has_worker)
    @rule(data=st.data(), end=st.sampled_from(["crash", "shutdown"]))
    def race_vault_credential(self, data: st.DataObject, end: str) -> None:
        self._race_credential(data, "vault", LOST_VAULT_REPLIES, end)

    @precondition(has_worker)
    @rule(data=st.data(), end=st.sampled_from(["crash", "shutdown"]))
    def race_durable_credential(self, data: st.DataObject, end: str) -> None:
        self._race_credential(data, "commit", LOST_CREDENTIAL_COMMITS, end)

    def _race_credential(
        self, data: st.DataObject, cycle: str, options: tuple[JobFault, ...], end: str
    ) -> None:
        """A credential write loses a reply (this run's next in turn of ``options``:
        :meth:`_turn`) — and, when the job has an intent left, the handler's next write
        loses the next one in turn — then its writer goes away: the intents are left
        half-done for the reconciler (the spec gives its cleanup no fairness; the drain's
        quiescence requires it done).  The reconciler passes at once — while the writer's
        attempt is still the job's current authority, so it must leave the intents alone
        (the judgement's overreach check); it finishes them once the attempt is reaped."""
        free = self._with_intents()
        if not free:
            return
        j = self._job(data, free)
        w = self._worker(data)
        if w is None:
            return
        picked = self._holding(data, w, j, free)
        if picked is None:
            return
        w, a = picked
        j = a.job
        self._raced(f"credential-then-{end}")
        used = sum(1 for c in self._durable().credentials if c.job == j)
        for _ in range(max(1, min(2, self.max_credential_intents - used))):
            lost: JobFault = self._turn(cycle, options, self.jobs.index(j))
            before = len(self.run.hook.fired)  # type: ignore[union-attr]
            self._at("put-secret", w, a, faults=(lost,))
            if len(self.run.hook.fired) > before:  # type: ignore[union-attr]
                self.turns[cycle] = self.turns.get(cycle, 0) + 1
        self._do(JobStep(end, worker=w))
        self._do(JobStep("reconcile"))


class JobLoopMachine(JobRuntimeMachine):
    """Incarnations driven by their production loops (:mod:`remora.sim.jobs.loops`): the
    client, environment, time and reconcile-pass rules of :class:`JobRuntimeMachine`, but
    no worker takes a single step by rule — each started incarnation runs
    :class:`~remora.jobs.loop.WorkerLoop` unchanged: a rule takes one turn of its loop
    (heartbeat when due, forget finished handlers, tend the running ones, dispatch into a
    free slot), one stretch of a handler it started (until the handler's next call, or
    its end and the settlement), or one pass of its reconciler's schedule; time passes by
    ``Tick`` alone (a handler's sleep is a pause until its next stretch).  Every spec
    action a loop step takes is refinement-checked and the state after it judged, as for
    any step; after a clean loop step (no fault fired, its links up) the loop's own
    promises are checked (:meth:`~remora.sim.jobs.loops.SimLoops.problems`)."""

    #: Whether a reconcile pass may be crossed by another loop's (``loop_reconcile``):
    #: off here, so that the loop machine's derandomized examples — and the planted bugs
    #: killed within their budgets — stay as they were; the crossing machine turns it on.
    cross_passes: ClassVar[bool] = False

    # the single worker steps are the loops' business here (a rule set to None is not a
    # rule of the subclass)
    reserve = None  # type: ignore[assignment]
    dispatch = None  # type: ignore[assignment]
    authorize = None  # type: ignore[assignment]
    activate = None  # type: ignore[assignment]
    tend = None  # type: ignore[assignment]
    advance = None  # type: ignore[assignment]
    send_outcome = None  # type: ignore[assignment]
    complete = None  # type: ignore[assignment]
    finish = None  # type: ignore[assignment]
    run_to_outcome = None  # type: ignore[assignment]
    reconcile_job = None  # type: ignore[assignment]
    reconcile_attempt = None  # type: ignore[assignment]
    lose_lease = None  # type: ignore[assignment]
    zombie = None  # type: ignore[assignment]
    # one more rule family a run may switch off: asking a loop to stop (:meth:`loop_stop`)
    swarm: ClassVar[tuple[str, ...]] = (*SWARM, "stop")
    max_timeout = 5
    handlers_give_up = True
    # links are cut and restored around the loop's steps (:meth:`loop_outage`)
    drop_link = None  # type: ignore[assignment]
    restore_link = None  # type: ignore[assignment]

    def _looping(self) -> list[str]:
        """The incarnations whose loop runs: started, their process alive, the loop not
        ended (one declared down or shut down still turns: its loop learns it and ends)."""
        assert self.run is not None
        gone = self.sim.killed | self.run.loops.ended
        return [w for w in self.workers if w in self.sim.started and w not in gone]

    def has_loop(self) -> bool:
        return self.run is not None and bool(self._looping())

    def has_handler(self) -> bool:
        return self.run is not None and bool(self.run.loops.running())

    @precondition(lambda self: self.has_loop())
    @rule(data=st.data(), fs=step_faults("loop-turn"))
    def loop_turn(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        """One turn of an incarnation's loop."""
        w = data.draw(st.sampled_from(self._looping()), label="worker")
        self._do(JobStep("loop-turn", worker=w, faults=fs))

    @precondition(lambda self: self.has_handler())
    @rule(data=st.data(), fs=step_faults("loop-handler"))
    def loop_handler(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        """A handler a loop started runs until its next call (or its end, and the
        attempt's settlement)."""
        assert self.run is not None
        w, a = data.draw(st.sampled_from(self.run.loops.running()), label="handler")
        self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token, faults=fs))

    @precondition(lambda self: self.has_loop())
    @rule(data=st.data(), fs=step_faults("loop-reconcile"))
    def loop_reconcile(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        """One pass of an incarnation's reconcile schedule (full or incremental, as the
        schedule says) — or, when another loop runs, perhaps one crossed by that loop's
        pass, as their threads interleave in production: the other's whole pass runs at
        this pass's ``at``-th store call (between two calls, never inside a transaction
        or a lock), so this pass then acts on reads the other has just made stale, and
        every step it takes must re-check its guard (``loop-reconcile-crossed``)."""
        looping = self._looping()
        w = data.draw(st.sampled_from(looping), label="worker")
        at = 0
        if self.cross_passes and len(looping) > 1:
            at = data.draw(st.integers(0, CROSS_CALLS), label="crossed at")
        if at > 1:
            self._do(JobStep("loop-reconcile-crossed", worker=w, amount=at, faults=fs))
        else:  # 0 or 1: before the pass's first call is no crossing
            self._do(JobStep("loop-reconcile", worker=w, faults=fs))

    @precondition(lambda self: self.run is not None and not self.something_ages())
    @rule()
    def time_passes(self) -> None:
        """A tick when no lease, reservation or delay ages (:meth:`tick` covers those):
        the loops' heartbeats still do — a loop that is not turned misses its beats and
        is declared down."""
        self._do(JobStep("tick"))

    def can_cut(self) -> bool:
        return self.on("links") and self.sim.partitions < self.max_partitions

    @precondition(lambda self: self.has_loop() and self.can_cut())
    @rule(data=st.data(), service=st.sampled_from(list(Service)))
    def loop_outage(self, data: st.DataObject, service: Service) -> None:
        """An outage the loop rides out: an incarnation's link to ``service`` drops; for a
        few ticks (up to twice a lease) its loop takes its rounds cut off; the link comes
        back and it takes a round again (its first clean steps must catch up on what the
        outage made it miss: its heartbeat, its reconcile passes)."""
        assert self.run is not None
        w = data.draw(st.sampled_from(self._looping()), label="worker")
        if self._do(JobStep("drop-link", worker=w, service=service)) != "ok":
            return
        for _ in range(data.draw(st.integers(1, 2 * self.lease_ticks), label="ticks")):
            self._do(JobStep("tick"))
            self._round((w,))
        self._do(JobStep("restore-link", worker=w, service=service))
        self._round((w,))

    def _round(
        self,
        workers: tuple[str, ...],
        reconcile_faults: tuple[JobFault, ...] = (),
        hung: AttemptId | None = None,
    ) -> None:
        """A round of ``workers``' loops, as production's threads interleave between two
        ticks: each loop turns once (if it still runs), each handler it runs goes on to
        its next call (or its end; not ``hung``'s), and its reconcile schedule passes (the
        first pass meeting ``reconcile_faults``)."""
        assert self.run is not None
        for w in workers:
            if w in self._looping():
                self._do(JobStep("loop-turn", worker=w))
        for w, a in self.run.loops.running():
            if w in workers and a != hung:
                self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token))
        for w in workers:
            if w in self._looping():
                self._do(JobStep("loop-reconcile", worker=w, faults=reconcile_faults))
                reconcile_faults = ()

    def _crowded(self) -> list[str]:
        """The incarnations whose loops run several handlers (their settlements may meet)."""
        assert self.run is not None
        running = [w for w, _ in self.run.loops.running()]
        return sorted({w for w in running if running.count(w) > 1})

    @precondition(
        lambda self: self.has_handler() and len(self._looping()) > 1 and bool(self._crowded())
    )
    @rule(
        data=st.data(), fs=step_faults("loop-handler"), reconcile_fs=step_faults("loop-reconcile")
    )
    def loop_stall(
        self,
        data: st.DataObject,
        fs: tuple[JobFault, ...],
        reconcile_fs: tuple[JobFault, ...],
    ) -> None:
        """A stalled incarnation running several handlers (a long pause of its process:
        a collector, a starved host): for a few ticks its loop takes no turn while the
        others take their rounds (their reconcilers may reap its attempts, their
        dispatchers authorize replacements, declare it down); then its handlers go on —
        before its loop turns again, so no tend has noticed what changed: what they
        finished is settled as it stands (a batching completer's rows are stale or
        current, each judged by its own guard).  ``fs`` fire in the first of those
        stretches (a batch's COMMIT reply lost, …), ``reconcile_fs`` in the others' first
        reconcile pass (the reaping of the stalled attempts meets the stores' faults)."""
        assert self.run is not None
        w = data.draw(st.sampled_from(self._crowded()), label="worker")
        others = tuple(x for x in self._looping() if x != w)
        for _ in range(data.draw(st.integers(1, 2 * self.lease_ticks + 1), label="ticks")):
            self._do(JobStep("tick"))
            self._round(others, reconcile_fs)
            reconcile_fs = ()
        for _ in range(data.draw(st.integers(1, 3), label="stretches")):
            for x, a in self.run.loops.running():
                if x == w:
                    step = JobStep("loop-handler", worker=w, job=a.job, token=a.token, faults=fs)
                    self._do(step)
                    fs = ()  # the faults drawn go to the first stretch

    @precondition(lambda self: self.has_loop())
    @rule(data=st.data(), cancel=st.booleans(), fs=step_faults("loop-handler"))
    def loop_lag(self, data: st.DataObject, cancel: bool, fs: tuple[JobFault, ...]) -> None:
        """An incarnation's loop lags (its thread starved) while it runs a handler (when
        it runs none, its loop turns first — dispatching one if it can — and the handler
        takes its first stretch): for a few ticks — up to past its leases, short of being
        declared down — its loop takes no turn while the others take their rounds (their
        reapers may expire its leases; another incarnation starts if none runs); with
        ``cancel``, one of its jobs is then cancelled and another incarnation's reconcile
        pass publishes the notice.  Then its loop turns — its tend must notice what
        changed (``ctx.cancelled``) — and its handlers go on (``fs`` fire in the first of
        them that makes a call they name)."""
        assert self.run is not None
        w = data.draw(st.sampled_from(self._looping()), label="worker")
        if not any(x == w for x, _ in self.run.loops.running()):
            self._do(JobStep("loop-turn", worker=w))
            for x, a in self.run.loops.running():
                if x == w:
                    self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token))
        if len(self._looping()) < 2 and self._unstarted():
            self._do(JobStep("start", worker=self._unstarted()[0]))
        others = tuple(x for x in self._looping() if x != w)
        lag = st.integers(1, 3 * self.lease_ticks - 1)
        for _ in range(data.draw(lag, label="ticks")):
            self._do(JobStep("tick"))
            self._round(others)
        jobs = [a.job for x, a in self.run.loops.running() if x == w]
        if cancel and jobs and others:
            self._do(JobStep("cancel", job=data.draw(st.sampled_from(jobs), label="job")))
            if others[0] in self._looping():
                self._do(JobStep("loop-reconcile", worker=others[0]))
        if w not in self._looping():
            return
        self._do(JobStep("loop-turn", worker=w))
        for x, a in self.run.loops.running():
            if x == w:
                fs = self._stretch(w, a, fs)

    @precondition(lambda self: self.has_handler() and bool(self._crowded()))
    @rule(data=st.data(), fs=step_faults("loop-handler"))
    def loop_finish_together(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        """A crowded incarnation's handlers run on in turn, no turn of its loop between,
        until each has ended and been settled: their completions meet (a batching loop's
        completer commits them in one flush).  ``fs`` ride with every stretch until one
        fires, so a fault lands on the first call it names — the flush's COMMIT (its reply
        lost, either way), a stage write, a heartbeat — whichever stretch makes it."""
        assert self.run is not None
        w = data.draw(st.sampled_from(self._crowded()), label="worker")
        for _ in range(2 * (self.max_progress + 2)):
            mine = [a for x, a in self.run.loops.running() if x == w]
            if not mine:
                return
            for a in mine:
                if (w, a) not in self.run.loops.running():
                    continue  # ended by another's stretch (its process killed, …)
                fs = self._stretch(w, a, fs)

    @precondition(lambda self: self.has_loop())
    @rule(data=st.data(), fs=step_faults("loop-handler", some=True))
    def loop_settle_faulted(self, data: st.DataObject, fs: tuple[JobFault, ...]) -> None:
        """A handler runs to its end, and its settlement meets the stores' faults (when
        the incarnation runs none, it is given one: :meth:`_give_handler`): its stretches
        run clean until the next one is its last (the handler ends and its attempt is
        settled — the deferred stage written, the outcome sent and accepted, the stop
        recorded, the lease released; a batching completer's flush waits a stretch),
        then ``fs`` ride on the stretches until one fires.  :meth:`loop_handler` draws
        its faults on any stretch, and the first of a handler's calls they name is mostly
        an earlier one (its checkpoint, its first stage write); and a handler runs in few
        of the loop machine's states: a settlement's own calls seldom met a fault."""
        assert self.run is not None
        drawn = self._draw_given_handler(data)
        if drawn is None:
            return
        w, a = drawn
        for _ in range(self.max_progress + 3):
            if (w, a) not in self.run.loops.running():
                return
            if self.run.loops.ends_next(a):
                fs = self._stretch(w, a, fs)
            else:
                self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token))

    @precondition(lambda self: self.has_loop())
    @rule(data=st.data(), ticks=st.integers(1, 7))
    def loop_hang(self, data: st.DataObject, ticks: int) -> None:
        """A handler hangs in a long call — it takes no stretch, so it reads no
        ``ctx.cancelled`` — while every loop, its own included, takes its rounds for
        ``ticks`` ticks (when its incarnation runs none, it is given one:
        :meth:`_give_handler`): its loop alone must end what overran its job's timeout (a
        retryable failure) or outlived a stop condition's grace (a cooperative stop); then
        the handler goes on, if its loop still waits for it.  Every other rule gives a
        handler its stretch within a round of its loop's turn, so a handler always
        cooperated before its loop had to end it.  Its incarnation may lose a link for a
        tick or two meanwhile (drawn), so that the loop's end meets a store away."""
        assert self.run is not None
        drawn = self._draw_given_handler(data)
        if drawn is None:
            return
        w, a = drawn
        # its incarnation may lose a link for a tick or two meanwhile: the loop's own end
        # of the attempt then meets a store away (and the reconciler may settle first)
        cut = data.draw(st.none() | st.sampled_from(list(Service)), label="cut")
        at = data.draw(st.integers(1, ticks), label="cut at") if cut is not None else 0
        back = at + data.draw(st.integers(1, 2), label="cut for") if cut is not None else 0
        for tick in range(1, ticks + 1):
            if cut is not None and tick == at:
                self._do(JobStep("drop-link", worker=w, service=cut))
            if cut is not None and tick == back:
                self._do(JobStep("restore-link", worker=w, service=cut))
            self._do(JobStep("tick"))
            self._round(tuple(self._looping()), hung=a)
        if cut is not None and back > ticks and w in self._looping():
            self._do(JobStep("restore-link", worker=w, service=cut))
        if (w, a) in self.run.loops.running():
            self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token))

    def _draw_given_handler(self, data: st.DataObject) -> tuple[str, AttemptId] | None:
        """A looping incarnation and one of its handlers (it is given one when it runs
        none: :meth:`_give_handler`), or None when it has none to give."""
        w = data.draw(st.sampled_from(self._looping()), label="worker")
        mine = self._give_handler(w)
        if not mine:
            return None
        return w, data.draw(st.sampled_from(mine), label="handler")

    def _give_handler(self, w: str) -> list[AttemptId]:
        """The attempts whose handlers ``w``'s loop runs — when it runs none, after a job
        is submitted (if one is left) and its loop reconciles and turns, dispatching one if
        it can."""
        assert self.run is not None
        if not any(x == w for x, _ in self.run.loops.running()):
            left = [j for j in self.jobs if j not in self.run.submitted]
            if left:
                self._do(JobStep("submit", job=left[0]))
            for op in ("loop-reconcile", "loop-turn"):
                if w in self._looping():
                    self._do(JobStep(op, worker=w))
        return [a for x, a in self.run.loops.running() if x == w]

    @precondition(lambda self: self.has_loop() and len(self._looping()) > 1 and self.can_cut())
    @rule(data=st.data(), rounds=st.integers(2, 4))
    def loop_handoff(self, data: st.DataObject, rounds: int) -> None:
        """An incarnation's link to the coordination store drops just before one of its
        handlers ends (when it runs none, it is given one: :meth:`_give_handler`; the
        handler takes its stretches
        until the next one is its last; one that will fail retryably is preferred): the
        outcome commits durably, its lease release fails, and the settlement's retry pauses the
        handler's thread between tries — while the other loops take ``rounds`` rounds
        (they may enqueue the job it gave back, reserve and authorize a replacement, and
        be refused its activation: the old lease still lives).  The link comes back, the
        handler goes on (the release lands), and the others take a round in the same
        tick, then one a tick later (a refused activation is tried again once a tick, and
        must be)."""
        assert self.run is not None
        w = data.draw(st.sampled_from(self._looping()), label="worker")
        mine = self._give_handler(w)
        # a handler that will fail retryably, if there is one: only a retry has a
        # replacement to hand off to while the old lease lives
        retrying = [a for a in mine if self.run.scripted(a) is JobOutcome.RETRYABLE]
        if not mine:
            return
        a = data.draw(st.sampled_from(retrying or mine), label="handler")
        for _ in range(self.max_progress + 1):
            if a in self.run.loops.settling or (w, a) not in self.run.loops.running():
                break
            self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token))
        others = tuple(x for x in self._looping() if x != w)
        if self._do(JobStep("drop-link", worker=w, service=Service.COORDINATION)) != "ok":
            return
        if (w, a) in self.run.loops.running():
            self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token))
        for _ in range(rounds):
            self._round(others)
        self._do(JobStep("restore-link", worker=w, service=Service.COORDINATION))
        if (w, a) in self.run.loops.running():
            self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token))
        self._round(others)
        self._do(JobStep("tick"))
        self._round(others)

    def _stretch(self, w: str, a: AttemptId, fs: tuple[JobFault, ...]) -> tuple[JobFault, ...]:
        """One stretch of ``a``'s handler in ``w``'s loop with the fault selectors ``fs``
        riding on it; what rides on the next stretch (none once one fired)."""
        assert self.run is not None
        before = len(self.run.hook.fired)
        self._do(JobStep("loop-handler", worker=w, job=a.job, token=a.token, faults=fs))
        return () if len(self.run.hook.fired) > before else fs

    def _stoppable(self) -> list[str]:
        """The looping incarnations not yet asked to stop."""
        assert self.run is not None
        return [w for w in self._looping() if w not in self.run.loops.stop_asked]

    @precondition(
        lambda self: (
            self.on("stop") and not self.run.loops.stop_asked and len(self._stoppable()) > 1
        )
    )
    @rule(data=st.data())
    def loop_stop(self, data: st.DataObject) -> None:
        """An incarnation's process is asked to stop (SIGTERM, a deploy): from its next
        turn its loop takes no new work and lets its handlers run for the grace period
        (their leases still renewed), then abandons what still runs and shuts the
        incarnation down — or ends at the first turn after it has drained.  A job left is
        submitted and enqueued first (work it must turn down).  Another loop keeps running
        (the precondition), so the run goes on; one stop per run, in the runs whose swarm
        keeps the family (a stopped loop takes its incarnation out)."""
        assert self.run is not None
        w = data.draw(st.sampled_from(self._stoppable()), label="worker")
        left = [j for j in self.jobs if j not in self.run.submitted]
        if left:  # work to turn down while it stops
            self._do(JobStep("submit", job=left[0]))
            self._do(JobStep("loop-reconcile", worker=w))
        self._do(JobStep("loop-stop", worker=w))

    @precondition(lambda self: self.has_loop())
    @rule()
    def loop_round(self) -> None:
        """A quiet round of every loop (:meth:`_round`), without faults."""
        self._round(tuple(self._looping()))


def reach_of(machine: type[JobRuntimeMachine], kind: str) -> set[tuple[str, ...]]:
    return {r[1:] for r in machine.reach if r[0] == kind}


MachineFactory = Callable[[], JobRuntimeMachine]

__all__ = [
    "RESERVED_NEXT",
    "JobReservationMachine",
    "FAULT_CHOICES",
    "JobMachineBase",
    "JobLoopMachine",
    "JobRaceMachine",
    "DURABLE_STEPS",
    "KINDS",
    "RACES",
    "JobRuntimeMachine",
    "JobScheduleFailure",
    "STEP_CALLS",
    "step_faults",
    "reach_of",
]
