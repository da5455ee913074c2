"""The deterministic scheduler: explicit steps through the real :class:`Lifecycle`.

One :class:`Simulation` runs one schedule.  Each top-level step is an *attempt* executed
through the production lifecycle on memory I/O and a logical clock; the simulation's
:class:`SimHook` is the fault hook of both the store and the source, so it

* numbers the calls of each operation within the attempt (numbering resets per attempt) and
  applies the step's fault selectors — unselected calls commit, unused selectors stay in the
  attempt report without counting as exercised;
* spends ``delay_ms`` on the logical clock;
* runs interleaves at the boundary before or after the atomic effect: ``stop`` cancels the
  original lifetime (only cancels: the call unwinds and is resolved before any later
  top-level cleanup), ``replacement: N`` starts fresh lifetime N without faults, assigns the
  same partition and seeks the durable frontier before the original call resumes;
* records an event for every modeled I/O return (replacement I/O inside the original
  attempt), and checks safety at every I/O return, interleave, retry wait and attempt end.

The simulation steps; it does not judge.  Every check — the oracle, the ownership model, the
view, the status rules — is the :class:`~remora.sim.checker.Checker`'s, which reads the store
through the :class:`~remora.store.Backend` reads every store has.

The same class serves the CLI, replay and the Hypothesis state machines, so an exported
trace replays through exactly the code that found it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from remora.clock import LogicalClock
from remora.context import Context
from remora.delivery import MemoryView, Relay
from remora.domain import AMENDMENTS, Processing, SourceRecord
from remora.errors import (
    Canceled,
    DeadlineExceeded,
    Fenced,
    InvalidInput,
    LifetimeRetired,
    RemoraError,
    RetriesExhausted,
    SourceError,
    UnresolvedRead,
    Unseeked,
)
from remora.faults import COMMIT, At, FaultDecision, IOCall, IOReport, Operation
from remora.oracle import AMENDMENT_RULES, Model, Violation
from remora.sim.checker import Checker, Holding, failure
from remora.sim.rules import After, Before, Call, check_budget, check_call, check_method
from remora.sim.trace import FaultSelector, SimConfig, Step
from remora.source import FetchCursors, MemorySourceLog
from remora.store import MemoryStore, StateStore, Token
from remora.store.memory import Write
from remora.worker import Lifecycle, RetryPolicy

StoreFactory = Callable[[SimConfig], StateStore]
LifecycleFactory = Callable[..., Lifecycle]
OnProgress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: a run's steps, then its drained records."""


@attrs.frozen
class Event:
    """One modeled I/O call, as it returned."""

    attempt: int
    lifetime: int
    partition: int
    operation: str
    call: int
    outcome: str
    selected_fault: bool
    effect_applied: bool | None
    observation: str
    time_ms: int
    epoch: int
    frontier: int
    replacement: bool

    def to_json(self) -> dict[str, Any]:
        # Every field is a scalar: the same dict as ``attrs.asdict`` (field order kept),
        # without its generic per-field recursion — one event per I/O call of a replay.
        return {
            "attempt": self.attempt,
            "lifetime": self.lifetime,
            "partition": self.partition,
            "operation": self.operation,
            "call": self.call,
            "outcome": self.outcome,
            "selected_fault": self.selected_fault,
            "effect_applied": self.effect_applied,
            "observation": self.observation,
            "time_ms": self.time_ms,
            "epoch": self.epoch,
            "frontier": self.frontier,
            "replacement": self.replacement,
        }


@attrs.define
class Attempt:
    index: int
    step: Step
    fair_recovery: bool
    result: str = "ok"
    error: str | None = None
    used_selectors: int = 0
    waits_ms: list[int] = attrs.field(factory=list)
    interleaves: list[str] = attrs.field(factory=list)
    interleave_kinds: list[tuple[str, str]] = attrs.field(factory=list)  # (at, what)
    first_event: int = 0
    last_event: int = 0
    started_ms: int = 0
    ended_ms: int = 0


@attrs.frozen
class RecordedViolation:
    kind: str
    partition: int | None
    message: str
    attempt: int
    where: str

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class Worker:
    lifetime: int
    lifecycle: Lifecycle
    cursors: FetchCursors
    replacement: bool
    stopped: bool = False
    retired: bool = False
    assigned: set[int] = attrs.field(factory=set)

    def state(self) -> str:
        return "stopped" if self.stopped else "retired" if self.retired else "live"


@attrs.define
class _Frame:
    call: IOCall
    lifetime: int
    number: int
    selector: FaultSelector | None
    held: Token | None
    replacement: bool
    interleaved: bool = False
    at_effect: Token | None = None
    started_ms: int = 0
    log_before: int | None = None  # the write log's length just before the effect ...
    log_after: int | None = None  # ... and just after it (interleaves excluded)


class SimClock(LogicalClock):
    """The simulation's logical clock: every wait through it is reported to ``on_sleep``
    (in milliseconds) after the time has passed, so the scheduler records and checks it."""

    def __init__(self, on_sleep: Callable[[int], None]) -> None:
        super().__init__()
        self.on_sleep = on_sleep

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        full = super().sleep(seconds, wake)
        self.on_sleep(round(seconds * 1000))
        return full


class SimMutex:
    """A lifetime's mutex on the simulation's clock, in place of its ``threading.Lock``.

    The simulation is one thread, so a concurrent holder is modeled, not run: a step with
    ``mutex_held_ms`` finds the mutex held by another call of the same lifetime until that
    much logical time has passed (:meth:`hold`).  ``acquire`` then waits on the clock —
    until the holder lets go, or as long as its timeout allows, whichever is first — and
    reports it the way ``threading.Lock.acquire`` does.  The wait is not a retry wait (it
    is not reported to the scheduler's ``on_sleep``); the budget timers it passes fire."""

    def __init__(self, clock: LogicalClock) -> None:
        self.clock = clock
        self.held_until = 0  # logical ms until which the modeled concurrent call holds it
        self._locked = False

    def hold(self, ms: int) -> None:
        self.held_until = self.clock.ms + ms

    def locked(self) -> bool:
        return self._locked or self.held_until > self.clock.ms

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._locked:  # one thread: a second acquire would wait forever
            raise RuntimeError("the lifetime's mutex was acquired again while held")
        wait = self.held_until - self.clock.ms
        if wait > 0:
            if not blocking:
                return False
            if timeout >= 0 and round(timeout * 1000) < wait:
                self.clock.advance(round(timeout * 1000))
                return False
            self.clock.advance(wait)
        self.held_until = 0
        self._locked = True
        return True

    def release(self) -> None:
        if not self._locked:
            raise RuntimeError("release of an unlocked mutex")
        self._locked = False

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class SimHook:
    """The simulation's fault hook (see the module docstring)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.frames: list[_Frame] = []

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        sim = self.sim
        lifetime = sim.caller
        worker = sim.workers[lifetime]
        checker = sim.checker
        state = worker.state()
        sim.record(
            checker.check_caller(lifetime, state, call.operation.value, call.partition), "decide"
        )
        replacement = lifetime != sim.attempt.step.worker
        counts = sim.replacement_counts if replacement else sim.call_counts
        operation = Operation(call.operation.value)  # the lifecycle's seam: its own operations
        number = counts.get(operation, 0) + 1
        counts[operation] = number
        selector = None if replacement else sim.selector_for(operation, number)
        held = worker.lifecycle.owned().get(call.partition)
        record = sim.records.get(lifetime)
        if operation is Operation.PROCESS and held is not None and record is not None:
            installed = sim.installed(call.partition)
            found = checker.check_submission(
                lifetime, call.partition, held, record.offset, installed
            )
            sim.record(found, "decide")
        self.frames.append(
            _Frame(call, lifetime, number, selector, held, replacement, started_ms=sim.clock.ms)
        )
        if selector is None:
            return COMMIT
        sim.attempt.used_selectors += 1
        if selector.delay_ms:
            sim.clock.advance(selector.delay_ms)
        return FaultDecision(selector.outcome, selector.delay_ms, selected=True)

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None:
        frame = self.frames[-1]
        sel = frame.selector
        il = None if sel is None else sel.interleave
        log = self.sim.write_log
        if at is At.AFTER and log is not None:
            frame.log_after = len(log)
        if sel is not None and il is not None and il.at is at and not frame.interleaved:
            frame.interleaved = True
            self.sim.interleave(frame, sel)
        if at is At.BEFORE:
            frame.at_effect = self.sim.installed(call.partition)
            if log is not None:
                frame.log_before = len(log)

    def returned(self, call: IOCall, report: IOReport) -> None:
        frame = self.frames.pop()
        self.sim.io_returned(frame, report)


class Simulation:
    """One deterministic run (see the module docstring)."""

    label = "production-worker-lifecycle; memory I/O and logical time"

    def __init__(
        self,
        config: SimConfig,
        source: Sequence[SourceRecord],
        *,
        reserved: Iterable[int] = (),
        store_factory: StoreFactory | None = None,
        lifecycle_factory: LifecycleFactory = Lifecycle,
        processing: Processing = AMENDMENTS,
        model: Model = AMENDMENT_RULES,
        rules: bool = True,
    ) -> None:
        self.config = config
        self.rules = rules  # check each attempt's postconditions (remora.sim.rules)
        self.source = tuple(source)
        self.partitions = tuple(range(config.partitions))
        self.clock = SimClock(self.waited)
        self.hook = SimHook(self)
        self.store = store_factory(config) if store_factory else MemoryStore(processing=processing)
        if getattr(self.store.backend, "processing", processing) is not processing:
            raise InvalidInput("the store factory's stores run another processing")
        self.store.hook = self.hook
        self.log = MemorySourceLog(self.source, self.partitions, hook=self.hook)
        self.checker = Checker(self.source, self.partitions, model)
        self.view = MemoryView()
        self.lifecycle_factory = lifecycle_factory
        self.retry = RetryPolicy(
            config.retry_max_calls, tuple(w / 1000 for w in config.retry_waits_ms)
        )
        self.workers: dict[int, Worker] = {}
        self.reserved: set[int] = set(reserved)
        self.attempts: list[Attempt] = []
        self.events: list[Event] = []
        self.calls: list[Call] = []  # beside ``events``: what the postconditions read
        self.write_log: list[Write] | None = getattr(self.store.backend, "write_log", None)
        self.violations: list[RecordedViolation] = []
        self.call_counts: dict[Operation, int] = {}
        self.replacement_counts: dict[Operation, int] = {}
        self._callers: list[int] = []
        self.records: dict[int, SourceRecord] = {}  # the record each lifetime is processing
        self._attempt: Attempt | None = None
        self.draining = False
        self.drained = False
        self.before_drain: dict[str, Any] | None = None
        self.progress: OnProgress | None = None

    # -- plumbing used by the hook ----------------------------------------------------
    @property
    def attempt(self) -> Attempt:
        assert self._attempt is not None, "I/O outside an attempt"
        return self._attempt

    @property
    def caller(self) -> int:
        return self._callers[-1]

    def selector_for(self, operation: Operation, number: int) -> FaultSelector | None:
        for sel in self.attempt.step.faults:
            if sel.operation is operation and sel.call == number:
                return sel
        return None

    def installed(self, partition: int) -> Token:
        row = self.store.backend.partition_row(partition)
        return Token(row.epoch, row.frontier)

    def waited(self, ms: int) -> None:
        self.attempt.waits_ms.append(ms)
        self.check_all("retry-wait")

    def interleave(self, frame: _Frame, sel: FaultSelector) -> None:
        il = sel.interleave
        assert il is not None
        self.check_all("interleave")
        original = self.workers[frame.lifetime]
        what = []
        if il.stop:
            original.lifecycle.stop()
            original.stopped = True
            what.append("stop")
        if il.replacement is not None:
            self._replace(il.replacement, frame.call.partition)
            what.append(f"replacement {il.replacement}")
        self.attempt.interleaves.append(
            f"{sel.operation.value} call {sel.call} {il.at.value}: {', '.join(what)}"
        )
        kind = "stop+replacement" if len(what) == 2 else ("stop" if il.stop else "replacement")
        self.attempt.interleave_kinds.append((il.at.value, kind))
        self.check_all("interleave")

    def _replace(self, lifetime: int, partition: int) -> None:
        if lifetime in self.workers:
            raise InvalidInput(f"replacement lifetime {lifetime} was already started")
        worker = self._new_worker(lifetime, replacement=True)
        self._callers.append(lifetime)
        try:
            worker.lifecycle.assign([partition])
            worker.assigned.add(partition)
            worker.cursors.seek(partition, worker.lifecycle.seek(partition))
        except RemoraError as exc:
            worker.retired = True
            worker.assigned.clear()
            self.attempt.interleaves.append(f"replacement {lifetime} failed: {_describe(exc)}")
        finally:
            self._callers.pop()

    def io_returned(self, frame: _Frame, report: IOReport) -> None:
        p = frame.call.partition
        now = self.installed(p)
        if frame.call.operation is Operation.PROCESS and report.effect_applied:
            found = self.checker.check_commit(frame.lifetime, p, frame.held, frame.at_effect)
            self.record(found, "io-return")
        self.events.append(
            Event(
                attempt=self.attempt.index,
                lifetime=frame.lifetime,
                partition=p,
                operation=frame.call.operation.value,
                call=frame.number,
                outcome=report.decision.outcome.value,
                selected_fault=report.decision.selected,
                effect_applied=report.effect_applied,
                observation=report.observation.value,
                time_ms=self.clock.ms,
                epoch=now.epoch,
                frontier=now.frontier,
                replacement=frame.replacement,
            )
        )
        self.calls.append(self._call_of(frame, report))
        self.check_partition(p, "io-return")

    def _call_of(self, frame: _Frame, report: IOReport) -> Call:
        writes: tuple[Write, ...] | None = None
        if self.write_log is not None:
            start, end = frame.log_before, frame.log_after
            writes = () if start is None or end is None else tuple(self.write_log[start:end])
        sel, il = frame.selector, None if frame.selector is None else frame.selector.interleave
        rid = None if il is None else il.replacement
        return Call(
            lifetime=frame.lifetime,
            partition=frame.call.partition,
            operation=frame.call.operation.value,
            outcome=report.decision.outcome.value,
            selected=report.decision.selected,
            applied=report.effect_applied,
            observation=report.observation.value,
            writes=writes,
            elapsed_ms=self.clock.ms - frame.started_ms,
            started_ms=frame.started_ms,
            delay_ms=0 if sel is None else sel.delay_ms,
            at=None if il is None or not frame.interleaved else il.at.value,
            stop=il is not None and il.stop,
            replacement=rid,
            replacement_started=rid is not None
            and rid in self.workers
            and not self.workers[rid].retired,
        )

    # -- safety: recorded here, judged by the checker -----------------------------------
    def violation(self, kind: str, partition: int | None, message: str, where: str) -> None:
        index = self._attempt.index if self._attempt is not None else -1
        self.violations.append(RecordedViolation(kind, partition, message, index, where))

    def record(self, found: Sequence[Violation], where: str) -> None:
        for v in found:
            self.violation(v.kind, v.partition, v.message, where)

    def check_partition(self, partition: int, where: str) -> None:
        self.record(self.checker.follow_store(self.store.backend, (partition,)), where)

    def check_all(self, where: str) -> None:
        self.record(self.checker.follow_store(self.store.backend, self.partitions), where)

    def verify(self, where: str) -> None:
        """A whole look at every partition (the end of a run: what incremental looks cannot
        see, a row changed in place, is found here)."""
        self.record(self.checker.verify_store(self.store.backend, self.partitions), where)

    def check_model(self) -> None:
        """Lifecycle state against the model of what each lifetime may hold."""
        holdings = [
            Holding(lifetime, owned, w.state(), frozenset(w.assigned))
            for lifetime, w in sorted(self.workers.items())
            if (owned := w.lifecycle.owned())  # holding nothing is always allowed
        ]
        self.record(self.checker.check_ownership(holdings, self.installed), "attempt-end")

    # -- steps ------------------------------------------------------------------------
    def reserve(self, lifetime: int) -> None:
        self.reserved.add(lifetime)

    def next_lifetime(self) -> int:
        used = set(self.workers) | self.reserved
        return max(used) + 1 if used else 0

    def _new_worker(self, lifetime: int, replacement: bool) -> Worker:
        lifecycle = self.lifecycle_factory(
            self.store,
            self.log,
            clock=self.clock,
            retry=self.retry,
            budget=self.config.budget_ms / 1000,
            name=f"lifetime {lifetime}",
        )
        # the mutex on the logical clock (a step may find it held: ``Step.mutex_held_ms``)
        lifecycle._mutex = SimMutex(self.clock)  # type: ignore[assignment]
        worker = Worker(
            lifecycle=lifecycle,
            lifetime=lifetime,
            cursors=FetchCursors(self.log),
            replacement=replacement,
        )
        self.workers[lifetime] = worker
        return worker

    def execute(self, step: Step) -> Attempt:
        """Run one top-level step as an attempt; returns its record."""
        attempt = Attempt(
            len(self.attempts),
            step,
            self.draining,
            first_event=len(self.events),
            started_ms=self.clock.ms,
        )
        self.attempts.append(attempt)
        self._attempt = attempt
        self.call_counts.clear()
        self.replacement_counts.clear()
        self._callers.append(step.worker)
        before = self.workers.get(step.worker)
        was_live = before is not None and before.state() == "live"
        held = None
        if before is not None and step.partition is not None:
            held = before.lifecycle.owned().get(step.partition)
        first_call = len(self.calls)
        record_offset = None
        mutex = None if before is None else before.lifecycle._mutex
        if step.mutex_held_ms and isinstance(mutex, SimMutex):
            mutex.hold(step.mutex_held_ms)
        try:
            attempt.result = self._act(step)
        except RemoraError as exc:
            attempt.result = _classify(exc)
            attempt.error = _describe(exc)
            worker = self.workers.get(step.worker)
            if worker is not None and not isinstance(exc, LifetimeRetired):
                worker.retired = True
                worker.assigned.clear()
        except Exception as exc:  # an internal failure is a finding, not a crash
            attempt.result = "exception"
            attempt.error = _describe(exc)
            self.violation("exception", step.partition, attempt.error, "attempt")
        finally:
            self._callers.pop()
            self.hook.frames.clear()
            attempt.last_event = len(self.events)
            attempt.ended_ms = self.clock.ms
            if isinstance(mutex, SimMutex):
                mutex.held_until = 0  # the concurrent holder is modeled within its step
            record = self.records.pop(step.worker, None)
            record_offset = None if record is None else record.offset
        try:
            if before is not None and not was_live:
                found = self.checker.check_rejected(
                    step.worker, step.actor, step.partition, attempt.result
                )
                self.record(found, "attempt-end")
            self.check_all("attempt-end")
            self.check_model()
            if self.rules and before is not None:
                self.check_rules(attempt, Before(was_live, held, record_offset), first_call)
        except Exception as exc:  # the store's reads broke: a finding, not a crash
            self.violation("exception", step.partition, _describe(exc), "attempt-end")
        finally:
            self._attempt = None
        return attempt

    def _act(self, step: Step) -> str:
        if step.actor == "start":
            if step.worker in self.workers:
                raise InvalidInput(f"lifetime {step.worker} was already started")
            self._new_worker(step.worker, replacement=False)
            return "ok"
        worker = self.workers.get(step.worker)
        if worker is None:
            return "unstarted"
        lifecycle = worker.lifecycle
        if step.actor == "revoke":
            lifecycle.revoke()
            worker.cursors.clear()
            worker.assigned.clear()
            return "ok"
        if step.actor == "stop":
            lifecycle.stop()
            worker.stopped = True
            lifecycle.revoke()
            worker.cursors.clear()
            worker.assigned.clear()
            return "ok"
        p = step.partition
        assert p is not None
        if step.actor == "assign":
            lifecycle.assign([p])
            worker.assigned.add(p)
            return "ok"
        if step.actor == "seek":
            worker.cursors.seek(p, lifecycle.seek(p))
            return "ok"
        try:
            record = worker.cursors.fetch(p)
        except Unseeked:
            return "unseeked"
        if record is None:
            return "idle"
        self.records[step.worker] = record
        lifecycle.process(p, record)
        return "ok"

    def check_rules(self, attempt: Attempt, before: Before, first_call: int) -> None:
        """The attempt against the method and fault-boundary tables (:mod:`remora.sim.rules`)."""
        step = attempt.step
        worker = self.workers[step.worker]
        p = step.partition
        after = After(
            worker.lifecycle.owned(),
            worker.lifecycle.stopped,
            None if p is None else worker.cursors.position(p),
            # the store's row, for the spurious-fence rule only (a read per attempt otherwise)
            self.installed(p) if p is not None and attempt.result == "fenced" else None,
        )
        own = [c for c in self.calls[first_call:] if c.lifetime == step.worker]
        found = check_method(
            step.actor,
            p,
            attempt.result,
            own,
            before,
            after,
            attempt.waits_ms,
            [round(w * 1000) for w in self.retry.waits],
        )
        for call in own:
            found += check_call(call, attempt.result, after, step.actor)
        found += check_budget(
            step.actor,
            p,
            attempt.result,
            own,
            attempt.started_ms,
            attempt.ended_ms,
            self.config.budget_ms,
            step.mutex_held_ms,
        )
        self.record(found, "attempt-end")

    # -- drain and boundary -------------------------------------------------------------
    def drain(self) -> None:
        """Fair recovery: stop old lifetimes, start a fresh one, assign and seek every
        partition, process to the end without faults, then drain delivery.

        An exception the system under test raises here (a store read, the relay's
        ``DeliveryGap``, ...) is recorded as an ``exception`` violation — the run ends
        ``ERROR exception`` with a report and a replayable trace — never propagated."""
        self.draining = True
        try:
            self.before_drain = self.summary()
            self._drain()
        except Exception as exc:
            self._attempt = None
            self.violation("exception", None, f"during the drain: {_describe(exc)}", "drain")
        finally:
            self.draining = False
            self.drained = True

    def _drain(self) -> None:
        for lifetime in sorted(self.workers):
            if not self.workers[lifetime].stopped:
                self.execute(Step("stop", lifetime))
        fresh = self.next_lifetime()
        self.execute(Step("start", fresh))
        for p in self.partitions:
            for actor in ("assign", "seek"):
                a = self.execute(Step(actor, fresh, p))
                if a.result != "ok":
                    self.violation("drain-failed", p, f"recovery {actor}: {a.error}", "drain")
        oracle = self.checker.oracle
        left = sum(
            oracle.visible_count(p) - oracle.processed_count(p, self.installed(p).frontier)
            for p in self.partitions
        )
        drained = 0
        for p in self.partitions:
            if self.workers[fresh].retired:
                break
            while True:
                before = self.installed(p).frontier
                a = self.execute(Step("process", fresh, p))
                if self.progress is not None:
                    drained += 1
                    self.progress("drain", min(drained, left), left)
                if a.result == "idle":
                    break
                if a.result != "ok" or self.installed(p).frontier <= before:
                    self.violation(
                        "drain-no-progress",
                        p,
                        f"recovery process attempt {a.index} ({a.result}) did not advance "
                        f"the durable frontier from {before}",
                        "drain",
                    )
                    break
        Relay(self.store.backend, self.view).deliver(self.partitions)
        frontiers = {p: self.installed(p).frontier for p in self.partitions}
        self.record(self.checker.check_view(self.view, frontiers), "drain")
        if not self.violations:
            self.verify("drain")

    def summary(self) -> dict[str, Any]:
        """Status, per-partition boundary and diagnostics of the current state."""
        return self.checker.summary(
            self.store.backend, self.view, self.partitions, bool(self.violations)
        )

    def failure(self, status: str) -> str | None:
        """The stable failure string of a non-PASS status (what the reducer preserves)."""
        return failure(status, self.violations[0].kind if self.violations else None)


def _classify(exc: RemoraError) -> str:
    for kind, name in (
        (LifetimeRetired, "retired"),
        (Fenced, "fenced"),
        (RetriesExhausted, "exhausted"),
        (UnresolvedRead, "unresolved"),
        (DeadlineExceeded, "deadline"),
        (Canceled, "canceled"),
        (InvalidInput, "invalid"),
        (SourceError, "source-error"),
    ):
        if isinstance(exc, kind):
            return name
    return "error"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


__all__ = [
    "StoreFactory",
    "LifecycleFactory",
    "OnProgress",
    "Event",
    "Attempt",
    "RecordedViolation",
    "Worker",
    "SimClock",
    "SimMutex",
    "SimHook",
    "Simulation",
]
