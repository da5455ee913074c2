"""Parallel runs of the worker side: commands on real threads, judged by linearizability.

The sequential machines execute one step at a time and *model* concurrency with the
scheduler's interleaves at the fault seam.  What happens between the statements of one
store transaction, on two SQLite connections of one file, or on two PostgreSQL sessions —
row locks, isolation, a read outside its transaction — is out of their sight.  A
**parallel example** is a sequential prefix of commands and 2-3 branches of commands, the
branches run on real threads against the real store; it passes only if the history they
leave is linearizable (:mod:`remora.sim.linearize`) under the sequential :class:`StoreModel`,
ending in the store's observed final state, and the durable outputs at the final frontiers
are the oracle's.

Two targets (:class:`TargetConfig`):

* ``store`` — every thread is a *session* of the store (its own connection for SQLite and
  PostgreSQL, the one shared backend for memory or a custom in-process backend) sending
  :class:`StoreCommand` s: ``claim``, ``observe`` and ``process`` with a requested fault
  outcome (the fault vocabulary of :mod:`remora.faults`).  A session keeps the token its
  last claim returned (an ``observe`` showing the same epoch re-reads its frontier; a
  successful ``process`` moves it) and processes the next visible record at or after that
  frontier.  The branches start from the prefix's session's tokens — clones of one client,
  so two sessions may race with one token as a zombie and its successor would;
* ``lifecycle`` — ``lifetimes`` real :class:`~remora.worker.Lifecycle` objects over one
  store (a connection each), driven by the sequential machines' step vocabulary
  (:class:`~remora.sim.trace.Step`: ``assign``, ``seek``, ``process``, ``revoke``,
  ``stop``, with fault selectors) from any thread — a lifetime is shared by the threads
  that address it.  The store calls the lifecycles make are the history (each call
  recorded at the store's front); the model is *strict* here: a lifetime never submits a
  token of the installed epoch with a frontier other than the durable one (a healthy owner's
  local frontier is the durable frontier).  Each command's result is also held to its own
  calls (an ``ok`` assign returns its last claim's token, a seek its observe's frontier, a
  process its write's token or the recovery read's), a rejected callback makes no call, and
  at the end the ownership model holds (:meth:`~remora.sim.checker.Checker.check_ownership`)
  and every lifetime that failed or was stopped holds nothing.

Scheduling points (:mod:`remora.sim.schedule`): the start of every command, the fault seam's
boundaries before and after the effect, every SQL statement (the SQL backends'
``statement_hook``), every acquire of a plain lock the harness instruments (the memory
backend's, a lifecycle's mutex, a custom backend's), and every wait on the harness clock.

Failure strings (stable): ``ERROR not-linearizable``, ``ERROR stale-frontier`` (linearizable
only if a lifetime may submit a stale frontier of its own epoch), the oracle's kinds for
the outputs (``ERROR outbox-mismatch`` ...), ``ERROR lifecycle-result``,
``ERROR lifecycle-rejected``, ``ERROR lifecycle-retained``, the ownership kinds,
``ERROR exception``, ``ERROR deadlock`` and ``ERROR hang``.

An example is a ``worker-parallel-v1`` document (:class:`ParallelExample`): the target, the
source, the commands and the schedule it ran (the policy and every choice it made), so
``remora sim-worker --replay FILE`` re-runs that schedule.  Where a real engine blocks
inside a statement the schedule cannot be forced exactly (:mod:`remora.sim.schedule`); a
replay therefore runs ``runs`` times and says how often the failure came back.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import tempfile
import threading
import zlib
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import (
    Fenced,
    InvalidInput,
    RemoraError,
    Unavailable,
)
from remora.faults import COMMIT, OUTCOMES_FOR, At, FaultDecision, IOCall, IOReport, Operation
from remora.faults import Outcome as FaultOutcome
from remora.limits import MAX_TRACE_PARTITIONS
from remora.sim.checker import Checker, Holding
from remora.sim.codec import (
    Toolchain,
    TraceError,
    current_toolchain,
    kind_of,
    parse_header,
    read_bool,
    read_choice,
    read_document,
    read_int,
    read_list,
    read_name,
    read_object,
    read_str,
)
from remora.sim.linearize import History, Op, Verdict, linearize
from remora.sim.runs import import_reference, lifecycle_of
from remora.sim.schedule import (
    DEFAULT_STALL,
    PCT,
    Deadlock,
    Policy,
    Replay,
    ScheduledClock,
    ScheduleHang,
    Scheduler,
    ScheduleRecord,
    instrument,
    policy_from_json,
)
from remora.sim.scheduler import _classify, _describe
from remora.sim.trace import Step, _parse_record, _parse_step, _record_json, _step_json
from remora.store import Backend, MemoryBackend, SqliteBackend, StateStore, Token
from remora.worker import Lifecycle, RetryPolicy

VERSION = 1
IMPLEMENTATION = "worker-parallel-v1"
KINDS = ("store", "lifecycle")
STORES = ("memory", "sqlite", "postgres")
STORE_OPERATIONS = (Operation.CLAIM, Operation.OBSERVE, Operation.PROCESS)
LIFECYCLE_ACTORS = ("assign", "seek", "process", "revoke", "stop")
MAX_BRANCHES = 4
MAX_COMMANDS = 64
MAX_LIFETIMES = 8
DEFAULT_RUNS = 5
"""How often a replay re-runs an example's schedule by default (``--runs``)."""

RETRY = RetryPolicy(3, (0.1, 0.2))
"""The lifetimes' retry policy (the simulation's default; waits are yields on the harness
clock, so they cost no time)."""

Result = tuple[Any, ...]


# -- commands ---------------------------------------------------------------------------


@attrs.frozen
class StoreCommand:
    """One call a store session makes, with the outcome the fault seam applies to it."""

    operation: Operation
    partition: int
    outcome: FaultOutcome = FaultOutcome.COMMIT

    def __str__(self) -> str:
        extra = "" if self.outcome is FaultOutcome.COMMIT else f" ({self.outcome.value})"
        return f"{self.operation.value} p{self.partition}{extra}"


Command = StoreCommand | Step


def describe_command(command: Command) -> str:
    if isinstance(command, StoreCommand):
        return str(command)
    where = "" if command.partition is None else f" p{command.partition}"
    faults = "".join(f" [{f.operation.value}#{f.call} {f.outcome.value}]" for f in command.faults)
    return f"{command.actor} L{command.worker}{where}{faults}"


# -- the sequential model ---------------------------------------------------------------

ModelState = tuple[tuple[int, int], ...]
"""(epoch, frontier) per partition."""


class StoreModel:
    """The store's sequential semantics (:mod:`remora.store.base`), restated on its own:
    a partition starts at epoch 0, frontier 0; ``claim`` installs epoch+1 and answers it
    with the frontier; ``observe`` answers both; ``process(token, offset)`` is refused
    (``fenced``) unless a claim installed the token's epoch and its frontier is the durable
    one, refused as ``invalid`` behind the frontier, and otherwise moves the frontier to
    ``offset + 1`` and answers it.  ``unavailable`` changes nothing.  ``strict``: a call
    that carries the installed epoch with another frontier is impossible (a correct
    lifecycle never sends one).  ``final`` is the observed final state the run must end in.

    Commands: ``("claim", p)``, ``("observe", p)``, ``("process", p, epoch, frontier,
    offset)``; results: ``("ok", epoch, frontier)``, ``("fenced",)``, ``("invalid",)``,
    ``("unavailable",)``."""

    def __init__(self, partitions: int, final: ModelState | None = None, strict: bool = False):
        self.partitions = partitions
        self.final = final
        self.strict = strict

    def initial(self) -> ModelState:
        return tuple((0, 0) for _ in range(self.partitions))

    @staticmethod
    def _answer(state: ModelState, command: Hashable) -> tuple[Result, ModelState]:
        assert isinstance(command, tuple)
        name, p = command[0], command[1]
        epoch, frontier = state[p]
        if name == "claim":
            return ("ok", epoch + 1, frontier), _put(state, p, (epoch + 1, frontier))
        if name == "observe":
            return ("ok", epoch, frontier), state
        _, _, t_epoch, t_frontier, offset = command
        if epoch == 0 or t_epoch != epoch or t_frontier != frontier:
            return ("fenced",), state
        if offset < frontier:
            return ("invalid",), state
        return ("ok", epoch, offset + 1), _put(state, p, (epoch, offset + 1))

    def step(self, state: ModelState, op: Op) -> ModelState | None:
        command = op.command
        assert isinstance(command, tuple)
        if self.strict and command[0] == "process":
            epoch, frontier = state[command[1]]
            if epoch > 0 and command[2] == epoch and command[3] != frontier:
                return None
        if op.result == ("unavailable",):
            return state
        result, after = self._answer(state, command)
        return after if result == op.result else None

    def effect(self, state: ModelState, op: Op) -> ModelState:
        return self._answer(state, op.command)[1]

    def accepts(self, state: ModelState) -> bool:
        return self.final is None or state == self.final

    def describe(self, op: Op) -> str:
        command = op.command
        assert isinstance(command, tuple)
        name, p = command[0], command[1]
        args = (
            f"token ({command[2]}, {command[3]}) offset {command[4]}" if name == "process" else ""
        )
        result = op.result if isinstance(op.result, tuple) else ()
        got = "unknown" if not op.definite else " ".join(str(x) for x in result)
        return f"t{op.thread}#{op.id} {name} p{p}{' ' + args if args else ''} -> {got}"


def _put(state: ModelState, p: int, value: tuple[int, int]) -> ModelState:
    return (*state[:p], value, *state[p + 1 :])


def result_of(token: Token) -> Result:
    return ("ok", token.epoch, token.frontier)


def classify_store_error(exc: BaseException) -> Result | None:
    """A definite result for what the store raised, or None when the effect is unknown:
    a fence or bad input refused the call before any effect; ``Unavailable`` means rolled
    back (the stores' contract); anything else — a lost reply, a cancellation, a storage
    or foreign error — may or may not have taken effect."""
    if isinstance(exc, Fenced):
        return ("fenced",)
    if isinstance(exc, Unavailable):
        return ("unavailable",)
    if isinstance(exc, InvalidInput):
        return ("invalid",)
    return None


# -- what a run is given ---------------------------------------------------------------


@attrs.frozen
class TargetConfig:
    """What a parallel example runs against (module docstring).  ``backend`` and
    ``lifecycle`` are ``module:qualname`` references (a :class:`~remora.store.Backend`
    factory called with nothing for ``memory`` — one object the threads share — with a file
    path for ``sqlite`` and a DSN for ``postgres``; a Lifecycle subclass), or None for
    Remora's own.  ``settled``: the backend settles every call's effect before the call
    returns (Remora's stores do), so an unknown effect lands within its call; False lets
    it land any time after."""

    kind: str
    store: str = "memory"
    partitions: int = 1
    lifetimes: int = 2
    backend: str | None = None
    lifecycle: str | None = None
    settled: bool = True

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "store": self.store,
            "partitions": self.partitions,
            "settled": self.settled,
        }
        if self.kind == "lifecycle":
            out["lifetimes"] = self.lifetimes
        if self.backend is not None:
            out["backend"] = self.backend
        if self.lifecycle is not None:
            out["lifecycle"] = self.lifecycle
        return out


@attrs.frozen
class Found:
    """What the run that exported an example saw: its failure and how often it came back
    when the schedule was re-run."""

    failure: str
    detail: str
    reproduced: int
    runs: int

    def to_json(self) -> dict[str, Any]:
        return {
            "failure": self.failure,
            "detail": self.detail,
            "reproduced": self.reproduced,
            "runs": self.runs,
        }


@attrs.frozen
class ParallelExample:
    """One parallel example and the schedule it ran (a ``worker-parallel-v1`` document)."""

    toolchain: Toolchain
    target: TargetConfig
    source: tuple[SourceRecord, ...]
    prefix: tuple[Command, ...]
    branches: tuple[tuple[Command, ...], ...]
    policy: dict[str, Any]
    decisions: tuple[int, ...] = ()
    stall_ms: int = round(DEFAULT_STALL * 1000)
    runs: int = 1
    found: Found | None = None

    def schedule_policy(self, recorded: bool = True) -> Policy:
        """The recorded choices (a :class:`~remora.sim.schedule.Replay`) when there are
        some and ``recorded``, else the policy that made them."""
        if recorded and self.decisions:
            return Replay(self.decisions, grace=self.stall_ms / 1000)
        return policy_from_json(self.policy)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": VERSION,
            "implementation": IMPLEMENTATION,
            "toolchain": self.toolchain.to_json(),
            "target": self.target.to_json(),
            "source": [_record_json(r) for r in self.source],
            "prefix": [_command_json(c) for c in self.prefix],
            "branches": [[_command_json(c) for c in b] for b in self.branches],
            "schedule": {
                "policy": self.policy,
                "decisions": list(self.decisions),
                "stall_ms": self.stall_ms,
            },
            "runs": self.runs,
        }
        if self.found is not None:
            out["found"] = self.found.to_json()
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def _command_json(command: Command) -> dict[str, Any]:
    if isinstance(command, StoreCommand):
        return {
            "operation": command.operation.value,
            "partition": command.partition,
            "outcome": command.outcome.value,
        }
    return _step_json(command)


# -- parsing (strict, like every trace: one line naming the JSON path) -------------------


def is_parallel(text: str) -> bool:
    """Whether ``text`` looks like a parallel example (the CLI dispatches on this)."""
    return f'"{IMPLEMENTATION}"' in text[:400]


def loads(text: str) -> ParallelExample:
    return from_json(read_document(text))


def from_json(doc: Any) -> ParallelExample:
    keys = ["version", "implementation", "toolchain", "target", "source", "prefix"]
    d = read_object(doc, "example", [*keys, "branches", "schedule", "runs"], ["found"])
    toolchain = parse_header(d, VERSION, IMPLEMENTATION)
    target = _parse_target(d["target"], "example.target")
    source = tuple(
        _parse_record(r, f"example.source[{i}]", target.partitions)
        for i, r in enumerate(read_list(d["source"], "example.source"))
    )
    last: dict[int, int] = {}
    for i, r in enumerate(source):
        if r.offset <= last.get(r.partition, -1):
            raise TraceError(
                f"example.source[{i}].offset",
                f"offset {r.offset} is not increasing in partition {r.partition}",
            )
        last[r.partition] = r.offset
    prefix = _parse_commands(d["prefix"], "example.prefix", target)
    branches_doc = read_list(d["branches"], "example.branches")
    if not 1 <= len(branches_doc) <= MAX_BRANCHES:
        raise TraceError("example.branches", f"needs 1 to {MAX_BRANCHES} branches")
    branches = tuple(
        _parse_commands(b, f"example.branches[{i}]", target) for i, b in enumerate(branches_doc)
    )
    s = read_object(d["schedule"], "example.schedule", ["policy", "decisions", "stall_ms"])
    policy = _parse_policy(s["policy"], "example.schedule.policy", len(branches))
    decisions = tuple(
        read_int(x, f"example.schedule.decisions[{i}]", 0, len(branches) - 1)
        for i, x in enumerate(read_list(s["decisions"], "example.schedule.decisions"))
    )
    stall_ms = read_int(s["stall_ms"], "example.schedule.stall_ms", 1, 60_000)
    runs = read_int(d["runs"], "example.runs", 1, 1000)
    found = None
    if "found" in d:
        f = read_object(d["found"], "example.found", ["failure", "detail", "reproduced", "runs"])
        found = Found(
            read_str(f["failure"], "example.found.failure"),
            read_str(f["detail"], "example.found.detail"),
            read_int(f["reproduced"], "example.found.reproduced", 0, 1000),
            read_int(f["runs"], "example.found.runs", 0, 1000),
        )
    return ParallelExample(
        toolchain,
        target,
        source,
        prefix,
        branches,
        policy,
        decisions,
        stall_ms,
        runs,
        found,
    )


def _parse_target(doc: Any, path: str) -> TargetConfig:
    d = read_object(
        doc, path, ["kind", "store", "partitions", "settled"], ["lifetimes", "backend", "lifecycle"]
    )
    kind = read_str(d["kind"], f"{path}.kind")
    if kind not in KINDS:
        raise TraceError(f"{path}.kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    store = read_str(d["store"], f"{path}.store")
    if store not in STORES:
        raise TraceError(f"{path}.store", f"{store!r} is not one of {', '.join(STORES)}")
    if kind == "store" and "lifetimes" in d:
        raise TraceError(f"{path}.lifetimes", "only a lifecycle target has lifetimes")
    if kind == "store" and "lifecycle" in d:
        raise TraceError(f"{path}.lifecycle", "only a lifecycle target runs a lifecycle")
    if kind == "lifecycle" and "lifetimes" not in d:
        raise TraceError(f"{path}.lifetimes", "a lifecycle target needs its lifetimes")
    return TargetConfig(
        kind,
        store,
        read_int(d["partitions"], f"{path}.partitions", 1, MAX_TRACE_PARTITIONS),
        read_int(d.get("lifetimes", 2), f"{path}.lifetimes", 1, MAX_LIFETIMES),
        read_name(d["backend"], f"{path}.backend") if "backend" in d else None,
        read_name(d["lifecycle"], f"{path}.lifecycle") if "lifecycle" in d else None,
        read_bool(d["settled"], f"{path}.settled"),
    )


def _parse_commands(doc: Any, path: str, target: TargetConfig) -> tuple[Command, ...]:
    items = read_list(doc, path)
    if len(items) > MAX_COMMANDS:
        raise TraceError(path, f"{len(items)} commands exceed the limit of {MAX_COMMANDS}")
    return tuple(_parse_command(c, f"{path}[{i}]", target) for i, c in enumerate(items))


def _parse_command(doc: Any, path: str, target: TargetConfig) -> Command:
    if target.kind == "store":
        d = read_object(doc, path, ["operation", "partition", "outcome"])
        operation = read_choice(d["operation"], f"{path}.operation", Operation, "operation")
        if operation not in STORE_OPERATIONS:
            raise TraceError(f"{path}.operation", f"a store session never calls {operation.value}")
        outcome = read_choice(d["outcome"], f"{path}.outcome", FaultOutcome, "outcome")
        if outcome not in OUTCOMES_FOR[operation]:
            raise TraceError(
                f"{path}.outcome", f"{outcome.value!r} is not allowed for {operation.value}"
            )
        partition = read_int(d["partition"], f"{path}.partition", 0, target.partitions - 1)
        return StoreCommand(operation, partition, outcome)
    step = _parse_step(doc, path, target.partitions)
    if step.actor not in LIFECYCLE_ACTORS:
        raise TraceError(
            f"{path}.actor", f"a parallel step is one of {', '.join(LIFECYCLE_ACTORS)}"
        )
    if not 0 <= step.worker < target.lifetimes:
        raise TraceError(f"{path}.worker", f"lifetime {step.worker} of {target.lifetimes}")
    if any(f.interleave is not None or f.delay_ms for f in step.faults):
        raise TraceError(
            f"{path}.faults",
            "a parallel step's faults carry no interleave or delay (the "
            "threads are the interleaving)",
        )
    if step.mutex_held_ms:
        raise TraceError(f"{path}.mutex_held_ms", "a parallel step does not model the mutex")
    return step


def _parse_policy(doc: Any, path: str, branches: int) -> dict[str, Any]:
    if not isinstance(doc, dict) or "name" not in doc:
        raise TraceError(path, f"expected an object with a name, got {kind_of(doc)}")
    name = read_str(doc["name"], f"{path}.name")
    if name == "pct":
        d = read_object(doc, path, ["name", "priorities", "change_points"])
        priorities = [
            read_int(x, f"{path}.priorities[{i}]", 0, MAX_BRANCHES - 1)
            for i, x in enumerate(read_list(d["priorities"], f"{path}.priorities"))
        ]
        if sorted(priorities) != list(range(branches)):
            raise TraceError(f"{path}.priorities", f"must order the {branches} branches")
        points = [
            read_int(x, f"{path}.change_points[{i}]", 0, 1_000_000)
            for i, x in enumerate(read_list(d["change_points"], f"{path}.change_points"))
        ]
        return {"name": "pct", "priorities": priorities, "change_points": points}
    if name == "random":
        d = read_object(doc, path, ["name", "seed"])
        return {"name": "random", "seed": read_int(d["seed"], f"{path}.seed")}
    raise TraceError(f"{path}.name", f"{name!r} is not one of pct, random")


# -- the run ----------------------------------------------------------------------------


class ParallelHook:
    """The fault hook of a parallel run: the seam's boundaries are scheduling points, and
    the command the calling thread runs decides each call's outcome (per operation, the
    n-th call of the command — as a step's fault selectors do in the simulation)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._local = threading.local()

    def begin(self, faults: Mapping[tuple[Any, int], FaultOutcome]) -> None:
        """The calling thread's command starts: ``faults`` maps (operation, n) — a
        :class:`~remora.faults.Operation` or the job runtime's
        :class:`~remora.jobs.io.JobOperation` — to the n-th such call's outcome."""
        self._local.faults = dict(faults)
        self._local.counts = {}

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        # no point here: nothing runs between the decision and the boundary before
        faults: dict[tuple[Any, int], FaultOutcome] = getattr(self._local, "faults", {})
        counts: dict[Any, int] = getattr(self._local, "counts", {})
        number = counts.get(call.operation, 0) + 1
        counts[call.operation] = number
        self._local.counts = counts
        op = call.operation
        outcome = faults.get((op, number))
        if outcome is None:
            return COMMIT
        return FaultDecision(outcome, 0, selected=True)

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None:
        self.scheduler.point(f"{call.operation.value} p{call.partition} {at.value}")

    def returned(self, call: IOCall, report: IOReport) -> None:
        return None


class RecordingStore:
    """A store client that records every call it forwards as one operation of the history
    (the calling thread's, the command's) — the lifecycle's store in the lifecycle target."""

    def __init__(self, store: StateStore, run: _Run) -> None:
        self.store = store
        self.run = run

    def claim(self, partition: int, ctx: Context) -> Token:
        return self._call(("claim", partition), lambda: self.store.claim(partition, ctx))

    def observe(self, partition: int, ctx: Context) -> Token:
        return self._call(("observe", partition), lambda: self.store.observe(partition, ctx))

    def process(self, partition: int, token: Token, record: SourceRecord, ctx: Context) -> Token:
        command = ("process", partition, token.epoch, token.frontier, record.offset)
        return self._call(command, lambda: self.store.process(partition, token, record, ctx))

    def _call(self, command: tuple[Any, ...], io: Callable[[], Token]) -> Token:
        run = self.run
        op_id = run.history.invoke(run.thread(), command)
        run.note_op(op_id)
        try:
            token = io()
        except BaseException as exc:
            result = classify_store_error(exc)
            run.history.answer(op_id, result, result is not None, run.config.settled)
            raise
        run.history.answer(op_id, result_of(token), True, True)
        return token


@attrs.frozen
class CommandRecord:
    """One lifecycle command as it ran: its thread and index, the step, its result, the
    record a process submitted, and the store operations it made."""

    thread: int
    index: int
    step: Step
    result: Result
    offset: int | None
    ops: tuple[int, ...]


@attrs.frozen
class RunResult:
    """One run of an example: its failure (None: it passed) and why, and the schedule."""

    failure: str | None
    detail: str
    schedule: ScheduleRecord
    operations: int
    verdict: Verdict | None = None
    results: tuple[tuple[str, int], ...] = ()  # how many operations ended each way


def result_counts(threads: Sequence[Sequence[Op]]) -> tuple[tuple[str, int], ...]:
    """How many operations ended ``ok``, ``fenced``, ... or ``unknown``, in name order."""
    counts: dict[str, int] = {}
    for op in (op for thread in threads for op in thread):
        name = str(op.result[0]) if op.definite and isinstance(op.result, tuple) else "unknown"
        counts[name] = counts.get(name, 0) + 1
    return tuple(sorted(counts.items()))


class _Session:
    def __init__(self, store: RecordingStore, held: dict[int, Token] | None = None) -> None:
        self.store = store
        self.held: dict[int, Token] = dict(held or {})


class _Run:
    """The system under test for one run (fresh stores, hook, history)."""

    def __init__(
        self,
        example: ParallelExample,
        scheduler: Scheduler,
        where: Site,
    ) -> None:
        self.site = where
        location = where.fresh()
        self.example = example
        self.config = example.target
        self.scheduler = scheduler
        self.clock = ScheduledClock(scheduler)
        self.hook = ParallelHook(scheduler)
        self.history = History()
        self._local = threading.local()
        self.commands: list[CommandRecord] = []
        self._commands_lock = threading.Lock()
        self.backends: list[Backend] = []
        self.location = location
        self.visible: dict[int, list[SourceRecord]] = {}
        for r in example.source:
            if r.visible:
                self.visible.setdefault(r.partition, []).append(r)
        self._factory = _backend_factory(self.config)
        self._shared: Backend | None = None
        self.sessions: list[_Session] = []
        self.lifetimes: list[Lifecycle] = []

    # -- plumbing ----------------------------------------------------------------------
    def thread(self) -> int:
        index: int = getattr(self._local, "thread", 0)
        return index

    def note_op(self, op_id: int) -> None:
        ops: list[int] | None = getattr(self._local, "ops", None)
        if ops is not None:
            ops.append(op_id)

    def connect(self) -> Backend:
        """A connection of this run's store (the one shared object for memory)."""
        if self.config.store == "memory":
            if self._shared is None:
                self._shared = self.site.lease(self.config.backend, self._factory, None)
                self.backends.append(self._shared)
                instrument(self._shared, self.scheduler)
            return self._shared
        # a connection of its own: its locks are never contended, and stay plain
        backend = self.site.lease(self.config.backend, self._factory, self.location)
        self.backends.append(backend)
        hook = getattr(backend, "statement_hook", None)
        if callable(hook):
            point = self.scheduler.point
            hook(lambda sql: point("sql " + " ".join(str(sql).split())[:48]))
        return backend

    def client(self) -> RecordingStore:
        return RecordingStore(StateStore(self.connect(), self.hook), self)

    def next_visible(self, partition: int, at: int) -> SourceRecord | None:
        return next((r for r in self.visible.get(partition, ()) if r.offset >= at), None)

    def close(self) -> None:
        for backend in self.backends:
            hook = getattr(backend, "statement_hook", None)
            if callable(hook):
                hook(None)
            self.site.give_back(backend)

    # -- the store target -------------------------------------------------------------
    def store_command(self, session: _Session, command: Command) -> None:
        assert isinstance(command, StoreCommand)
        self.scheduler.point(f"invoke {command}")
        faults = {}
        if command.outcome is not FaultOutcome.COMMIT:
            faults[(command.operation, 1)] = command.outcome
        self.hook.begin(faults)
        ctx = Context(self.clock)
        p = command.partition
        store = session.store
        try:
            if command.operation is Operation.CLAIM:
                session.held[p] = store.claim(p, ctx)
            elif command.operation is Operation.OBSERVE:
                seen = store.observe(p, ctx)
                held = session.held.get(p)
                if held is not None and held.epoch == seen.epoch:
                    session.held[p] = seen
            else:
                held = session.held.get(p, Token(0, 0))
                record = self.next_visible(p, held.frontier)
                if record is not None:
                    session.held[p] = store.process(p, held, record, ctx)
        except Exception:  # recorded as the operation's result by the recording store
            pass

    # -- the lifecycle target ---------------------------------------------------------
    def lifecycle_command(self, thread: int, index: int, command: Command) -> None:
        assert isinstance(command, Step)
        lifecycle = self.lifetimes[command.worker]
        self.scheduler.point(f"invoke {describe_command(command)}")
        self.hook.begin({(f.operation, f.call): f.outcome for f in command.faults})
        ops: list[int] = []
        self._local.ops = ops
        p = command.partition
        offset = None
        result: Result
        try:
            if command.actor == "assign":
                assert p is not None
                result = result_of(lifecycle.assign([p])[p])
            elif command.actor == "seek":
                assert p is not None
                result = ("ok", lifecycle.seek(p))
            elif command.actor == "process":
                assert p is not None
                held = lifecycle.owned().get(p)
                record = self.next_visible(p, 0 if held is None else held.frontier)
                if record is None:
                    result = ("idle",)
                else:
                    offset = record.offset
                    result = result_of(lifecycle.process(p, record))
            elif command.actor == "revoke":
                lifecycle.revoke()
                result = ("ok",)
            else:
                lifecycle.stop()
                lifecycle.revoke()
                result = ("ok",)
        except RemoraError as exc:
            result = (_classify(exc), _describe(exc))
        except Exception as exc:  # a foreign exception out of the lifecycle: a finding
            result = ("exception", _describe(exc))
        finally:
            self._local.ops = None
        record_ = CommandRecord(thread, index, command, result, offset, tuple(ops))
        with self._commands_lock:
            self.commands.append(record_)

    # -- both -------------------------------------------------------------------------
    def execute(self) -> ScheduleRecord:
        """The prefix on the calling thread (history thread 0), then the branches on
        threads of their own (history threads 1..n) under the scheduler."""
        example = self.example
        n = len(example.branches)
        if self.config.kind == "store":
            first = _Session(self.client())
            self.sessions = [first] + [_Session(self.client()) for _ in range(n - 1)]
        else:
            make = _lifecycle_factory(self.config)
            log = _ValidatingLog(self)
            for i in range(self.config.lifetimes):
                lifecycle = make(
                    self.client(), log, clock=self.clock, retry=RETRY, name=f"lifetime {i}"
                )
                instrument(lifecycle, self.scheduler)
                self.lifetimes.append(lifecycle)
        self._local.thread = 0
        for i, command in enumerate(example.prefix):
            self._run_command(0, i, command, self.sessions[0] if self.sessions else None)
        if self.sessions:
            for session in self.sessions[1:]:
                session.held = dict(self.sessions[0].held)

        def body(b: int) -> Callable[[], None]:
            def run() -> None:
                self._local.thread = b + 1
                session = self.sessions[b] if self.sessions else None
                for i, command in enumerate(example.branches[b]):
                    self._run_command(b + 1, i, command, session)

            return run

        return self.scheduler.run([body(b) for b in range(n)])

    def _run_command(
        self, thread: int, index: int, command: Command, session: _Session | None
    ) -> None:
        if session is not None:
            self.store_command(session, command)
        else:
            self.lifecycle_command(thread, index, command)


class _ValidatingLog:
    """The lifetimes' source validator: every partition of the run is valid, through the
    fault seam (so a step's ``validate`` selectors apply and the boundaries are points)."""

    def __init__(self, run: _Run) -> None:
        self.run = run

    def validate(self, partition: int, ctx: Context) -> None:
        from remora.faults import controlled_call

        if not 0 <= partition < self.run.config.partitions:
            raise InvalidInput(f"partition {partition} is not in the source")
        controlled_call(
            self.run.hook,
            IOCall(Operation.VALIDATE, partition),
            ctx,
            lambda commit: None,
        )


def _backend_factory(config: TargetConfig) -> Callable[[str | None], Backend]:
    if config.backend is not None:
        made = import_reference(config.backend, "example.target.backend")
        if not callable(made):
            raise InvalidInput(f"example.target.backend: {config.backend} is not callable")

        def custom(location: str | None) -> Backend:
            backend = made() if location is None else made(location)
            if not isinstance(backend, Backend):
                raise InvalidInput(
                    f"example.target.backend: {config.backend} made a {type(backend).__name__}, "
                    "not a remora.store.Backend"
                )
            return backend

        return custom
    if config.store == "memory":
        return lambda location: MemoryBackend()
    if config.store == "sqlite":
        return lambda location: SqliteBackend(str(location))
    from remora.store.postgres import PostgresBackend

    return lambda location: PostgresBackend(str(location))


def _lifecycle_factory(config: TargetConfig) -> Callable[..., Lifecycle]:
    if config.lifecycle is None:
        return Lifecycle
    return lifecycle_of(config.lifecycle, "example.target.lifecycle")


# -- judging a run ----------------------------------------------------------------------


def _final_rows(backend: Backend, partitions: int) -> ModelState:
    return tuple(
        (row.epoch, row.frontier) for row in (backend.partition_row(p) for p in range(partitions))
    )


def judge(run: _Run, schedule: ScheduleRecord) -> RunResult:
    """The run's verdict (module docstring): the history against the model and the
    observed final state, the outputs against the oracle, and the lifecycle rules."""
    config = run.config
    n = len(run.example.branches)
    threads = run.history.threads(n + 1)
    count = sum(len(t) for t in threads)
    kinds = result_counts(threads)
    if run.scheduler.failures:
        exc = run.scheduler.failures[0]
        kind = "exception"
        if isinstance(exc, (ScheduleHang, Deadlock)):
            kind = "hang" if isinstance(exc, ScheduleHang) else "deadlock"
        return RunResult(f"ERROR {kind}", _describe(exc), schedule, count, None, kinds)
    reader = run.backends[0]
    final = _final_rows(reader, config.partitions)
    snapshot = reader.snapshot()
    strict = config.kind == "lifecycle"
    verdict = linearize(threads, StoreModel(config.partitions, final, strict))
    if not verdict.ok:
        if verdict.exhausted:
            return RunResult(
                "ERROR not-linearizable", verdict.message, schedule, count, verdict, kinds
            )
        kind = "not-linearizable"
        if strict and linearize(threads, StoreModel(config.partitions, final)).ok:
            kind = "stale-frontier"
        detail = f"final rows {list(final)}; {verdict.message}"
        return RunResult(f"ERROR {kind}", detail, schedule, count, verdict, kinds)
    checker = Checker(run.example.source, range(config.partitions))
    outputs = checker.check_snapshot(snapshot)
    if outputs:
        first = outputs[0]
        return RunResult(f"ERROR {first.kind}", first.message, schedule, count, verdict, kinds)
    if config.kind == "lifecycle":
        found = _lifecycle_rules(run, checker, reader)
        if found is not None:
            return RunResult(found[0], found[1], schedule, count, verdict, kinds)
    return RunResult(None, "linearizable", schedule, count, verdict, kinds)


FAILED = ("fenced", "exhausted", "unresolved", "deadline", "canceled", "invalid", "error")


def _lifecycle_rules(run: _Run, checker: Checker, reader: Backend) -> tuple[str, str] | None:
    """Each command against its own calls, then what every lifetime holds at the end."""
    ops = {
        op.id: op for thread in run.history.threads(len(run.example.branches) + 1) for op in thread
    }
    must_hold_nothing: set[int] = set()
    for c in sorted(run.commands, key=lambda c: (c.thread, c.index)):
        own = [ops[i] for i in c.ops]
        where = f"thread {c.thread} command {c.index} ({describe_command(c.step)})"
        kind = c.result[0]
        if kind == "exception":
            return "ERROR exception", f"{where} raised {c.result[1]}"
        if kind == "retired" and own:
            return "ERROR lifecycle-rejected", f"{where} was rejected but made {len(own)} calls"
        if kind in FAILED:
            must_hold_nothing.add(c.step.worker)
        if c.step.actor == "stop":
            must_hold_nothing.add(c.step.worker)
        if kind != "ok" or c.step.actor in ("revoke", "stop"):
            continue
        problem = _result_problem(c, own)
        if problem is not None:
            return "ERROR lifecycle-result", f"{where}: {problem}"
    holdings = []
    for i, lifecycle in enumerate(run.lifetimes):
        owned = lifecycle.owned()
        if i in must_hold_nothing and owned:
            return (
                "ERROR lifecycle-retained",
                f"lifetime {i} failed or was stopped but holds {sorted(owned)}",
            )
        state = "stopped" if lifecycle.stopped else "live" if lifecycle.live else "retired"
        holdings.append(Holding(i, owned, state, frozenset(owned)))

    def installed(p: int) -> Token:
        row = reader.partition_row(p)
        return Token(row.epoch, row.frontier)

    violations = checker.check_ownership(holdings, installed)
    if violations:
        return f"ERROR {violations[0].kind}", violations[0].message
    return None


def _call(op: Op) -> str:
    """The store call an operation of the history made."""
    command = op.command
    assert isinstance(command, tuple)
    return str(command[0])


def _result_problem(c: CommandRecord, own: Sequence[Op]) -> str | None:
    name = {"assign": "claim", "seek": "observe", "process": "process"}[c.step.actor]
    ok = [op for op in own if op.definite and isinstance(op.result, tuple) and op.result[0] == "ok"]
    mine = [op for op in ok if _call(op) == name]
    if c.step.actor == "assign":
        if not mine or mine[-1].result != c.result:
            return f"returned {c.result} but its last successful claim answered " + (
                str(mine[-1].result) if mine else "nothing"
            )
        return None
    if c.step.actor == "seek":
        seen = mine[-1].result if mine else None
        if not isinstance(seen, tuple) or ("ok", seen[2]) != c.result:
            return f"returned frontier {c.result[1:]} but its observe answered " + (
                str(mine[-1].result) if mine else "nothing"
            )
        return None
    writes = [op for op in own if _call(op) == "process"]
    if writes and writes[-1].definite and writes[-1].result == c.result:
        return None
    reads = [op for op in ok if _call(op) == "observe"]
    if (
        writes
        and not writes[-1].definite
        and reads
        and reads[-1].result == c.result
        and reads[-1].invoked > writes[-1].invoked
    ):
        return None
    return f"returned {c.result} that neither its write nor a recovery read answered"


# -- running and replaying --------------------------------------------------------------


class Site:
    """Where the runs of one example (or one test) keep their store: nothing for memory,
    a directory of fresh files for SQLite, one scratch database (emptied before each run)
    for PostgreSQL."""

    def __init__(self, store: str, directory: Path | None = None, dsn: str | None = None):
        self.store = store
        self.directory = directory
        self.dsn = dsn
        self._files = 0
        self._idle: dict[str | None, list[Backend]] = {}  # PostgreSQL: kept for the next run
        self._keys: dict[int, str | None] = {}
        self._made: list[Backend] = []
        self._cleaner: Any = None  # PostgreSQL: the connection that empties the tables

    def lease(
        self, key: str | None, make: Callable[[str | None], Backend], location: str | None
    ) -> Backend:
        """A backend for a run: a PostgreSQL one an earlier run of the same factory gave
        back (its connections open: connecting is most of a short run's time), else a new
        one."""
        idle = self._idle.get(key)
        if idle:
            return idle.pop()
        backend = make(location)
        self._made.append(backend)
        self._keys[id(backend)] = key
        return backend

    def give_back(self, backend: Backend) -> None:
        """A run is done with ``backend``: kept for the next run (PostgreSQL), else closed."""
        if self.store == "postgres":
            self._idle.setdefault(self._keys[id(backend)], []).append(backend)
            return
        with contextlib.suppress(Exception):
            backend.close()

    def close(self) -> None:
        for backend in self._made:
            with contextlib.suppress(Exception):
                backend.close()
        if self._cleaner is not None:
            with contextlib.suppress(Exception):
                self._cleaner.close()

    def fresh(self) -> str | None:
        if self.store == "memory":
            return None
        if self.store == "sqlite":
            assert self.directory is not None
            self._files += 1
            return str(self.directory / f"run-{self._files}.sqlite3")
        assert self.dsn is not None
        if self._cleaner is None:
            import psycopg

            self._cleaner = psycopg.connect(self.dsn, autocommit=True)
        _empty_postgres(self._cleaner)
        return self.dsn


@contextlib.contextmanager
def site(store: str, dsn: str | None = None) -> Iterator[Site]:
    """A :class:`Site` for ``store``; PostgreSQL needs ``dsn`` (a server whose user may
    create the scratch database)."""
    if store == "memory":
        yield Site(store)
        return
    if store == "sqlite":
        # in memory where the system has a tmpfs: a run's files are thrown away, and
        # fsync there costs nothing (most of a run's time on a disk)
        shm = Path("/dev/shm")
        base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
        with tempfile.TemporaryDirectory(prefix="remora-parallel-", dir=base) as where:
            yield Site(store, directory=Path(where))
        return
    if dsn is None:
        raise InvalidInput("a postgres example needs --dsn (a server that may create a database)")
    from remora.sim.scratch import scratch_database

    with scratch_database(dsn, "remora_parallel") as database:
        _fast_commits(database)
        pg = Site(store, dsn=database)
        try:
            yield pg
        finally:
            pg.close()


_TABLES = ("remora_partition", "remora_subject", "remora_outbox", "remora_quarantine")


def _fast_commits(dsn: str) -> None:
    """Commits of the scratch database's sessions do not wait for the disk (a run's data is
    thrown away; locks, isolation and visibility are the same)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    name = str(conninfo_to_dict(dsn)["dbname"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(name))
        )


def _empty_postgres(conn: Any) -> None:
    """Delete every row (cheaper than TRUNCATE for a run's few rows)."""
    row = conn.execute("SELECT to_regclass('remora_partition') IS NOT NULL").fetchone()
    if row is not None and row[0]:
        with conn.transaction():
            for table in (*_TABLES, "remora_intent"):
                conn.execute(f"DELETE FROM {table}")


def run_once(example: ParallelExample, policy: Policy, where: Site) -> RunResult:
    """One run of ``example`` under ``policy`` on a fresh store at ``where``."""
    scheduler = Scheduler(policy, stall=example.stall_ms / 1000)
    run = _Run(example, scheduler, where)
    try:
        try:
            schedule = run.execute()
        except ScheduleHang as exc:
            return RunResult("ERROR hang", str(exc), scheduler.record(), 0)
        return judge(run, schedule)
    finally:
        run.close()


def schedule_variants(example: ParallelExample, steps: int, depth: int) -> Iterator[PCT]:
    """PCT schedules beyond an example's own: seeded by its policy (the same example
    always gets the same ones), with ``depth - 1`` change points spread over the ``steps``
    its first run took — the horizon PCT needs, which only a run can tell."""
    seed = zlib.crc32(json.dumps(example.policy, sort_keys=True).encode())
    threads = len(example.branches)
    for i in itertools.count(1):
        yield PCT.seeded(seed + i, threads, depth, max(steps, 1))


def explore(
    example: ParallelExample, where: Site, runs: int, depth: int
) -> tuple[ParallelExample, list[RunResult]]:
    """Run ``example`` under its own schedule, then under ``runs - 1`` more
    (:func:`schedule_variants`), stopping at the first failure; returns the example as it
    ran last (its policy and recorded choices) and every run's result."""
    results = [run_once(example, example.schedule_policy(recorded=False), where)]
    last = attrs.evolve(example, decisions=results[0].schedule.decisions)
    variants = schedule_variants(example, len(results[0].schedule.decisions), depth)
    while results[-1].failure is None and len(results) < runs:
        variant = attrs.evolve(example, policy=next(variants).to_json())
        results.append(run_once(variant, variant.schedule_policy(recorded=False), where))
        last = attrs.evolve(variant, decisions=results[-1].schedule.decisions)
    return last, results


@attrs.frozen
class ReplayReport:
    """A replay's verdict: how many of ``runs`` failed, the first failing run, and the
    recorded failure the example carries."""

    runs: int
    failed: int
    first: RunResult | None
    last: RunResult

    @property
    def status(self) -> str:
        return "PASS" if self.failed == 0 else "ERROR"

    @property
    def failure(self) -> str | None:
        return None if self.first is None else self.first.failure

    def document(self, example: ParallelExample) -> dict[str, Any]:
        shown = self.first or self.last
        return {
            "implementation": IMPLEMENTATION,
            "status": self.status,
            "failure": self.failure,
            "runs": self.runs,
            "reproduced": self.failed,
            "detail": shown.detail,
            "operations": shown.operations,
            "schedule": {
                "decisions": len(shown.schedule.decisions),
                "stalls": shown.schedule.stalls,
                "diverged": shown.schedule.diverged,
            },
            "recorded": None if example.found is None else example.found.to_json(),
        }


def replay(
    example: ParallelExample,
    runs: int | None = None,
    dsn: str | None = None,
    *,
    recorded: bool = True,
    stop_at_first: bool = False,
) -> ReplayReport:
    """Run ``example``'s schedule ``runs`` times (default :data:`DEFAULT_RUNS`), each
    on a fresh store; ``recorded``: follow the recorded choices (else the policy)."""
    count = DEFAULT_RUNS if runs is None else runs
    first: RunResult | None = None
    failed = 0
    last: RunResult | None = None
    with site(example.target.store, dsn) as where:
        for _ in range(count):
            last = run_once(example, example.schedule_policy(recorded), where)
            if last.failure is not None:
                failed += 1
                first = first or last
                if stop_at_first:
                    break
    assert last is not None
    return ReplayReport(count, failed, first, last)


def example_for(
    target: TargetConfig,
    source: Sequence[SourceRecord],
    prefix: Sequence[Command],
    branches: Sequence[Sequence[Command]],
    policy: PCT,
    *,
    generator: str | None = None,
    runs: int = 1,
    stall_ms: int = round(DEFAULT_STALL * 1000),
) -> ParallelExample:
    """An example before it ran (no recorded choices yet)."""
    return ParallelExample(
        current_toolchain(generator),
        target,
        tuple(source),
        tuple(prefix),
        tuple(tuple(b) for b in branches),
        policy.to_json(),
        (),
        stall_ms,
        runs,
    )


__all__ = [
    "VERSION",
    "IMPLEMENTATION",
    "KINDS",
    "STORES",
    "STORE_OPERATIONS",
    "LIFECYCLE_ACTORS",
    "DEFAULT_RUNS",
    "StoreCommand",
    "Command",
    "describe_command",
    "ModelState",
    "StoreModel",
    "classify_store_error",
    "TargetConfig",
    "Found",
    "ParallelExample",
    "is_parallel",
    "loads",
    "from_json",
    "ParallelHook",
    "RecordingStore",
    "CommandRecord",
    "RunResult",
    "judge",
    "Site",
    "site",
    "run_once",
    "ReplayReport",
    "replay",
    "example_for",
    "schedule_variants",
    "explore",
]
