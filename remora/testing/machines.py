"""Hypothesis state machines over the real lifecycle.

:class:`WorkerScheduleMachine` is a :class:`~hypothesis.stateful.RuleBasedStateMachine`
whose rules are the scheduler's actors — ``start``, ``assign``, ``seek``, ``process``,
``revoke``, ``stop`` — plus faulted variants of the I/O actors that carry fault selectors and
interleaves (stop and/or a replacement lifetime).  Every rule executes one step through the
same :class:`~remora.sim.scheduler.Simulation` that ``remora sim-worker`` uses, so:

* safety is judged by the simulation's :class:`~remora.sim.checker.Checker` (the
  independent oracle, the ownership model, the view and status rules) at every modeled I/O
  return, interleave, retry wait and attempt end; the machine's invariant fails on the first
  violation;
* teardown runs the fault-free fair drain and requires the final status to be exactly what
  the oracle predicts from the source alone (``PASS``, ``PASS_WITH_EXCLUSIONS`` or
  ``BLOCKED``) — never ``ERROR`` or ``INCOMPLETE``;
* a failing run writes its steps as a ``worker-schedule-v1`` trace, atomically, to
  ``artifacts/failures/hypothesis-<Machine>.json`` (or ``$REMORA_ARTIFACT_DIR``); every
  failing example overwrites it, so the final shrunk example's trace is the one that
  remains, and the failure names the ``remora sim-worker --replay`` command.

Lifetimes flow through three bundles of ``(lifetime, partition)`` handles, so that the
natural chain assign -> seek -> process is likely without preconditions: ``lifetimes``
(started), ``owners`` (an assignment succeeded) and ``readers`` (a seek succeeded, or a
replacement lifetime that started).  Handles stay in their bundles after a stop, a revoke
or a fence, so late callbacks to invalidated lifetimes are exercised too; ``out_of_order``
sends seek and process callbacks to lifetimes that never assigned or seeked.

Subclass it to change the shape of the runs (see ``docs/stateful.md``)::

    class MyMachine(WorkerScheduleMachine):
        partitions = 2
        classes = ("conflict",)

    TestMyMachine = MyMachine.TestCase
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, NoReturn

import attrs
from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument, InvalidDefinition
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    Rule,
    RuleBasedStateMachine,
    RuleStrategy,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from remora.domain import AMENDMENTS, Processing, SourceRecord
from remora.faults import At, Operation, Outcome
from remora.oracle import AMENDMENT_RULES, Model, ReferenceModel
from remora.outputs import write_output
from remora.sim.artifacts import failures_dir, replay_command, show_command
from remora.sim.report import build_report
from remora.sim.runs import processing_reference, reference_of
from remora.sim.scheduler import Attempt, LifecycleFactory, Simulation, StoreFactory
from remora.sim.trace import Actor, SimConfig, Step, Trace, current_toolchain
from remora.testing.strategies import (
    COMBINATIONS,
    PRIMARY_OPERATION,
    Combination,
    SelectorDraft,
    selector_drafts,
    source_histories,
)
from remora.worker import Lifecycle

MUTEX_HOLDS = ((1, 2, 0), (1, 1, -50), (1, 1, 1))
"""How long the ``contended`` rule's concurrent call holds the mutex: budget x a / b + c ms
— half the budget, 50 ms short of it (with an abort: its retry wait crosses the rest) and
1 ms past it."""
MAX_PARTITIONS = 8
partition_indexes = st.integers(0, MAX_PARTITIONS - 1)
maybe_partition = st.integers(0, MAX_PARTITIONS).map(lambda i: None if i == 0 else i - 1)
"""None (the handle's own partition) or another partition index, as one integer draw (a
``none() | integers()`` costs a branch choice and a span more)."""


@attrs.frozen(repr=False)
class Handle:
    """A lifetime and the partition a rule will address (printed as ``Handle(3, 0)``)."""

    lifetime: int
    partition: int
    sim: Simulation = attrs.field(eq=False)

    def __repr__(self) -> str:
        return f"Handle({self.lifetime}, {self.partition})"

    def live(self) -> bool:
        """The lifetime exists and was neither stopped nor retired (as far as the model
        knows: a lifetime fenced by a newer epoch stays live until it tries I/O)."""
        worker = self.sim.workers.get(self.lifetime)
        return worker is not None and not (worker.stopped or worker.retired)

    def current_reader(self) -> bool:
        """The lifetime is live, holds the partition's installed epoch and has a cursor."""
        worker = self.sim.workers.get(self.lifetime)
        if worker is None or worker.stopped or worker.retired:
            return False
        token = worker.lifecycle.owned().get(self.partition)
        return (
            token is not None
            and token.epoch == self.sim.installed(self.partition).epoch
            and worker.cursors.position(self.partition) is not None
        )


def _final_run() -> bool:
    """True outside Hypothesis, or on the final replay of the minimal failing example."""
    try:
        return bool(current_build_context().is_final)
    except InvalidArgument:
        return True


class SwarmRules(RuleStrategy):
    """Chooses each step's rule with *one* integer draw, among the rules that are enabled
    for this run and valid now.

    Hypothesis's own choice rejection-samples: an integer per tried rule, plus a boolean
    (the rule's swarm feature flag, re-drawn at every check) per valid one, and when three
    tries miss it walks the list drawing a flag per rule.  With fifteen rules, half of them
    switched off by swarm testing and several behind preconditions or empty bundles, that
    was about six choices per step — most of the machines' generation time.  Here the
    swarm is drawn once per run (a disabling probability, then one flag per rule, every
    rule enabled when all would be off), and a step draws an index over all rules: that
    rule when it is enabled and valid, else the candidate at the index modulo their number
    (so a step keeps its rule while shrinking removes steps before it, as far as it can).
    Everything shrinks toward "every rule enabled" and toward the first rule."""

    def __init__(self, machine: RuleBasedStateMachine) -> None:
        super().__init__(machine)
        self._swarm: tuple[bool, ...] | None = None  # per rule: enabled in this run
        # per rule: the names of the bundles it draws from, then its preconditions
        self._needs: dict[str, tuple[Any, ...]] = {
            r.function.__name__: (*(b.name for b in r.bundles), *r.preconditions)
            for r in self.rules
        }

    def _draw_swarm(self, data: ConjectureData) -> tuple[bool, ...]:
        p_disabled = data.draw_integer(0, 254) / 255
        enabled = tuple(not data.draw_boolean(p_disabled) for _ in self.rules)
        return enabled if any(enabled) else (True,) * len(enabled)

    def do_draw(self, data: ConjectureData) -> tuple[Rule, dict[str, Any]]:
        if self._swarm is None:
            self._swarm = self._draw_swarm(data)
        swarm, rules, machine = self._swarm, self.rules, self.machine
        known: dict[object, bool] = {}  # bundle name / precondition -> holds, this step

        def valid(rule: Rule) -> bool:
            # Hypothesis's is_valid without its observability bookkeeping (which formats a
            # description of every precondition on every call); each bundle and each
            # precondition (several rules share one) is asked at most once per step.
            for need in self._needs[rule.function.__name__]:
                holds = known.get(need)
                if holds is None:
                    holds = known[need] = bool(
                        machine.bundle(need) if isinstance(need, str) else need(machine)
                    )
                if not holds:
                    return False
            return True

        i = data.draw_integer(0, len(rules) - 1)
        rule = rules[i]
        if not (swarm[i] and valid(rule)):
            candidates = [r for r, on in zip(rules, swarm, strict=True) if on and valid(r)]
            candidates = candidates or [r for r in rules if valid(r)]
            if not candidates:
                names = ", ".join(r.function.__name__ for r in rules)
                raise InvalidDefinition(
                    f"No progress can be made from state {machine!r}: no rule has a true "
                    f"precondition and non-empty bundles (rules: {names})"
                )
            rule = candidates[i % len(candidates)]
        arguments = {}
        for k, strategy in rule.arguments_strategies.items():
            if type(strategy) is Bundle and not (strategy.consume or strategy._transformations):
                # What Bundle.do_draw does for a plain bundle — the same one integer, newest
                # element first — without its two spans and throwaway sampler strategy.
                bundle = machine.bundle(strategy.name)
                reference = bundle[len(bundle) - 1 - data.draw_integer(0, len(bundle) - 1)]
                value = machine.names_to_values[reference.name]
                arguments[k] = reference if strategy.draw_references else value
            else:
                arguments[k] = data.draw(strategy)
        return rule, arguments


class SwarmRuleMachine(RuleBasedStateMachine):
    """A :class:`~hypothesis.stateful.RuleBasedStateMachine` whose rules are chosen by
    :class:`SwarmRules` (one integer per step) instead of Hypothesis's rejection sampling."""

    def __init__(self) -> None:
        super().__init__()
        self._rules_strategy = SwarmRules(self)


class ScheduleFailure(AssertionError):
    """A state machine run broke a safety property or ended in the wrong status.

    ``failure`` is the same string ``remora sim-worker --replay`` reports for the exported
    trace; ``trace_path`` is where that trace was written."""

    def __init__(self, failure: str, detail: str, trace_path: str, store: str = "memory") -> None:
        on = "" if store == "memory" else f" --store {store}"
        super().__init__(
            f"{failure}: {detail}\nreplay: {replay_command(trace_path)}{on}\n"
            f"see it: {show_command(trace_path)}"
        )
        self.failure = failure
        self.trace_path = trace_path


class WorkerScheduleMachine(SwarmRuleMachine):
    """Drives the real lifecycle through the deterministic scheduler (module docstring)."""

    partitions: ClassVar[int] = 1
    classes: ClassVar[tuple[str, ...]] = ("valid", "conflict")
    min_records: ClassVar[int] = 6
    max_records: ClassVar[int] = 20
    lifecycle_factory: ClassVar[LifecycleFactory] = Lifecycle
    # A user's processing and, optionally, its reference model (module-level objects, so the
    # exported trace can name them); without a model a custom processing is checked for
    # the generic properties only.  ``mutation`` names the planted bug a campaign runs.
    processing: ClassVar[Processing] = AMENDMENTS
    reference_model: ClassVar[ReferenceModel | None] = None
    mutation: ClassVar[str | None] = None
    sweep_width: ClassVar[int] = 1  # combinations applied per ``combination`` step
    # The store each run uses: None = a fresh MemoryStore; otherwise a StoreFactory (called
    # with the run's SimConfig, returns a fresh, empty StateStore), e.g. SQLite or
    # PostgreSQL; ``store_kind`` is what the replay command passes as ``--store``.
    store_factory: ClassVar[StoreFactory | None] = None
    store_kind: ClassVar[str] = "memory"
    reach: ClassVar[set[tuple[str, ...]]]  # what the runs of this class reached (see below)
    applied: ClassVar[dict[str, int]]  # how often each race pattern was applied (not drawn)
    kinds_per_run: ClassVar[list[tuple[int, frozenset[str]]]]  # (steps, step kinds) per run

    lifetimes: Bundle[Handle] = Bundle("lifetimes")  # (lifetime, partition) of started lifetimes
    owners: Bundle[Handle] = Bundle("owners")  # ... after an assignment of that partition succeeded
    readers: Bundle[Handle] = Bundle(
        "readers"
    )  # ... after a seek succeeded (also started replacements)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.reach = set()
        cls.applied = {}
        cls.kinds_per_run = []

    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulation | None = None
        self.trace_class = "custom"
        self.steps: list[Step] = []
        self.kinds: list[str] = []  # per step: actor (+ " with faults"), or "combination"
        self._sweeping = ""
        self.failed = False
        self._precondition_cache: dict[tuple[str, str, int], bool] = {}

    # -- set-up ---------------------------------------------------------------------------
    @classmethod
    def sources(cls, trace_class: str) -> st.SearchStrategy[list[SourceRecord]]:
        """The raw source records of one run (override for a custom processing's records,
        with ``classes = ("custom",)``)."""
        return source_histories(trace_class, cls.partitions, cls.max_records, cls.min_records)

    @classmethod
    def model(cls) -> Model:
        """What the oracle checks outputs against (see :mod:`remora.sim.runs`)."""
        if cls.reference_model is not None:
            return cls.reference_model
        return AMENDMENT_RULES if cls.processing is AMENDMENTS else None

    @initialize(target=lifetimes, data=st.data())
    def setup(self, data: st.DataObject) -> Handle:
        self.trace_class = data.draw(st.sampled_from(self.classes), label="class")
        source = data.draw(self.sources(self.trace_class), label="source")
        config = SimConfig(self.partitions, self.trace_class, 0)
        self.sim = Simulation(
            config,
            source,
            store_factory=type(self).store_factory,
            lifecycle_factory=type(self).lifecycle_factory,
            processing=type(self).processing,
            model=type(self).model(),
        )
        self._step(Step("start", 0))
        return Handle(0, 0, self.sim)

    # -- the trace ------------------------------------------------------------------------
    def trace(self) -> Trace:
        assert self.sim is not None
        names = self.names()
        config = SimConfig(
            self.partitions,
            self.trace_class,
            len(self.steps),
            mutation=names["mutation"],
            lifecycle=names["lifecycle"],
            processing=names["processing"],
            model=names["model"],
        )
        return Trace(
            current_toolchain(f"hypothesis:{type(self).__name__}"),
            None,
            config,
            self.sim.source,
            tuple(self.steps),
            True,
        )

    @classmethod
    def names(cls) -> dict[str, str | None]:
        """What the exported trace records besides the built-in defaults."""
        lifecycle = cls.lifecycle_factory
        named = lifecycle is not Lifecycle and cls.mutation is None
        return {
            "mutation": cls.mutation,
            "lifecycle": reference_of(lifecycle) if named else None,
            "processing": None
            if cls.processing is AMENDMENTS
            else processing_reference(cls.processing),
            "model": None if cls.reference_model is None else reference_of(cls.reference_model),
        }

    def export(self) -> str:
        """Write this run's trace.  While Hypothesis shrinks, only the first failure and
        the final (shrunk) replay are written: the final one is what remains."""
        path = failures_dir() / f"hypothesis-{type(self).__name__}.json"
        if _final_run() or not path.exists():
            write_output(path, self.trace().dumps(), parents=True)
        note(f"trace written: {replay_command(path)}")
        return str(path)

    def fail(self, failure: str, detail: str) -> NoReturn:
        self.failed = True
        path = self.export()
        raise ScheduleFailure(failure, detail, path, type(self).store_kind)

    # -- steps ----------------------------------------------------------------------------
    def _step(self, step: Step) -> Attempt:
        assert self.sim is not None
        self.steps.append(step)
        self.kinds.append(self._sweeping or step.actor + (" with faults" if step.faults else ""))
        first = len(self.sim.calls)
        was_live = (
            step.worker in self.sim.workers and self.sim.workers[step.worker].state() == "live"
        )
        try:
            attempt = self.sim.execute(step)
        except Exception as exc:  # the harness itself broke: still an exported failure
            self.fail("ERROR exception", f"step {step.actor} raised {type(exc).__name__}: {exc}")
        self._observe(attempt, first, was_live)
        return attempt

    def _observe(self, attempt: Attempt, first_call: int, was_live: bool) -> None:
        """Record what the attempt *applied* (not what was drawn) in the class's reach."""
        assert self.sim is not None
        cls = type(self)
        reach = cls.reach
        step = attempt.step
        actor = step.actor
        reach.add(("actor", actor))
        reach.add(("result", actor, attempt.result))
        event(f"{actor}: {attempt.result}")
        for c in self.sim.calls[first_call:]:
            if not c.selected or c.lifetime != step.worker:
                continue
            reach.add(("fault", c.operation, c.outcome))
            kind = "-"
            if c.at is not None:
                kind = (
                    "stop+replacement"
                    if c.stop and c.replacement is not None
                    else ("stop" if c.stop else "replacement")
                )
            reach.add(("combo", c.operation, c.outcome, c.at or "-", kind))
            if (c.operation, c.outcome, c.at, c.replacement_started) == (
                "process",
                "unknown-committed",
                "after",
                True,
            ):
                cls.applied["epoch-race"] = cls.applied.get("epoch-race", 0) + 1
        for at, kind in attempt.interleave_kinds:
            reach.add(("interleave", at, kind))
            event(f"interleave {at} {kind}")
        patterns = []
        if attempt.result in ("exhausted", "unresolved"):
            patterns.append(attempt.result)
        if attempt.result == "canceled" and attempt.waits_ms:
            patterns.append("cancel-after-wakeup")
        if step.worker in self.sim.workers and not was_live and actor != "start":
            patterns.append(f"late-{actor}")
        for name in patterns:
            reach.add(("pattern", name))
            cls.applied[name] = cls.applied.get(name, 0) + 1

    def _faulted(
        self, actor: Actor, handle: Handle, drafts: Iterable[SelectorDraft], held_ms: int = 0
    ) -> tuple[Attempt, list[Handle]]:
        """Run a step with fault selectors; returns the attempt and the handles of the
        replacement lifetimes that actually started (assigned and seeked)."""
        assert self.sim is not None
        lifetime, partition = handle.lifetime, handle.partition
        faults = []
        reserved = []
        for draft in drafts:
            rid = None
            if draft.replace:
                rid = self.sim.next_lifetime()
                self.sim.reserve(rid)
                reserved.append(rid)
            faults.append(draft.materialize(rid))
        attempt = self._step(Step(actor, lifetime, partition, tuple(faults), held_ms))
        started = [Handle(rid, partition, self.sim) for rid in reserved if rid in self.sim.workers]
        return attempt, started

    def _plain(self, actor: Actor, handle: Handle) -> Attempt:
        partition = handle.partition if actor not in ("revoke", "stop") else None
        return self._step(Step(actor, handle.lifetime, partition))

    @staticmethod
    def _if_ok(
        attempt: Attempt, handle: Handle, more: Iterable[Handle] = ()
    ) -> MultipleResults[Handle]:
        return multiple(*([handle] if attempt.result == "ok" else []), *more)

    def _handles(self, bundle: str) -> list[Handle]:
        return [self.names_to_values[ref.name] for ref in self.bundle(bundle)]

    def _any(self, bundle: str, test: Callable[[Handle], bool]) -> bool:
        """Whether ``bundle`` holds a handle passing ``test`` (cached until the next step:
        preconditions are asked for every rule at every step).  Newest first: the handle
        that passes is usually a recent one, and bundles keep every stale handle."""
        key = (bundle, test.__name__, len(self.steps))
        cached = self._precondition_cache.get(key)
        if cached is None:
            values = self.names_to_values
            handles = (values[ref.name] for ref in reversed(self.bundle(bundle)))
            cached = self._precondition_cache[key] = any(test(h) for h in handles)
        return cached

    def pick(self, handle: Handle, bundle: str, test: Callable[[Handle], bool]) -> Handle:
        """``handle`` if it passes ``test``, else another handle of ``bundle`` that does
        (chosen by ``handle``'s lifetime, so the draw still decides).  Drawing from the plain
        bundle and picking here is much cheaper than a filtered bundle draw, which retries
        until Hypothesis finds a passing element; the rule's precondition guarantees one."""
        if test(handle):
            return handle
        passing = [h for h in self._handles(bundle) if test(h)]
        return passing[handle.lifetime % len(passing)] if passing else handle

    def has_current_reader(self) -> bool:
        return self._any("readers", Handle.current_reader)

    def has_live_lifetime(self) -> bool:
        return self._any("lifetimes", Handle.live)

    def has_live_owner(self) -> bool:
        return self._any("owners", Handle.live)

    @rule(target=lifetimes, partition=partition_indexes)
    def start(self, partition: int) -> Handle:
        """A fresh lifetime, meant for ``partition`` (callbacks may still name others)."""
        assert self.sim is not None
        lifetime = self.sim.next_lifetime()
        self._step(Step("start", lifetime))
        return Handle(lifetime, partition % self.partitions, self.sim)

    @precondition(has_live_lifetime)
    @rule(target=owners, handle=lifetimes, other=maybe_partition)
    def assign(self, handle: Handle, other: int | None) -> MultipleResults[Handle]:
        handle = self.pick(handle, "lifetimes", Handle.live)
        if other is not None:
            handle = Handle(handle.lifetime, other % self.partitions, handle.sim)
        return self._if_ok(self._plain("assign", handle), handle)

    @precondition(has_live_owner)
    @rule(target=readers, handle=owners)
    def seek(self, handle: Handle) -> MultipleResults[Handle]:
        handle = self.pick(handle, "owners", Handle.live)
        return self._if_ok(self._plain("seek", handle), handle)

    @precondition(has_current_reader)
    @rule(handle=readers, records=st.integers(1, 2))
    def process(self, handle: Handle, records: int) -> None:
        """Process up to ``records`` records, one step each (stopping when not ``ok``)."""
        handle = self.pick(handle, "readers", Handle.current_reader)
        for _ in range(records):
            if self._plain("process", handle).result != "ok":
                break

    @rule(handle=lifetimes, actor=st.sampled_from(["seek", "process", "assign"]))
    def out_of_order(self, handle: Handle, actor: Actor) -> None:
        """A callback to any lifetime, live or not: a seek no assignment of this lifetime
        preceded, a process no seek did, or any callback reaching a stopped or retired
        lifetime (which must be rejected without I/O)."""
        self._plain(actor, handle)

    @rule(handle=readers)
    def process_late(self, handle: Handle) -> None:
        """Process on any lifetime that once seeked, current or not (stale callbacks)."""
        self._plain("process", handle)

    @precondition(has_live_lifetime)
    @rule(handle=lifetimes)
    def revoke(self, handle: Handle) -> None:
        handle = self.pick(handle, "lifetimes", Handle.live)
        self._plain("revoke", handle)

    @precondition(has_live_lifetime)
    @rule(handle=lifetimes)
    def stop(self, handle: Handle) -> None:
        handle = self.pick(handle, "lifetimes", Handle.live)
        self._plain("stop", handle)

    @precondition(has_live_lifetime)
    @rule(
        target=owners,
        handle=lifetimes,
        faults=selector_drafts("assign", min_size=1),
    )
    def assign_with_faults(
        self, handle: Handle, faults: list[SelectorDraft]
    ) -> MultipleResults[Handle]:
        handle = self.pick(handle, "lifetimes", Handle.live)
        attempt, started = self._faulted("assign", handle, faults)
        return self._if_ok(attempt, handle, started)

    @precondition(has_live_owner)
    @rule(
        target=readers,
        handle=owners,
        faults=selector_drafts("seek", min_size=1),
    )
    def seek_with_faults(
        self, handle: Handle, faults: list[SelectorDraft]
    ) -> MultipleResults[Handle]:
        handle = self.pick(handle, "owners", Handle.live)
        attempt, started = self._faulted("seek", handle, faults)
        return self._if_ok(attempt, handle, started)

    @precondition(has_current_reader)
    @rule(
        target=readers,
        handle=readers,
        faults=selector_drafts("process", min_size=1),
    )
    def process_with_faults(
        self, handle: Handle, faults: list[SelectorDraft]
    ) -> MultipleResults[Handle]:
        handle = self.pick(handle, "readers", Handle.current_reader)
        _attempt, started = self._faulted("process", handle, faults)
        return multiple(*started)

    # -- the combination sweep and the races --------------------------------------------
    def _ready(self, actor: Actor, partition: int) -> Handle | None:
        """The latest handle ready for ``actor`` on ``partition`` (a live lifetime, a live
        owner or a current reader), else a fresh lifetime made ready (started, and assigned
        and seeked as the actor needs); None if a preparing step failed."""
        assert self.sim is not None
        ready = {"assign": ("lifetimes", Handle.live), "seek": ("owners", Handle.live)}
        bundle, test = ready.get(actor, ("readers", Handle.current_reader))
        p = partition % self.partitions
        values = self.names_to_values
        handles = (values[ref.name] for ref in reversed(self.bundle(bundle)))
        latest: Handle | None = next((h for h in handles if h.partition == p and test(h)), None)
        if latest is not None:  # one step instead of three or four
            return latest
        lifetime = self.sim.next_lifetime()
        self._step(Step("start", lifetime))
        handle = Handle(lifetime, partition % self.partitions, self.sim)
        chain: list[Actor] = ["assign", "seek"]
        needs = chain[: {"assign": 0, "seek": 1}.get(actor, 2)]
        for before in needs:
            if self._plain(before, handle).result != "ok":
                return None
        return handle

    def _apply(self, combination: Combination, partition: int) -> MultipleResults[Handle]:
        self._sweeping = "combination"  # the swarm check counts these steps apart
        try:
            handle = self._ready(combination.actor, partition)
            if handle is None:
                return multiple()
            attempt, started = self._faulted(combination.actor, handle, combination.drafts)
            return self._if_ok(attempt, handle, started)
        finally:
            self._sweeping = ""

    @rule(target=readers, pick=st.integers(0, len(COMBINATIONS) - 1), partition=partition_indexes)
    def combination(self, pick: int, partition: int) -> MultipleResults[Handle]:
        """One (operation, outcome, boundary, stop/replacement) combination or race pattern
        (:data:`~remora.testing.strategies.COMBINATIONS`), applied on a fresh lifetime made
        ready for it — one cheap integer draw instead of a filtered bundle draw."""
        results: list[Handle] = []
        for i in range(self.sweep_width):
            results += self._apply(COMBINATIONS[(pick + i) % len(COMBINATIONS)], partition).values
        return multiple(*results)

    @rule(target=readers, partition=partition_indexes)
    def epoch_race(self, partition: int) -> MultipleResults[Handle]:
        """The seed's headline schedule: a process whose commit reply is lost
        (``unknown-committed``) with a replacement lifetime interleaved after the effect."""
        race = SelectorDraft(
            Operation.PROCESS, 1, Outcome.UNKNOWN_COMMITTED, 0, At.AFTER, False, True
        )
        return self._apply(Combination("process", (race,), ("race",)), partition)

    @rule(
        target=readers,
        pick=st.integers(0, 3 * len(MUTEX_HOLDS) - 1),
        partition=partition_indexes,
        faults=selector_drafts("process", max_size=1),
    )
    def contended(
        self, pick: int, partition: int, faults: list[SelectorDraft]
    ) -> MultipleResults[Handle]:
        """A callback that finds its lifetime's mutex held by a concurrent call of the same
        lifetime, for a fraction of the operation budget (:data:`MUTEX_HOLDS`), on the
        simulation's clock: the budget must include the wait.  A process carries up to one
        fault selector; held 50 ms short of the budget, the actor's first call aborts, so
        its retry wait crosses what remains of the budget."""
        assert self.sim is not None
        actor: Actor = ("process", "seek", "assign")[pick % 3]
        fraction = MUTEX_HOLDS[pick // 3]
        held_ms = round(self.sim.config.budget_ms * fraction[0] / fraction[1]) + fraction[2]
        self._sweeping = "contended"  # the swarm check counts these steps apart
        try:
            handle = self._ready(actor, partition)
            if handle is None:
                return multiple()
            drafts = faults if actor == "process" else []
            if fraction[2] < 0:  # short of the budget: a retry wait crosses what remains
                primary = PRIMARY_OPERATION[actor]
                drafts = [SelectorDraft(primary, 1, Outcome.ABORT)] + [
                    d for d in drafts if (d.operation, d.call) != (primary, 1)
                ]
            attempt, started = self._faulted(actor, handle, drafts, held_ms)
        finally:
            self._sweeping = ""
        over = held_ms > self.sim.config.budget_ms
        type(self).reach.add(("mutex", "past budget" if over else "within budget", attempt.result))
        return self._if_ok(attempt, handle, started)

    # -- checks -----------------------------------------------------------------------------
    @invariant()
    def safety(self) -> None:
        """The oracle and boundary safety, checked by the scheduler during every step."""
        if self.sim is not None and self.sim.violations and not self.failed:
            first = self.sim.violations[0]
            self.fail(f"ERROR {first.kind}", first.message)

    def teardown(self) -> None:
        """Fair drain; the final status must be the one the oracle predicts."""
        try:
            self._judge()
        finally:
            if self.sim is not None and type(self).store_factory is not None:
                self.sim.store.close()

    def _judge(self) -> None:
        type(self).kinds_per_run.append((len(self.steps), frozenset(self.kinds)))
        if self.sim is None or self.failed or self.sim.violations:
            return
        try:
            before = self.sim.summary()["status"]
            self.sim.drain()
            report = build_report(self.sim, self.trace())
        except Exception as exc:  # the store's reads broke: an exported failure, not a crash
            self.fail("ERROR exception", f"the drain raised {type(exc).__name__}: {exc}")
        predicted = report.document["predicted"]
        if predicted is None and report.status in ("PASS", "PASS_WITH_EXCLUSIONS", "BLOCKED"):
            predicted = report.status  # no model: any complete status is right
        reach = type(self).reach
        reach.add(("status", "before-drain", before))
        reach.add(("status", "final", report.status))
        event(f"status before drain: {before}")
        event(f"status: {report.status}")
        if report.status != predicted:
            failure = report.failure or "PASS"
            self.fail(
                failure,
                f"status {report.status} after the fair drain, the oracle "
                f"predicts {predicted}; diagnostics: {report.document['diagnostics']}",
            )


__all__ = [
    "MUTEX_HOLDS",
    "MAX_PARTITIONS",
    "partition_indexes",
    "maybe_partition",
    "Handle",
    "SwarmRules",
    "SwarmRuleMachine",
    "ScheduleFailure",
    "WorkerScheduleMachine",
]
