"""The ``job-schedule-v1`` trace: a job-runtime run as strict, versioned JSON.

A job trace is everything needed to replay a run of :class:`~remora.testing.job_machines.
JobRuntimeMachine` (or of ``remora sim-jobs``) through the same executor
(:mod:`remora.sim.jobs.run`): the producing toolchain (provenance only), the complete
immutable configuration and its digest (jobs, worker incarnations, limits, fault budgets,
the planted mutation if any), the handlers' scripted behaviour (the outcome each job's
attempts report when the fair drain runs them), the explicit steps with their fault choices,
and whether to drain.

It lives in :mod:`remora.testing`, not :mod:`remora.jobs`: production code never imports the
simulation packages (``tests/test_boundaries.py``), and the strict JSON helpers are the ones
of :mod:`remora.sim.trace`, imported, so both trace kinds reject the same things the same
way: unknown fields at any level, duplicate keys, ``NaN``, trailing content, a wrong
``version``/``implementation``, a config whose digest differs, invalid choices (an unknown
step, a worker or job the config does not name, a token or amount outside the limits, an
outcome a read cannot have, ``call`` < 1).  Every rejection is one line naming the JSON path
(:class:`~remora.sim.trace.TraceError`, exit 2 at the command line).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from remora import strictjson
from remora.errors import InvalidInput
from remora.faults import Outcome
from remora.jobs.io import JobOperation
from remora.jobs.model import DEFAULT_QUEUE, MAX_PRIORITY, Service
from remora.jobs.model import Outcome as JobOutcome
from remora.jobs.target import check_id
from remora.sim.codec import (
    Toolchain,
    TraceError,
    config_digest,
    current_toolchain,
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

VERSION = 1
IMPLEMENTATION = "job-schedule-v1"

#: Every step kind and the parameters it takes (besides the optional ``faults``).
OPS: dict[str, tuple[str, ...]] = {
    # client
    "submit": ("job",),
    "cancel": ("job",),
    # environment
    "start": ("worker",),
    "crash": ("worker",),
    "shutdown": ("worker",),
    "drop-link": ("worker", "service"),
    "restore-link": ("worker", "service"),
    "wipe": (),
    "tick": (),
    # an incarnation's production loop (remora.sim.jobs.loops)
    "loop-turn": ("worker",),
    "loop-handler": ("worker", "job", "token"),
    "loop-reconcile": ("worker",),
    # a pass crossed by the next looping incarnation's, at its ``amount``-th store call
    "loop-reconcile-crossed": ("worker", "amount"),
    "loop-stop": ("worker",),  # the loop is asked to stop (SIGTERM)
    # reconciler: per job
    "enqueue": ("job",),
    "publish-cancel-notice": ("job",),
    "clean-terminal": ("job",),
    "clear-stale-progress": ("job",),
    "reconciler-release-reservation": ("job",),
    "expire-reservation": ("job",),
    "schedule-retry": ("job",),
    "finalize-cancel": ("job",),
    "invalidate-checkpoint": ("job",),
    # reconciler: per attempt
    "expire-lease": ("job", "token"),
    "reap": ("job", "token"),
    "cleanup-stage": ("job", "token"),
    "reconciler-process-outcome": ("job", "token"),
    "reconciler-release-lease": ("job", "token"),
    # reconciler: one pass of everything enabled (includes credential cleanup)
    "reconcile": (),
    # reconciler: CrashWorker of an incarnation whose heartbeat expired (the mark and the
    # fence, then the durable declaration: a cross-store step of its own)
    "declare-down": ("worker",),
    # worker: per job
    "reserve": ("worker", "job"),
    "authorize": ("worker", "job"),
    "release-reservation": ("worker", "job"),
    # worker: per attempt
    "activate": ("worker", "job", "token"),
    "renew": ("worker", "job", "token"),
    "report-progress": ("worker", "job", "token"),
    "advance": ("worker", "job", "token", "amount"),
    "checkpoint": ("worker", "job", "token"),
    "send-outcome": ("worker", "job", "token", "outcome"),
    "process-outcome": ("worker", "job", "token"),
    # SendOutcome and ProcessOutcome in one durable transaction
    "complete": ("worker", "job", "token", "outcome"),
    "cooperative-stop": ("worker", "job", "token"),
    "record-stop": ("worker", "job", "token"),
    "release-lease": ("worker", "job", "token"),
    "put-secret": ("worker", "job", "token"),
}
PARAMS = ("worker", "job", "token", "amount", "outcome", "service")
#: The latest store call of a reconcile pass at which another pass may cross it
#: (``loop-reconcile-crossed``'s ``amount``).
CROSS_CALLS = 5

READS = frozenset(o for o in JobOperation if o.value.endswith("-read"))
FAULT_OUTCOMES: dict[JobOperation, frozenset[Outcome]] = {
    op: frozenset({Outcome.ABORT})
    if op in READS
    else frozenset({Outcome.ABORT, Outcome.UNKNOWN_COMMITTED, Outcome.UNKNOWN_ABORTED})
    for op in JobOperation
}
"""What a fault selector may choose per operation: a read can only fail; a write can fail
or lose its reply after committing or after aborting."""
MAX_CALL = 64
KILL_OPERATIONS = frozenset(
    {
        JobOperation.DURABLE_WRITE,
        JobOperation.COORD_WRITE,
        JobOperation.TARGET_WRITE,
        JobOperation.VAULT_WRITE,
    }
)
"""The calls after which a fault selector may kill the calling process: the writes of the
stores a cross-store step orders (a kill there cuts the step between its writes) — the
durable and coordination stores, and the target and vault, which a step writes before its
durable commit (a declaration's stage fence, a completion's stage, a credential's secret).
Its outcome may also be ``commit`` (the write landed, the process died before the next
one).  Until stop 47 only the first two: a declarer killed between its target fence and
its durable commit was never drawn (a fence that outlived it was never swept)."""


@attrs.frozen
class JobFault:
    """The ``call``-th call of ``operation`` within the step gets ``outcome``; with
    ``kill``, the calling process is killed right after that call (whatever its outcome):
    nothing more of the step runs — no second store's write, no resolution, no record.  A
    kill after a cross-store step's first write is the cut between the two stores (docs/
    jobs.md, *Linearization points of cross-store steps*)."""

    operation: JobOperation
    call: int
    outcome: Outcome
    kill: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "operation": self.operation.value,
            "call": self.call,
            "outcome": self.outcome.value,
        }
        if self.kill:
            out["kill"] = True
        return out

    def label(self) -> str:
        text = f"{self.operation.value}#{self.call}={self.outcome.value}"
        return text + "+kill" if self.kill else text


@attrs.frozen
class JobStep:
    op: str
    worker: str | None = None
    job: str | None = None
    token: int | None = None
    amount: int | None = None
    outcome: JobOutcome | None = None
    service: Service | None = None
    faults: tuple[JobFault, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        for p in PARAMS:
            v = getattr(self, p)
            if v is not None:
                out[p] = v.value if isinstance(v, JobOutcome | Service) else v
        if self.faults:
            out["faults"] = [f.to_json() for f in self.faults]
        return out

    def label(self) -> str:
        parts = [self.op]
        for p in PARAMS:
            v = getattr(self, p)
            if v is not None:
                parts.append(str(v.value if isinstance(v, JobOutcome | Service) else v))
        text = " ".join(parts)
        if self.faults:
            text += " [" + ", ".join(f.label() for f in self.faults) + "]"
        return text


@attrs.frozen
class JobConfig:
    """A run's size and limits (complete and immutable; digested into the trace).

    ``workers`` are the incarnations the steps may use; ``drain_worker`` is a spare
    incarnation only the fair drain starts (so the drain always has a live worker).
    ``handler_timeout``: the ticks an attempt may run by its handler's own timeout
    (``@handler(..., timeout=)``; 0: none — written only when set, so a trace without it
    reads as before); an attempt's timeout is the smaller of it and its job's.
    ``embedded``: the incarnations run the embedded mode (``remora jobs worker`` without
    ``--redis``; :meth:`~remora.sim.jobs.simulation.Simulation.embed`) — written only
    when set.  ``fused_stage``: a completion's stage write commits in its durable
    transaction (:class:`~remora.sim.jobs.simulation.FusedMemoryTarget`, as PostgreSQL's
    target on the durable store's DSN) — the
    memory + SQLite twin of a run over PostgreSQL + Redis; written only when set."""

    jobs: tuple[str, ...] = ("j1", "j2", "j3")
    workers: tuple[str, ...] = ("w1", "w2", "w3")
    drain_worker: str = "wd"
    concurrency: int = 2
    max_attempts: int = 3
    max_progress: int = 2
    lease_ticks: int = 2
    reservation_ticks: int = 2
    global_limit: int = 3
    max_credential_intents: int = 1
    max_coord_losses: int = 2
    max_partitions: int = 3
    steps: int = 1000
    mutation: str | None = None
    handler_timeout: int = 0
    embedded: bool = False
    fused_stage: bool = False

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["jobs"], out["workers"] = list(self.jobs), list(self.workers)
        if self.mutation is None:
            del out["mutation"]
        if not self.handler_timeout:
            del out["handler_timeout"]
        if not self.embedded:
            del out["embedded"]
        if not self.fused_stage:
            del out["fused_stage"]
        return out

    def digest(self) -> str:
        return config_digest(self.to_json())


#: The longest delay (in ticks) a trace's job may be submitted with.
MAX_DELAY_TICKS = 100


@attrs.frozen
class JobKind:
    """How a job is submitted: ``delay`` ticks before it may be enqueued
    (``submit --in``), its named ``queue``, its ``priority`` and the ``timeout`` in ticks
    an attempt of it may run (``submit --timeout``; 0: none — only the production loop
    enforces it).  ``gives_up``: the handler of its first attempt gives up on its own —
    it raises ``Cancelled`` unasked, after staging its first part — which only a handler
    run by the production loop does.  A trace lists only the jobs whose kind is not the
    default (``kinds``; a trace without the field has none, a kind without ``timeout`` or
    ``gives_up`` has none)."""

    delay: int = 0
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    timeout: int = 0
    gives_up: bool = False

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        if not self.timeout:
            del out["timeout"]  # a trace of a kind without one reads as before
        if not self.gives_up:
            del out["gives_up"]
        return out


PLAIN = JobKind()


@attrs.frozen
class JobTrace:
    toolchain: Toolchain
    config: JobConfig
    handlers: dict[str, tuple[JobOutcome, ...]]
    steps: tuple[JobStep, ...]
    drain: bool = True
    kinds: dict[str, JobKind] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": VERSION,
            "implementation": IMPLEMENTATION,
            "toolchain": self.toolchain.to_json(),
            "config_digest": self.config.digest(),
            "config": self.config.to_json(),
            "handlers": {j: [o.value for o in outs] for j, outs in sorted(self.handlers.items())},
        }
        kinds = {j: k.to_json() for j, k in sorted(self.kinds.items()) if k != PLAIN}
        if kinds:
            out["kinds"] = kinds
        out["steps"] = [s.to_json() for s in self.steps]
        out["drain"] = self.drain
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def new_trace(
    config: JobConfig,
    handlers: dict[str, tuple[JobOutcome, ...]],
    steps: tuple[JobStep, ...],
    generator: str | None = None,
    kinds: dict[str, JobKind] | None = None,
) -> JobTrace:
    return JobTrace(current_toolchain(generator), config, handlers, steps, True, dict(kinds or {}))


# -- parsing ----------------------------------------------------------------------------------


def is_job_trace(text: str) -> bool:
    """Whether ``text`` claims to be a job trace (for commands that read both kinds)."""
    try:
        doc = strictjson.loads(text)
    except strictjson.JsonRejected:
        return False  # the worker trace's parser says what is wrong with it
    return isinstance(doc, dict) and doc.get("implementation") == IMPLEMENTATION


def _ids(value: Any, path: str) -> tuple[str, ...]:
    items = tuple(read_name(v, f"{path}[{i}]") for i, v in enumerate(read_list(value, path)))
    if not items:
        raise TraceError(path, "expected at least one name")
    if len(set(items)) != len(items):
        raise TraceError(path, "names repeat")
    return items


def _parse_config(doc: Any, path: str) -> JobConfig:
    ints = (
        "concurrency",
        "max_attempts",
        "max_progress",
        "lease_ticks",
        "reservation_ticks",
        "global_limit",
        "max_credential_intents",
        "steps",
    )
    budgets = ("max_coord_losses", "max_partitions")
    d = read_object(
        doc,
        path,
        ["jobs", "workers", "drain_worker", *ints, *budgets],
        ["mutation", "handler_timeout", "embedded", "fused_stage"],
    )
    jobs = _ids(d["jobs"], f"{path}.jobs")
    workers = _ids(d["workers"], f"{path}.workers")
    drain = read_name(d["drain_worker"], f"{path}.drain_worker")
    if drain in workers:
        raise TraceError(f"{path}.drain_worker", f"{drain!r} is also a step worker")
    values = {k: read_int(d[k], f"{path}.{k}", 1, 10_000) for k in ints}
    values.update({k: read_int(d[k], f"{path}.{k}", 0, 100) for k in budgets})
    mutation = None if "mutation" not in d else read_name(d["mutation"], f"{path}.mutation")
    handler_timeout = read_int(
        d.get("handler_timeout", 0), f"{path}.handler_timeout", 0, MAX_DELAY_TICKS
    )
    embedded = read_bool(d.get("embedded", False), f"{path}.embedded")
    fused_stage = read_bool(d.get("fused_stage", False), f"{path}.fused_stage")
    return JobConfig(
        jobs,
        workers,
        drain,
        mutation=mutation,
        handler_timeout=handler_timeout,
        embedded=embedded,
        fused_stage=fused_stage,
        **values,
    )


def _parse_fault(doc: Any, path: str) -> JobFault:
    d = read_object(doc, path, ["operation", "call", "outcome"], ["kill"])
    op = read_choice(d["operation"], f"{path}.operation", JobOperation, "operation")
    outcome = read_choice(d["outcome"], f"{path}.outcome", Outcome, "outcome")
    kill = "kill" in d
    if kill and d["kill"] is not True:
        raise TraceError(f"{path}.kill", "a kill is written as true (or no field)")
    if kill and op not in KILL_OPERATIONS:
        raise TraceError(f"{path}.kill", f"no kill point after {op.value}")
    if outcome not in FAULT_OUTCOMES[op] and not (kill and outcome is Outcome.COMMIT):
        raise TraceError(f"{path}.outcome", f"{outcome.value!r} is not an outcome of {op.value}")
    return JobFault(op, read_int(d["call"], f"{path}.call", 1, MAX_CALL), outcome, kill)


def _parse_step(doc: Any, path: str, c: JobConfig) -> JobStep:
    if not isinstance(doc, dict) or "op" not in doc:
        read_object(doc, path, ["op"])
    op = read_str(doc["op"], f"{path}.op")
    if op not in OPS:
        raise TraceError(f"{path}.op", f"{op!r} is not a step")
    need = OPS[op]
    d = read_object(doc, path, ["op", *need], ["faults"])
    kw: dict[str, Any] = {}
    if "worker" in need:
        w = read_str(d["worker"], f"{path}.worker")
        if w not in c.workers:
            raise TraceError(f"{path}.worker", f"{w!r} is not a worker of the config")
        kw["worker"] = w
    if "job" in need:
        j = read_str(d["job"], f"{path}.job")
        if j not in c.jobs:
            raise TraceError(f"{path}.job", f"{j!r} is not a job of the config")
        kw["job"] = j
    if "token" in need:
        kw["token"] = read_int(d["token"], f"{path}.token", 1, c.max_attempts)
    if "amount" in need:
        most = CROSS_CALLS if op == "loop-reconcile-crossed" else c.max_progress
        kw["amount"] = read_int(d["amount"], f"{path}.amount", 1, most)
    if "outcome" in need:
        kw["outcome"] = read_choice(d["outcome"], f"{path}.outcome", JobOutcome, "job outcome")
    if "service" in need:
        kw["service"] = read_choice(d["service"], f"{path}.service", Service, "service")
    faults = tuple(
        _parse_fault(f, f"{path}.faults[{i}]")
        for i, f in enumerate(read_list(d.get("faults", []), f"{path}.faults"))
    )
    if "faults" in d and not faults:
        raise TraceError(f"{path}.faults", "an empty list is written as no field")
    return JobStep(op, faults=faults, **kw)


def _check_incarnations(steps: tuple[JobStep, ...]) -> None:
    started: dict[str, int] = {}
    for i, s in enumerate(steps):
        if s.op == "start":
            if s.worker in started:
                raise TraceError(
                    f"trace.steps[{i}].worker",
                    f"incarnation {s.worker!r} was started at step {started[s.worker]}: "
                    "ids are never reused",
                )
            started[str(s.worker)] = i


def loads(text: str) -> JobTrace:
    """Parse and validate a job trace document (see the module docstring)."""
    return from_json(read_document(text))


def from_json(doc: Any) -> JobTrace:
    keys = [
        "version",
        "implementation",
        "toolchain",
        "config_digest",
        "config",
        "handlers",
        "steps",
        "drain",
    ]
    d = read_object(doc, "trace", keys, ["kinds"])
    toolchain = parse_header(d, VERSION, IMPLEMENTATION)
    config = _parse_config(d["config"], "trace.config")
    if read_str(d["config_digest"], "trace.config_digest") != config_digest(d["config"]):
        raise TraceError(
            "trace.config_digest", "does not match the config (the config was changed)"
        )
    h = read_object(d["handlers"], "trace.handlers", [], list(config.jobs))
    handlers = {
        j: tuple(
            read_choice(o, f"trace.handlers.{j}[{i}]", JobOutcome, "job outcome")
            for i, o in enumerate(read_list(v, f"trace.handlers.{j}"))
        )
        for j, v in h.items()
    }
    for j, outs in handlers.items():
        if not outs:
            raise TraceError(f"trace.handlers.{j}", "expected at least one outcome")
    steps = tuple(
        _parse_step(s, f"trace.steps[{i}]", config)
        for i, s in enumerate(read_list(d["steps"], "trace.steps"))
    )
    if len(steps) > config.steps:
        raise TraceError("trace.steps", f"{len(steps)} steps exceed the configured {config.steps}")
    _check_incarnations(steps)
    kinds = {
        j: _parse_kind(v, f"trace.kinds.{j}")
        for j, v in read_object(d.get("kinds", {}), "trace.kinds", [], list(config.jobs)).items()
    }
    drain = read_bool(d["drain"], "trace.drain")
    return JobTrace(toolchain, config, handlers, steps, drain, kinds)


def _parse_kind(doc: Any, path: str) -> JobKind:
    d = read_object(doc, path, [], ["delay", "queue", "priority", "timeout", "gives_up"])
    queue = read_name(d.get("queue", DEFAULT_QUEUE), f"{path}.queue")
    try:
        check_id("queue", queue)
    except InvalidInput as exc:
        raise TraceError(f"{path}.queue", str(exc)) from None
    return JobKind(
        delay=read_int(d.get("delay", 0), f"{path}.delay", 0, MAX_DELAY_TICKS),
        queue=queue,
        priority=read_int(d.get("priority", 0), f"{path}.priority", -MAX_PRIORITY, MAX_PRIORITY),
        timeout=read_int(d.get("timeout", 0), f"{path}.timeout", 0, MAX_DELAY_TICKS),
        gives_up=read_bool(d.get("gives_up", False), f"{path}.gives_up"),
    )


def validate(trace: JobTrace) -> JobTrace:
    """Re-check a trace built in code (e.g. by the reducer) exactly as a file would be."""
    return from_json(json.loads(trace.dumps()))


__all__ = [
    "FAULT_OUTCOMES",
    "KILL_OPERATIONS",
    "IMPLEMENTATION",
    "OPS",
    "VERSION",
    "JobConfig",
    "JobFault",
    "JobStep",
    "JobTrace",
    "TraceError",
    "from_json",
    "is_job_trace",
    "loads",
    "new_trace",
    "JobKind",
    "MAX_DELAY_TICKS",
    "PLAIN",
    "validate",
]
