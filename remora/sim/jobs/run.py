"""One executor for job-runtime schedules: the Hypothesis machine, ``remora sim-jobs
--replay`` and ``remora reduce`` all run a :class:`~remora.sim.jobs.trace.JobStep` through
:meth:`JobRun.execute`, so an exported trace replays through exactly the code that found it.

A :class:`JobRun` is the real runtime (:class:`remora.sim.jobs.simulation.Simulation`: SQLite
``:memory:`` durable store, memory coordination, target and vault, a logical clock) with a
:class:`ScriptedFaults` hook: a step's fault selectors give the *n*-th call of an operation
within that step an outcome (``abort``; for writes also ``unknown-committed`` /
``unknown-aborted`` — a lost COMMIT reply).  Every step runs inside
:meth:`RefinementChecker.step <remora.sim.jobs.refinement.RefinementChecker.step>`: it must be a
spec step under alpha, and every invariant and action property of the spec must hold.

The fair drain (:meth:`JobRun.drain`) is fault-free: links restored, every job submitted, a
spare incarnation started, then rounds of reconcile, the workers running their attempts to
the handlers' scripted outcome, and time passing — every step still refinement-checked.
After it the run must be *quiescent* (:meth:`JobRun.quiescence`): every job terminal, no
live lease, reservation, queue entry, notice or live progress, no pending outcome, every
non-winner staging cleaned, every credential intent committed or abandoned with its secret
destroyed — which the runtime's reconciler must drive by itself (the spec gives credential
cleanup no fairness) — and every committed result the winning attempt's staged output.

Failure strings (what the machine raises and ``remora sim-jobs --replay`` prints):
``ERROR refinement: ...``, ``ERROR exception: ...``, ``ERROR not-quiescent: ...``,
``ERROR result: ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import attrs

from remora.clock import LogicalClock
from remora.context import Context
from remora.errors import Canceled, RemoraError, Unavailable, UnknownResult
from remora.faults import At, FaultDecision
from remora.jobs.io import JobOperation, StepRecord
from remora.jobs.model import (
    DEFAULT_QUEUE,
    AttemptId,
    CredentialState,
    JobsConfig,
    NotEnabled,
    Outcome,
    Phase,
    SecretState,
    UnknownJob,
)
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget
from remora.jobs.worker import AUTHORIZED, Worker, WorkerDown, write_credential
from remora.protocol import spec as S
from remora.protocol.spec import State, Step
from remora.sim.faults import Script, ScriptedFaults
from remora.sim.jobs.judgement import (
    JUDGED_REFUSALS,
    JUDGEMENTS,
    LOOP_PASS_DUTIES,
    PASS_DUTIES,
    REFUSAL_REASONS,
    Before,
    affirmation_problems,
    content_problems,
    coordination_log_problems,
    coordination_marks,
    coordination_read_problems,
    credential_step,
    declaration_marks,
    drained_coordination_problems,
    durable_log_problems,
    duty_problems,
    excused,
    fence_problems,
    overreach,
    row_time_problems,
    spec_step_of,
    stale_marks,
    state_problems,
    stopped_incarnation_problems,
)
from remora.sim.jobs.loops import PRODUCTION_LOOP, LoopParts, SimLoops
from remora.sim.jobs.mutations import parts as mutation_parts
from remora.sim.jobs.read_models import ReadModelJudge, read_model_problems
from remora.sim.jobs.refinement import RefinementChecker, RefinementViolation
from remora.sim.jobs.simulation import Parts, SimConfig, Simulation
from remora.sim.jobs.trace import PLAIN, JobConfig, JobFault, JobKind, JobStep, JobTrace

DRAIN_ROUNDS = 40

#: The steps of the incarnations' production loops (:mod:`remora.sim.jobs.loops`): after
#: each, the loop's own promises are checked.
LOOP_OPS = ("loop-turn", "loop-handler", "loop-reconcile", "loop-reconcile-crossed")
"""The loop steps after which the loop's promises are checked (``loop-stop`` only asks a
loop to stop: its promises are its later turns')."""


_CONTENT_WRITES = (JobOperation.TARGET_WRITE, JobOperation.VAULT_WRITE)


_AFTER_EVERY_STEP: tuple[tuple[str, str, Callable[[JobRun], list[str]]], ...] = (
    ("fences", "fences", fence_problems),
    ("stopped-incarnations", "state", stopped_incarnation_problems),
    ("row-times", "row-times", row_time_problems),
    ("durable-log", "durable-log", durable_log_problems),
    ("coordination-log", "coordination-log", coordination_log_problems),
    ("coordination-reads", "coordination-reads", coordination_read_problems),
)
"""The judgements of the state after every step that read the run alone, in the order they
are judged: the check's name in ``judging``, its failure's prefix, the check."""


class JobRunFailure(AssertionError):
    """A run broke refinement, crashed, or did not drain to quiescence."""

    def __init__(self, failure: str, detail: str = "") -> None:
        super().__init__(f"{failure}{': ' + detail if detail else ''}")
        self.failure = failure
        self.detail = detail


def script_of(faults: tuple[JobFault, ...]) -> Script[JobOperation]:
    """A step's fault selectors as the hook's script: the *n*-th call of an operation within
    the step gets the selector's outcome."""
    return {(f.operation, f.call): FaultDecision(f.outcome, 0, selected=True) for f in faults}


def staged_bytes(a: AttemptId, amount: int) -> bytes:
    """What an attempt stages at ``amount`` (so a committed result names its writer)."""
    return f"{a.job}/{a.token}/{amount}".encode()


def secret_bytes(a: AttemptId) -> bytes:
    """The secret an attempt writes (so a live secret names its writer)."""
    return f"secret-{a}".encode()


def classify(result: Any) -> str:
    """A step's result kind (reach, notes)."""
    if isinstance(result, NotEnabled | ValueError):
        return "refused"
    if isinstance(result, UnknownResult):
        return "unknown"
    if isinstance(result, Unavailable):
        return "unavailable"
    if isinstance(result, WorkerDown):
        return "down"
    if isinstance(result, RemoraError):
        return f"error:{type(result).__name__}"
    if isinstance(result, BaseException):
        return "crash"
    if result is False:
        return "refused"
    if result == 0 and not isinstance(result, bool):
        return "noop"
    return "ok"


class JobRun:
    """The runtime in simulation, stepped by :class:`JobStep` (module docstring)."""

    def __init__(
        self,
        config: JobConfig,
        handlers: dict[str, tuple[Outcome, ...]],
        *,
        backends: Callable[[LogicalClock, JobsConfig], Stores] | None = None,
        judging: frozenset[str] = JUDGEMENTS,
        kinds: dict[str, JobKind] | None = None,
        parts: Parts | None = None,
        loop_parts: LoopParts = PRODUCTION_LOOP,
    ) -> None:
        """``backends`` builds the stores (default: SQLite ``:memory:`` and memory
        coordination, target and vault); the machines over PostgreSQL + Redis pass theirs.
        ``judging``: the judgement's checks to make (:data:`~remora.sim.jobs.judgement.
        JUDGEMENTS`; a test leaves one out to show a planted bug survives without it).
        ``kinds``: how each job is submitted (delay, queue, priority; default plain).
        ``parts``/``loop_parts``: what the runtime and the incarnations' production loops
        are built from (default: the config's mutation's parts, the production loop) — a
        test plants a bug in a subclass this way."""
        self.judging = judging
        self.last_result: object = None  # the runtime's answer to the last step
        #: When the run tried to submit each job, on the simulation's clock (the row-times
        #: check; a submission whose reply was lost may be retried later).
        self.submitted_at: dict[str, list[float]] = {}
        self.config = config
        self.handlers = handlers
        self.kinds = dict(kinds or {})
        #: Each delayed job's due time, from its submission and its kind (the run's own
        #: account, independent of what the runtime stored).
        self.due: dict[str, float] = {}
        self.hook = ScriptedFaults()
        #: The processes a selector's kill point killed in the current step (root contexts).
        self._killed: list[Context] = []
        #: Every process a kill point killed, by actor name, in order (reach).
        self.kills: list[str] = []
        #: The incarnations' production loops (the ``loop-*`` steps).
        self.loops = SimLoops(self.scripted, loop_parts)
        queues = sorted({k.queue for k in self.kinds.values()} | {DEFAULT_QUEUE})
        self.sim = Simulation(
            SimConfig(
                jobs=config.jobs,
                workers=(*config.workers, config.drain_worker),
                concurrency=config.concurrency,
                jobs_config=JobsConfig(
                    max_attempts=config.max_attempts,
                    max_progress=config.max_progress,
                    lease_ticks=config.lease_ticks,
                    reservation_ticks=config.reservation_ticks,
                    global_limit=config.global_limit,
                    max_credential_intents=config.max_credential_intents,
                ),
                max_coord_losses=config.max_coord_losses,
                max_partitions=config.max_partitions,
                queues=tuple(queues),
                embedded=config.embedded,
                fused_stage=config.fused_stage,
            ),
            hook=self.hook,
            backends=backends,
            parts=mutation_parts(config.mutation) if parts is None else parts,
            registry=self.loops.registry,
        )
        self.loops.sim = self.sim
        self.loops.ready = self.activations_ready
        self.loops.sendable = self.outcome_sendable
        self.loops.staged = self.stage_complete
        tick = self.sim.config.jobs_config.tick_ms / 1000
        self.loops.timeouts = {j: k.timeout * tick for j, k in self.kinds.items() if k.timeout}
        self.loops.set_handler_timeout(config.handler_timeout * tick)
        self.loops.gives_up = {j for j, k in self.kinds.items() if k.gives_up}
        self.chk = RefinementChecker(self.sim)
        #: What users read (status, history, metrics) judged against the run's account
        #: (:mod:`remora.sim.jobs.read_models`).
        self.readers = ReadModelJudge(self) if "read-models" in judging else None
        #: Check the staged bytes and the secrets after every step (the in-process stores:
        #: a read each is free; the services' are checked after the drain).
        self.contents = isinstance(self.sim.stores.target, MemoryTarget) and ("contents" in judging)
        self._contents_seen: tuple[Any, Any] | None = None
        #: Every reservation the coordination store held after some step: (job, worker,
        #: id) — a worker may know only an id it was issued.
        self.issued: set[tuple[str, str, str]] = set()
        self.steps: list[JobStep] = []
        self.results: list[tuple[str, str]] = []  # (op, result kind) per executed step
        #: every checked step, the drain's too: (label, result kind) — what the machines
        #: over two configurations compare step by step
        self.trail: list[tuple[str, str]] = []
        self.submitted: set[str] = set()
        #: What the judgement's incremental checks remember between steps (the logs'
        #: entries judged so far, the coordination state whose reads were last judged).
        self.memo: dict[str, Any] = {}
        #: The simulation's clock when the last step began (a reconcile pass's duties are
        #: judged by the time it began: :func:`~remora.sim.jobs.judgement.duty_problems`).
        self.pass_began = 0.0

    # -- steps ----------------------------------------------------------------------------------
    def execute(self, step: JobStep) -> str:
        """Run one step (refinement-checked, its state judged); returns its result kind.  A
        judged step (:data:`~remora.sim.jobs.judgement.JUDGED_REFUSALS`) the runtime
        refuses although the spec enables its action fails the run, unless a documented
        reason (:data:`~remora.sim.jobs.judgement.REFUSAL_REASONS`) holds."""
        self.steps.append(step)
        before = Before(self.chk.last_view, self.chk.state)
        spec = spec_step_of(self, step) if "refusals" in self.judging else None
        enabled = self._enabled(spec) if spec is not None and spec.name else None
        credential = spec is not None and not spec.name
        reason = excused(self, step, before) if enabled or credential else None
        fired = len(self.hook.fired)
        kills = len(self.kills)
        declaring = step.op == "declare-down" and "state" in self.judging
        marks = (
            (coordination_marks(self.sim.stores.coordination), self.sim.stores.target.fenced())
            if declaring
            else (frozenset(), frozenset())
        )
        self.pass_began = self.sim.clock.now()
        kind = self._checked(lambda: self._dispatch(step), step.faults, step.label())
        self.results.append((step.op, kind))
        if declaring:
            let_go_failed = len(self.kills) > kills or any(
                op in (JobOperation.COORD_WRITE.value, JobOperation.TARGET_WRITE.value)
                for op, _ in self.hook.fired[fired:]
            )
            left = declaration_marks(self, marks, kind, let_go_failed)
            if left:
                raise JobRunFailure(f"ERROR marks: {left[0]}", f"after step {step.label()}")
        if "affirmations" in self.judging:
            affirmed = affirmation_problems(
                self, step, self.last_result, faulted=len(self.hook.fired) > fired
            )
            if affirmed:
                raise JobRunFailure(f"ERROR affirmed: {affirmed[0]}", f"at step {step.label()}")
        if step.op in LOOP_OPS:
            missent = self.loops.missent(str(step.worker), self.chk.last_steps, step.op)
            if missent:
                raise JobRunFailure(f"ERROR loop: {missent[0]}", f"at step {step.label()}")
        if step.op in LOOP_OPS and kind == "ok":
            faulted = len(self.hook.fired) > fired
            broken = self.loops.problems(step.op, str(step.worker), faulted)
            if broken:
                raise JobRunFailure(f"ERROR loop: {broken[0]}", f"after step {step.label()}")
        if step.op == "reconcile" and "state" in self.judging and len(self.hook.fired) == fired:
            stale = stale_marks(self)
            if stale:
                raise JobRunFailure(f"ERROR marks: {stale[0]}", f"after step {step.label()}")
        if step.op == "reconcile" and kind == "ok" and len(self.hook.fired) == fired:
            self._judge_duties(before.state, step.label())
        if (
            step.op == "loop-reconcile"
            and kind == "ok"
            and len(self.hook.fired) == fired
            and self.loops.reconciler_reaches(str(step.worker))
        ):
            # the production loop's pass, full or incremental (its store failures are
            # swallowed: judged only when no fault fired and its links were all up)
            self._judge_duties(before.state, step.label(), LOOP_PASS_DUTIES)
        if kind not in ("refused", "noop") or spec is None:
            return kind
        if credential:  # a credential write: where it stopped, in the state after it
            a = AttemptId(str(step.job), int(step.token or 0))
            prepared = sum(1 for c in before.view.durable.credentials if c.job == a.job)
            enabled = self._enabled(credential_step(self, a, prepared))
        if enabled is not None and reason is None:
            raise JobRunFailure(
                f"ERROR refused: {step.label()} was refused though the spec enables {enabled}",
                "no documented runtime reason holds (docs/jobs.md)",
            )
        return kind

    def _contents_changed(self) -> bool:
        """Whether the staged bytes and secrets are to be checked after this step: the
        in-process stores, and the step wrote the target or the vault (through the seam)
        or their state changed (every write that changes bytes goes through the seam)."""
        if not self.contents:
            return False
        view = self.chk.last_view
        seen = (view.target, view.vault)
        wrote = any(op in self.hook.last for op in _CONTENT_WRITES)
        if not wrote and seen == self._contents_seen:
            return False
        self._contents_seen = seen
        return True

    def activations_ready(self, w: str) -> frozenset[AttemptId]:
        """The attempts incarnation ``w`` holds authorized whose ``ActivateAttempt`` the
        tracked spec state enables and no documented reason for refusing it
        (:data:`~remora.sim.jobs.judgement.REFUSAL_REASONS`) holds: an activation of any
        of them now would succeed (the loop's activation promise,
        :meth:`~remora.sim.jobs.loops.SimLoops._unactivated`)."""
        wk = self.sim.workers.get(w)
        if wk is None:
            return frozenset()
        before = Before(self.chk.last_view, self.chk.state)
        ready = set()
        for a, local in list(wk.attempts.items()):
            if local.state != AUTHORIZED:
                continue
            step = JobStep("activate", worker=w, job=a.job, token=a.token)
            spec = spec_step_of(self, step)
            if self._enabled(spec) is not None and excused(self, step, before) is None:
                ready.add(a)
        return frozenset(ready)

    def outcome_sendable(self, w: str, a: AttemptId, outcome: str) -> bool:
        """Whether ``w`` sending ``outcome`` for ``a`` now would be taken: the tracked spec
        state enables its ``SendOutcome`` and no documented reason for refusing it holds
        (the loop's settlement promise, :meth:`~remora.sim.jobs.loops.SimLoops._unsent`)."""
        wk = self.sim.workers.get(w)
        if wk is None or a not in wk.attempts:
            return False
        step = JobStep("send-outcome", worker=w, job=a.job, token=a.token, outcome=Outcome(outcome))
        before = Before(self.chk.last_view, self.chk.state)
        spec = spec_step_of(self, step)
        return self._enabled(spec) is not None and excused(self, step, before) is None

    def stage_complete(self, s: State, a: AttemptId) -> bool:
        """Whether ``a``'s stage is complete in the spec state ``s`` (then the spec enables
        its success: :meth:`~remora.sim.jobs.loops.SimLoops.missent`)."""
        return bool(s.stageState[self.chk.alpha.attempt(a)] == S.StageComplete)

    def _enabled(self, spec: Step | None) -> str | None:
        """The label of ``spec`` when the tracked spec state enables it (else None)."""
        if spec is None or self.chk.model.apply(self.chk.state, spec) is None:
            return None
        return self.chk.renderer.step_label(spec)

    def submit(self, job: str) -> None:
        """Submit ``job`` with its kind; a delayed one is due ``delay`` ticks later."""
        kind = self.kinds.get(job, PLAIN)
        tick = self.sim.config.jobs_config.tick_ms / 1000
        self.submitted_at.setdefault(job, []).append(self.sim.clock.now())
        if kind.delay:
            self.due[job] = self.sim.clock.now() + kind.delay * tick
        self.sim.submit(
            job,
            queue=kind.queue,
            priority=kind.priority,
            delay=kind.delay * tick if kind.delay else None,
            timeout=kind.timeout * tick,
        )

    def early(self) -> str | None:
        """A delayed job that got ahead of its time (enqueued, reserved or authorized
        before it was due, or stored with another due time) — else None.  The property
        delayed jobs add; checked after every step, the drain's too."""
        now = self.sim.clock.now()
        pending = [j for j, due in self.due.items() if due > now]
        if not pending:
            return None
        c = self.sim.stores.coordination.snapshot()
        for j in sorted(pending):
            try:
                row = self.sim.stores.durable.job(j)
            except UnknownJob:
                continue  # its submission failed (a fault): nothing to be early

            if abs(row.due - self.due[j]) > 1e-6:
                return f"{j} is due at {row.due:g} in the durable store, not {self.due[j]:g}"
            if j in c.queued or j in c.reservations or row.current_token:
                where = "authorized" if row.current_token else "enqueued"
                return f"{j} was {where} at {now:g}, before it was due at {self.due[j]:g}"
        return None

    # -- kill points ------------------------------------------------------------------------------
    def _kill(self, ctx: Context) -> None:
        """A fault selector's kill: the process the call ran in dies right after the call
        (its root context is canceled, so no further call of it reaches a store)."""
        root = ctx.root()
        if root not in self._killed:
            self._killed.append(root)
        root.cancel(Canceled("the process was killed (a fault selector's kill point)"))

    def _store_keys(self) -> set[tuple[str, int]]:
        """Every ``(actor, seq)`` the durable and the coordination logs hold."""
        stores = self.sim.stores
        keys = {(e.actor, e.actor_seq) for e in stores.durable.log()}
        return keys | {(c.actor, c.actor_seq) for c in stores.coordination.log() if c.action}

    def _bury(self, known: set[tuple[str, int]]) -> None:
        """After a kill: the killed process is gone — an incarnation as after a ``crash``
        (a stutter until it is declared down), the reconciler or the client restarted as a
        new process (a fresh context; its sequence numbers go on, as a new name's would).
        What it wrote but never recorded (it died first) is taken from the stores' logs,
        as trace validation does (:func:`~remora.sim.jobs.refinement.merge_records`)."""
        sim = self.sim
        names: set[str] = set()
        durable = sim.stores.durable.snapshot()
        registered = {row.id for row in durable.workers}
        # a submission that committed before its client died is submitted (the drain
        # does not submit it again)
        self.submitted |= {row.id for row in durable.jobs}
        for root in self._killed:
            for w, process in sim.processes.items():
                if process is root:
                    sim.killed.add(w)
                    sim.down.add(w)
                    names.add(sim.workers[w].actor.name)
                    if w in registered:  # killed after its registration committed
                        sim.started.add(w)
            if sim.reconciler.actor.ctx.root() is root:
                sim.reconciler.actor.ctx = Context(sim.clock)
                names.add(sim.reconciler.actor.name)
            if sim.client.ctx.root() is root:
                sim.client.ctx = Context(sim.clock)
                names.add(sim.client.name)
        self._killed.clear()
        self.kills.extend(sorted(names))
        recorded = {(r.actor, r.seq) for r in sim.recorder.steps}
        stores = sim.stores
        lost: dict[tuple[str, int], StepRecord] = {}
        for e in stores.durable.log():
            k = (e.actor, e.actor_seq)
            if e.actor in names and k not in known and k not in recorded:
                lost[k] = StepRecord(
                    e.actor, e.actor_seq, e.action, e.params, "durable", e.key, e.version
                )
        for c in stores.coordination.log():
            k = (c.actor, c.actor_seq)
            if c.action and c.actor in names and k not in known and k not in recorded:
                lost[k] = StepRecord(
                    c.actor, c.actor_seq, c.action, c.params, "coordination", order=c.order
                )
        for k in sorted(lost):
            sim.recorder.record(lost[k])

    def _checked(self, op: Callable[[], Any], faults: tuple[JobFault, ...], label: str) -> str:
        """One refinement-checked step, then the judgement of the spec actions it took
        (:func:`~remora.sim.jobs.judgement.overreach`) and of the state it left
        (:func:`~remora.sim.jobs.judgement.state_problems`).  A selector's ``kill`` kills
        the calling process right after its call (:meth:`_kill`, :meth:`_bury`)."""
        self.hook.arm(script_of(faults))
        kills = [(f.operation, f.call, At.AFTER) for f in faults if f.kill]
        known = self._store_keys() if kills else set()
        for key in kills:
            self.hook.boundaries[key] = self._kill

        def run() -> Any:
            try:
                return op()
            finally:
                if self._killed:
                    self._bury(known)

        try:
            result = self.chk.step(run)
        except RefinementViolation as exc:
            raise JobRunFailure(f"ERROR refinement: {exc}", f"at step {label}") from None
        finally:
            self.hook.arm({})
            for key in kills:
                self.hook.boundaries.pop(key, None)
        self.last_result = result
        kind = classify(result)
        self.trail.append((label, kind))
        if kind == "crash":
            raise JobRunFailure(
                f"ERROR exception: {type(result).__name__}: {result}", f"at step {label}"
            )
        declared = self.loops.declarations(self.chk.last_steps)
        spurious = self.loops.spurious_declarations(declared)
        if spurious:
            raise JobRunFailure(f"ERROR loop: {spurious[0]}", f"at step {label}")
        premature = self.loops.early_declarations(declared)
        if premature:
            raise JobRunFailure(f"ERROR declared: {premature[0]}", f"at step {label}")
        over = overreach(self) if "overreach" in self.judging else []
        if over:
            raise JobRunFailure(f"ERROR overreach: {over[0]}", f"at step {label}")
        if "state" in self.judging or self.contents:
            problems = state_problems(self, "state" in self.judging, self._contents_changed())
            if problems:
                raise JobRunFailure(f"ERROR state: {problems[0]}", f"after step {label}")
        for name, prefix, judge in _AFTER_EVERY_STEP:
            if name in self.judging:
                problems = judge(self)
                if problems:
                    raise JobRunFailure(f"ERROR {prefix}: {problems[0]}", f"after step {label}")
        if self.readers is not None:
            self.readers.observe()
            problems = read_model_problems(self.readers)
            if problems:
                raise JobRunFailure(f"ERROR read-models: {problems[0]}", f"after step {label}")
        early = self.early()
        if early is not None:
            raise JobRunFailure(f"ERROR delayed: {early}", f"at step {label}")
        return kind

    def close(self) -> None:
        """End the loops' handler threads (the run is over)."""
        self.loops.close()

    def worker(self, w: str | None) -> Worker:
        return self.sim.workers[str(w)]

    def _attempt(self, step: JobStep) -> AttemptId:
        return AttemptId(str(step.job), int(step.token or 0))

    def _exists(self, a: AttemptId) -> bool:
        return any(r.id == a for r in self.sim.stores.durable.snapshot().attempts)

    def _dispatch(self, s: JobStep) -> Any:
        op = s.op
        if op == "crash":
            self.sim.crash(str(s.worker))
            self.loops.stop(str(s.worker))  # its handler threads die with the process
            return None
        if op == "loop-turn":
            self.loops.turn(str(s.worker))
            return True
        if op == "loop-reconcile":
            self.loops.reconcile(str(s.worker))
            return True
        if op == "loop-reconcile-crossed":
            self.loops.reconcile_crossed(str(s.worker), int(s.amount or 1))
            return True
        if op == "loop-handler":
            self.loops.handler_step(str(s.worker), self._attempt(s))
            return True
        if op == "loop-stop":
            self.loops.ask_stop(str(s.worker))
            return True
        if op in ("drop-link", "restore-link") and s.service is not None:
            self.loops.link_changed(str(s.worker), s.service)
        return dispatch(self.sim, s, self.submitted, self.submit)

    # -- the fair drain ---------------------------------------------------------------------
    def scripted(self, a: AttemptId) -> Outcome:
        outs = self.handlers.get(a.job) or (Outcome.SUCCESS,)
        return outs[min(a.token, len(outs)) - 1]

    def _drain_step(self, op: Callable[[], Any], label: str) -> str:
        before = self.chk.state
        self.pass_began = self.sim.clock.now()
        kind = self._checked(op, (), f"drain: {label}")
        if label == "reconcile" and "affirmations" in self.judging:
            miscounted = affirmation_problems(self, JobStep("reconcile"), self.last_result)
            if miscounted:
                raise JobRunFailure(f"ERROR affirmed: {miscounted[0]}", f"at step drain: {label}")
        if label == "reconcile" and "state" in self.judging:  # a fault-free pass
            stale = stale_marks(self)
            if stale:
                raise JobRunFailure(f"ERROR marks: {stale[0]}", f"after step drain: {label}")
        if label == "reconcile" and kind == "ok":
            self._judge_duties(before, f"drain: {label}")
        return kind

    def _judge_duties(
        self, before: State, label: str, duties: tuple[str, ...] = PASS_DUTIES
    ) -> None:
        """After a whole reconcile pass: none of the duties enabled when it began left
        enabled (``duties``)."""
        if "duties" not in self.judging:
            return
        left = duty_problems(self, before, duties)
        if left:
            raise JobRunFailure(f"ERROR duties: {left[0]}", f"after step {label}")

    def drain(self, rounds: int = DRAIN_ROUNDS) -> None:
        """The fault-free fair drain (module docstring); every step refinement-checked."""
        sim = self.sim
        cfg = self.config
        # The drain takes the incarnations over from their loops (their handler threads
        # end; the tick renews their heartbeats again) and drives them step by step.
        self.loops.close()
        for w in sorted(sim.workers):
            for svc in sorted(sim.workers[w].actor.links.down, key=lambda x: x.value):
                self._drain_step(partial(sim.restore_link, w, svc), "restore")
        for j in cfg.jobs:
            if j not in self.submitted:
                self._drain_step(partial(self.submit, j), f"submit {j}")
                self.submitted.add(j)
        if cfg.drain_worker not in sim.started:
            self._drain_step(partial(sim.start, cfg.drain_worker), "start")
        spare = sim.workers[cfg.drain_worker]
        # A killed incarnation is declared down once its heartbeat expired (the
        # reconcile pass): time must be let run that long before the drain gives up.
        jc = sim.config.jobs_config
        down_after = round(jc.down_after_s * 1000 / jc.tick_ms)
        delay = max((k.delay for k in self.kinds.values()), default=0)
        patience = max(cfg.lease_ticks, cfg.reservation_ticks, down_after, delay) + 2
        idle, seen = 0, -1
        for _ in range(rounds):
            if self.quiet():
                return
            # Stop early when nothing but time has happened for longer than any lease or
            # reservation can take to age out: the run is stuck (judge() says why).
            moved = sum(n for name, n in self.chk.actions.items() if name != "Tick")
            idle = idle + 1 if moved == seen else 0
            seen = moved
            if idle > patience:
                return
            self._drain_step(sim.reconciler.reconcile_once, "reconcile")
            if spare.up:
                for j in sorted(sim.stores.coordination.snapshot().queued):
                    self._drain_step(partial(spare.reserve, j), f"reserve {j}")
            for w in sorted(sim.workers):
                self._drain_worker(sim.workers[w])
            self._drain_step(sim.tick, "tick")

    def _drain_worker(self, wk: Worker) -> None:
        if not wk.up:
            return
        step = self._drain_step
        for j in sorted(wk.reservations):
            step(partial(wk.authorize, j), f"authorize {j}")
        for a in sorted(wk.attempts, key=lambda x: (x.job, x.token)):
            local = wk.attempts[a]
            if local.state == "authorized":
                step(partial(wk.activate, a), f"activate {a}")
            if local.state == "executing" and local.outcome_sent:
                # learn what became of the outcome in flight (the reconciler may have
                # processed it), then process it if it is still pending
                step(partial(wk.learn_outcome, a), f"learn {a}")
                if local.outcome_sent:
                    step(partial(wk.process_outcome, a), f"process {a}")
                    continue
            if local.state == "executing":
                step(partial(wk.cooperative_stop, a), f"stop {a}")
                if local.state != "executing":
                    continue
                mp = local.max_progress
                if local.progress < mp:
                    step(partial(wk.advance, a, mp, staged_bytes(a, mp)), f"advance {a}")
                step(partial(wk.send_outcome, a, self.scripted(a)), f"send {a}")
                step(partial(wk.process_outcome, a), f"process {a}")
            if local.state != "executing":
                step(partial(wk.record_stop, a), f"record stop {a}")
                step(partial(wk.release_lease, a), f"release lease {a}")

    # -- judgement ------------------------------------------------------------------------------
    def observable(self) -> dict[str, Any]:
        """What two configurations of the runtime (memory + SQLite, Redis + PostgreSQL)
        must agree on after every step: the spec state alpha gives, the coordination store
        (the mirror too: floors, cancel and down marks), the durable rows (reservation ids
        aside: each coordination store mints its own), the target's staging and the
        vault."""
        st = self.sim.stores
        c = st.coordination.snapshot()
        d = self.chk.durable_snapshot()  # read again only if the store changed since
        queues = sorted({k.queue for k in self.kinds.values()} | {DEFAULT_QUEUE})
        return {
            "spec state": self.chk.state,
            # the order each queue offers its jobs in (priority, then submission order)
            "ranks": {
                q: st.coordination.candidates(self.sim.env, len(self.config.jobs), None, (q,))
                for q in queues
            },
            "coordination": attrs.evolve(
                c,
                down=frozenset(),  # Redis's snapshot omits the down marks: audited raw
                reservations={
                    j: attrs.evolve(r, rid="") for j, r in sorted(c.reservations.items())
                },
            ),
            "durable": attrs.evolve(
                d, attempts=tuple(attrs.evolve(row, reservation="") for row in d.attempts)
            ),
            "target": self.chk.snapshot_of("target", st.target),
            "vault": self.chk.snapshot_of("vault", st.vault),
        }

    def quiet(self) -> bool:
        return not self.quiescence() and self.alpha_quiescent()

    def alpha_quiescent(self) -> bool:
        """``SystemQuiescent`` on alpha."""
        return bool(self.chk.model.SystemQuiescent(self.chk.state))

    def quiescence(self) -> list[str]:
        """What keeps the runtime from being quiescent (empty: quiescent)."""
        st = self.sim.stores
        d = st.durable.snapshot()
        c = st.coordination.snapshot()
        problems: list[str] = []
        jobs = {jr.id: jr for jr in d.jobs}
        for j in self.config.jobs:
            jr = jobs.get(j)
            if jr is None or not jr.phase.terminal:
                problems.append(f"{j} is {'unsubmitted' if jr is None else jr.phase.value}")
        for j in sorted(c.queued):
            problems.append(f"{j} is still queued")
        for j in sorted(c.reservations):
            problems.append(f"{j} is still reserved by {c.reservations[j].worker}")
        for a, lease in sorted(c.leases.items()):
            if lease.live:
                problems.append(f"the lease of {a} is live")
        for j in sorted(c.notices):
            problems.append(f"the cancel notice of {j} remains")
        for j in sorted(c.progress):
            problems.append(f"live progress of {j} remains")
        for w, wk in sorted(self.sim.workers.items()):
            for a, local in sorted(wk.attempts.items(), key=lambda x: str(x[0])):
                if wk.up and local.state in ("authorized", "executing"):
                    problems.append(f"{a} is still {local.state} at {w}")
        target = st.target.snapshot()
        for row in d.attempts:
            if row.pending is not None:
                problems.append(f"{row.id} has a pending outcome")
            info = target.get(row.id)
            if (
                not row.committed
                and not row.transferred
                and info is not None
                and not info.cleaned
                and (jobs[row.job].committed != row.token)
            ):
                winner = jobs[row.job]
                chain = self._chain(winner.id, winner.committed)
                if row.token not in chain:
                    problems.append(f"the staging of {row.id} is not cleaned")
        vault = st.vault.snapshot()
        for cred in d.credentials:
            secret = vault.get(cred_id(cred.job, cred.sequence), SecretState.ABSENT)
            if cred.state is CredentialState.COMMITTED:
                continue
            if cred.state in (CredentialState.ABANDONING, CredentialState.ABANDONED) and (
                secret is not SecretState.LIVE
            ):
                continue
            problems.append(
                f"credential {cred.job}/{cred.sequence} is {cred.state.value} "
                f"with secret {secret.value}"
            )
        return problems

    def _chain(self, job: str, token: int) -> list[int]:
        rows = {r.token: r for r in self.sim.stores.durable.snapshot().attempts if r.job == job}
        out = []
        while token and token not in out:
            out.append(token)
            row = rows.get(token)
            token = row.adopted_from if row is not None else 0
        return out

    def result_problems(self) -> list[str]:
        """Each committed result must be the winning attempt's staged output."""
        st = self.sim.stores
        problems = []
        for jr in st.durable.snapshot().jobs:
            if jr.phase is not Phase.SUCCEEDED:
                continue
            data = st.result(jr.id)
            chain = self._chain(jr.id, jr.committed)
            allowed = {staged_bytes(AttemptId(jr.id, t), jr.max_progress) for t in chain}
            if data not in allowed:
                problems.append(f"{jr.id} committed {data!r}, not the winner's {sorted(allowed)}")
        return problems

    def judge(self) -> None:
        """Raise the failure of a drained run that is not quiescent or committed wrong."""
        problems = self.quiescence()
        if problems:
            raise JobRunFailure(f"ERROR not-quiescent: {problems[0]}", "; ".join(problems))
        if not self.alpha_quiescent():
            raise JobRunFailure("ERROR not-quiescent: alpha is not SystemQuiescent")
        problems = drained_coordination_problems(self, "drained-coordination" in self.judging)
        if problems:
            raise JobRunFailure(f"ERROR not-quiescent: {problems[0]}", "; ".join(problems))
        if not self.contents and "contents" in self.judging:  # the services' stores: once
            problems = content_problems(self)
            if problems:
                raise JobRunFailure(f"ERROR state: {problems[0]}", "; ".join(problems))
        if self.readers is not None:
            problems = read_model_problems(self.readers, force=True)
            if problems:
                raise JobRunFailure(f"ERROR read-models: {problems[0]}", "; ".join(problems))
        bad = self.result_problems()
        if bad:
            raise JobRunFailure(f"ERROR result: {bad[0]}", "; ".join(bad))
        zombies = self.loops.unreaped()
        if zombies:
            raise JobRunFailure(f"ERROR processes: {zombies[0]}", "; ".join(zombies))


def dispatch(
    sim: Simulation, s: JobStep, submitted: set[str], submit: Callable[[str], None]
) -> Any:
    """Run one :class:`JobStep` on ``sim`` (the machines', the replay's and the parallel
    runs' one executor of a step); ``submitted``: the jobs submitted so far (updated),
    ``submit``: how a job is submitted.  A step the runtime refuses raises or returns a
    refusal (:func:`classify`)."""
    r = sim.reconciler
    op, j = s.op, str(s.job)
    if op == "submit":
        if j in submitted:
            raise NotEnabled(f"{j} was submitted")
        submit(j)
        submitted.add(j)
        return True
    if op == "cancel":
        return sim.cancel(j)
    if op == "start":
        return sim.start(str(s.worker))
    if op == "crash":
        return sim.crash(str(s.worker))
    if op == "shutdown":
        return sim.shutdown(str(s.worker))
    if op == "drop-link":
        assert s.service is not None
        return sim.drop_link(str(s.worker), s.service)
    if op == "restore-link":
        assert s.service is not None
        return sim.restore_link(str(s.worker), s.service)
    if op == "wipe":
        return sim.wipe()
    if op == "tick":
        return sim.tick()
    if op == "reconcile":
        return r.reconcile_once()
    if op == "declare-down":
        return r.declare_down(str(s.worker))
    per_job: dict[str, Callable[[str], Any]] = {
        "enqueue": r.enqueue,
        "publish-cancel-notice": r.publish_cancel_notice,
        "clean-terminal": r.clean_terminal,
        "clear-stale-progress": r.clear_stale_progress,
        "reconciler-release-reservation": r.release_reservation,
        "expire-reservation": r.expire_reservation,
        "schedule-retry": r.schedule_retry,
        "finalize-cancel": r.finalize_cancel,
        "invalidate-checkpoint": r.invalidate_checkpoint,
    }
    if op in per_job:
        if j not in submitted:
            raise NotEnabled(f"{j} is not submitted")
        return per_job[op](j)
    a = AttemptId(str(s.job), int(s.token or 0))
    per_attempt: dict[str, Callable[[AttemptId], Any]] = {
        "expire-lease": r.expire_lease,
        "reap": r.reap,
        "cleanup-stage": r.cleanup_stage,
        "reconciler-process-outcome": r.process_outcome,
        "reconciler-release-lease": r.release_lease,
    }
    if op in per_attempt:
        # The reconciler only ever addresses attempts it read from the durable store.
        if not any(row.id == a for row in r.stores.durable.snapshot().attempts):
            raise NotEnabled(f"{a} does not exist")
        return per_attempt[op](a)
    wk = sim.workers[str(s.worker)]
    if op == "reserve":
        rid = wk.reserve(j)
        return rid if rid is not None else False  # refused
    if op == "authorize":
        return wk.authorize(j)
    if op == "release-reservation":
        return wk.release_reservation(j)
    if a not in wk.attempts:
        raise NotEnabled(f"{wk.id} does not run {a}")
    if op == "advance":
        return wk.advance(a, int(s.amount or 0), staged_bytes(a, int(s.amount or 0)))
    if op == "send-outcome":
        assert s.outcome is not None
        return wk.send_outcome(a, s.outcome)
    if op == "complete":
        assert s.outcome is not None
        return wk.complete(a, s.outcome)
    if op == "put-secret":
        wk._executing(a)  # the handler runs: only an executing attempt writes secrets
        return write_credential(wk.stores, wk.actor, a, secret_bytes(a))
    simple: dict[str, Callable[[AttemptId], Any]] = {
        "activate": wk.activate,
        "renew": wk.renew,
        "report-progress": wk.report_progress,
        "checkpoint": wk.checkpoint,
        "process-outcome": wk.process_outcome,
        "cooperative-stop": wk.cooperative_stop,
        "record-stop": wk.record_stop,
        "release-lease": wk.release_lease,
    }
    return simple[op](a)


def cred_id(job: str, sequence: int) -> Any:
    from remora.jobs.model import IntentId

    return IntentId(job, sequence)


@attrs.frozen
class Replayed:
    """What replaying a trace found: the failure string (None: it passed)."""

    failure: str | None
    detail: str
    steps: int
    actions: dict[str, int]


def run_trace(trace: JobTrace) -> Replayed:
    """Replay ``trace`` through :class:`JobRun` (with its planted mutation, if any)."""
    run = JobRun(trace.config, trace.handlers, kinds=trace.kinds)
    try:
        for step in trace.steps:
            run.execute(step)
        if trace.drain:
            run.drain()
            run.judge()
    except JobRunFailure as exc:
        return Replayed(exc.failure, exc.detail, len(run.steps), dict(run.chk.actions))
    finally:
        run.close()  # the loops' handler threads end with the replay
    return Replayed(None, "", len(run.steps), dict(run.chk.actions))


__all__ = [
    "JUDGED_REFUSALS",
    "REFUSAL_REASONS",
    "JobRun",
    "JobRunFailure",
    "Replayed",
    "classify",
    "run_trace",
    "secret_bytes",
    "staged_bytes",
]
