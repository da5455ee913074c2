"""Parallel runs of the job runtime: actors on real threads, judged by the spec.

The sequential job machines (:mod:`remora.testing.job_machines`) run one step at a time: a
store's transaction or coordination script is atomic there, so what happens *between* two
statements of one transaction, on two SQLite connections of one file racing for the write
lock, or between a coordination script's read and its write, is out of their sight.  A
**parallel job example** is a sequential prefix of :class:`~remora.sim.jobs.trace.JobStep`
s and 2-3 branches, each branch the steps of one *actor* (an incarnation ``w1``, ``w2`` ...
or the ``reconciler``: separate processes in production), run on threads of their own
against the real stores — the SQLite durable store over one file with a connection per
actor, and the memory coordination store, target and vault shared by every thread.

Scheduling points (:mod:`remora.sim.schedule`, the worker side's scheduler): the start of
every step, the fault seam's boundaries before and after every store call
(:class:`~remora.sim.parallel.ParallelHook`), every SQL statement (the SQLite backend's
``statement_hook``), every acquire of a shared store's lock (instrumented), and every wait
of an actor's context (an SQLite busy-lock poll yields).  The PCT policy orders them; the
choices are recorded and replay (:class:`~remora.sim.schedule.Replay`).

**What is judged**: the run's recording — every actor's step records, completed by the
durable log, the coordination log and the target's staging
(:func:`~remora.sim.jobs.refinement.merge_records`) — must have an interleaving that keeps
each actor's program order, the durable per-job commit order and the coordination order in
which every step is a step of ``Remora.tla`` from ``Init`` with every invariant and action
property holding (:func:`~remora.sim.jobs.refinement.validate_run`), **ending in alpha of the
stores' final state** (the durable rows, coordination keys, staging, vault and every
incarnation's local attempts).  A step that raises something other than the runtime's
refusals and errors is a finding too.  Failure strings (stable): ``ERROR refinement``,
``ERROR exception``, ``ERROR hang``, ``ERROR deadlock``.

An example is a ``job-parallel-v1`` document (:class:`JobParallelExample`): the config, the
planted stores if any (``module:qualname``), the prefix, the branches, the PCT parameters and
every choice the scheduler made; ``remora sim-jobs --replay FILE [--runs K]`` re-runs it.  The
memory coordination and SQLite's busy waits are controlled points, so a run is deterministic
as long as no thread stalls; a replay still runs ``runs`` times and says how often the
failure came back.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from remora.errors import InvalidInput, RemoraError
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import DurableStore, open_postgres, open_sqlite
from remora.jobs.model import AttemptId, JobsConfig, NotEnabled
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget, MemoryVault
from remora.sim.codec import (
    Toolchain,
    TraceError,
    current_toolchain,
    parse_header,
    read_document,
    read_int,
    read_list,
    read_name,
    read_object,
    read_str,
)
from remora.sim.jobs.refinement import (
    Alpha,
    RefinementViolation,
    constants_for,
    merge_records,
    runtime_view,
    target_staging,
    validate_run,
)
from remora.sim.jobs.run import classify, dispatch
from remora.sim.jobs.simulation import SPEC_PARTS, SimConfig, Simulation
from remora.sim.jobs.trace import JobConfig, JobStep, _parse_config, _parse_step
from remora.sim.parallel import ParallelHook
from remora.sim.runs import import_reference
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

VERSION = 1
IMPLEMENTATION = "job-parallel-v1"
DEFAULT_RUNS = 5
"""How often a replay re-runs an example's schedule by default (``--runs``)."""
RECONCILER = "reconciler"
MAX_BRANCHES = 4
MAX_STEPS = 64
STORES = ("sqlite", "postgres")
"""``sqlite``: an SQLite file (a connection per actor) and the memory coordination store;
``postgres``: a PostgreSQL database (a connection per actor) and Redis (a namespace of its
own per run)."""

DurableFactory = Callable[[str], DurableStore]
"""Opens a connection to the durable store at a path (``open_sqlite`` or a planted one)."""


@attrs.frozen
class JobParallelExample:
    """A prefix, the branches (``(actor, steps)``), the schedule; ``durable`` /
    ``coordination``: ``module:qualname`` of planted stores (a connection factory taking a
    path, a :class:`MemoryCoordination` subclass), None for the real ones."""

    toolchain: Toolchain
    config: JobConfig
    prefix: tuple[JobStep, ...]
    branches: tuple[tuple[str, tuple[JobStep, ...]], ...]
    policy: dict[str, Any]
    decisions: tuple[int, ...] = ()
    durable: str | None = None
    coordination: str | None = None
    stall_ms: int = round(DEFAULT_STALL * 1000)
    failure: str | None = None
    detail: str = ""
    store: str = "sqlite"

    def schedule_policy(self, recorded: bool) -> Policy:
        if recorded and self.decisions:
            return Replay(self.decisions)
        return policy_from_json(self.policy)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": VERSION,
            "implementation": IMPLEMENTATION,
            "toolchain": self.toolchain.to_json(),
            "config": self.config.to_json(),
            "prefix": [s.to_json() for s in self.prefix],
            "branches": [
                {"actor": actor, "steps": [s.to_json() for s in steps]}
                for actor, steps in self.branches
            ],
            "policy": self.policy,
            "decisions": list(self.decisions),
            "stall_ms": self.stall_ms,
            "store": self.store,
        }
        if self.durable is not None:
            out["durable"] = self.durable
        if self.coordination is not None:
            out["coordination"] = self.coordination
        if self.failure is not None:
            out["failure"] = {"kind": self.failure, "detail": self.detail}
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def is_job_parallel(text: str) -> bool:
    """Whether ``text`` (a document's start) is a ``job-parallel-v1`` example."""
    return f'"{IMPLEMENTATION}"' in text


def loads(text: str) -> JobParallelExample:
    return from_json(read_document(text))


def _list(value: Any, path: str, low: int, high: int) -> list[Any]:
    items = read_list(value, path)
    if not low <= len(items) <= high:
        raise TraceError(path, f"expected {low}..{high} items, got {len(items)}")
    return items


def from_json(doc: Any) -> JobParallelExample:
    """Parse and validate an example; :class:`TraceError` names the JSON path of a defect."""
    required = ["version", "implementation", "toolchain", "config", "prefix", "branches"]
    required += ["policy", "decisions", "stall_ms", "store"]
    d = read_object(doc, "$", required, ["durable", "coordination", "failure"])
    toolchain = parse_header(d, VERSION, IMPLEMENTATION)
    config = _parse_config(d["config"], "$.config")
    prefix = tuple(
        _parse_step(s, f"$.prefix[{i}]", config)
        for i, s in enumerate(_list(d["prefix"], "$.prefix", 0, MAX_STEPS))
    )
    branches = []
    for b, doc_b in enumerate(_list(d["branches"], "$.branches", 2, MAX_BRANCHES)):
        path = f"$.branches[{b}]"
        bd = read_object(doc_b, path, ["actor", "steps"])
        actor = read_name(bd["actor"], f"{path}.actor")
        if actor != RECONCILER and actor not in config.workers:
            raise TraceError(f"{path}.actor", f"{actor!r} is neither a worker nor the reconciler")
        steps = tuple(
            _parse_step(s, f"{path}.steps[{i}]", config)
            for i, s in enumerate(_list(bd["steps"], f"{path}.steps", 1, MAX_STEPS))
        )
        for i, s in enumerate(steps):
            if actor_of(s) != actor:
                raise TraceError(f"{path}.steps[{i}]", f"{s.label()} is not a step of {actor}")
        branches.append((actor, steps))
    if len({a for a, _ in branches}) != len(branches):
        raise TraceError("$.branches", "two branches name one actor")
    policy = d["policy"]
    if not isinstance(policy, dict) or policy.get("name") != "pct":
        raise TraceError("$.policy", "a PCT policy is expected")
    try:
        pct = policy_from_json(policy)
        assert isinstance(pct, PCT)
        if sorted(pct.priorities) != list(range(len(branches))):
            raise TraceError("$.policy.priorities", "not one distinct priority per branch")
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError("$.policy", f"not a PCT policy: {exc}") from None
    decisions = tuple(
        read_int(x, f"$.decisions[{i}]", 0, len(branches) - 1)
        for i, x in enumerate(_list(d["decisions"], "$.decisions", 0, 1_000_000))
    )
    store = read_str(d["store"], "$.store")
    if store not in STORES:
        raise TraceError("$.store", f"expected one of {', '.join(STORES)}, got {store!r}")
    if store == "postgres" and "coordination" in d:
        raise TraceError("$.coordination", "a planted memory coordination runs on sqlite only")
    failure = None
    detail = ""
    if "failure" in d:
        fd = read_object(d["failure"], "$.failure", ["kind", "detail"])
        failure = read_str(fd["kind"], "$.failure.kind")
        detail = read_str(fd["detail"], "$.failure.detail")
    return JobParallelExample(
        toolchain,
        config,
        prefix,
        tuple(branches),
        dict(policy),
        decisions,
        None if "durable" not in d else read_str(d["durable"], "$.durable"),
        None if "coordination" not in d else read_str(d["coordination"], "$.coordination"),
        read_int(d["stall_ms"], "$.stall_ms", 1, 10_000),
        failure,
        detail,
        store,
    )


#: Steps the reconciler takes (every other non-environment step is a worker's).
RECONCILER_OPS = frozenset(
    {
        "reconcile",
        "enqueue",
        "publish-cancel-notice",
        "clean-terminal",
        "clear-stale-progress",
        "reconciler-release-reservation",
        "expire-reservation",
        "schedule-retry",
        "finalize-cancel",
        "invalidate-checkpoint",
        "expire-lease",
        "reap",
        "cleanup-stage",
        "reconciler-process-outcome",
        "reconciler-release-lease",
    }
)
#: The environment's and the client's steps: the prefix's only.
PREFIX_ONLY = frozenset(
    {"submit", "cancel", "start", "crash", "shutdown", "drop-link", "restore-link"}
    | {"wipe", "tick"}
)


def actor_of(step: JobStep) -> str | None:
    """The actor that takes ``step`` (None: the environment or the client)."""
    if step.op in PREFIX_ONLY:
        return None
    if step.op in RECONCILER_OPS:
        return RECONCILER
    return step.worker


# -- one run ------------------------------------------------------------------------------


@attrs.frozen
class JobRunResult:
    """One run's verdict (``failure`` None: it passed) and its schedule."""

    failure: str | None
    detail: str
    schedule: ScheduleRecord
    steps: int = 0
    results: tuple[tuple[str, str], ...] = ()  # (actor: step, result kind)


class Services:
    """Where a ``postgres`` example runs: a PostgreSQL database the runs may empty (its
    ``remora_jobs_*`` rows are deleted before each run) and a Redis server (a namespace of
    its own per run, deleted after it)."""

    def __init__(self, dsn: str, redis_url: str) -> None:
        self.dsn = dsn
        self.redis_url = redis_url
        self._tables: list[str] | None = None
        self._namespaces: list[Any] = []

    def reset(self) -> None:
        import psycopg

        open_postgres(self.dsn, injected_clock=True).close()  # migrates on first use
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            if self._tables is None:
                rows = conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    "AND tablename LIKE 'remora_jobs_%' AND tablename <> 'remora_jobs_config'"
                ).fetchall()
                self._tables = sorted(str(r[0]) for r in rows)
            if self._tables:
                conn.execute(f"TRUNCATE {', '.join(self._tables)} RESTART IDENTITY")

    def coordination(self, clock: Any, config: JobsConfig) -> Any:
        from remora.jobs.redis_coordination import RedisCoordination

        coord = RedisCoordination(
            self.redis_url, config, namespace=f"remora-parjobs:{secrets.token_hex(6)}", clock=clock
        )
        self._namespaces.append(coord)
        return coord

    def release(self) -> None:
        from remora.jobs.redis_coordination import namespace_keys

        while self._namespaces:
            coord = self._namespaces.pop()
            keys = namespace_keys(coord.client, coord.ns)
            if keys:
                coord.client.delete(*keys)


def _open_postgres(dsn: str) -> DurableStore:
    return open_postgres(dsn, migrate=False, injected_clock=True)


class _Run:
    """The system under test for one run: fresh stores in a scratch directory, or on the
    services."""

    def __init__(
        self,
        example: JobParallelExample,
        scheduler: Scheduler,
        where: Path,
        services: Services | None = None,
    ) -> None:
        self.example = example
        self.scheduler = scheduler
        self.hook = ParallelHook(scheduler)
        cfg = example.config
        if example.store == "postgres":
            if services is None:
                raise InvalidInput("a postgres example needs a database and Redis (--dsn)")
            services.reset()
            self.path = services.dsn
            real: DurableFactory = _open_postgres
        else:
            self.path = str(where / "durable.sqlite3")
            real = open_sqlite
        self.connect: DurableFactory = (
            real
            if example.durable is None
            else import_reference(example.durable, "example.durable")
        )
        coordination: type[MemoryCoordination] = (
            MemoryCoordination
            if example.coordination is None
            else import_reference(example.coordination, "example.coordination")
        )
        jc = JobsConfig(
            max_attempts=cfg.max_attempts,
            max_progress=cfg.max_progress,
            lease_ticks=cfg.lease_ticks,
            reservation_ticks=cfg.reservation_ticks,
            global_limit=cfg.global_limit,
            max_credential_intents=cfg.max_credential_intents,
        )
        self.sim_config = SimConfig(
            jobs=cfg.jobs,
            workers=cfg.workers,
            concurrency=cfg.concurrency,
            jobs_config=jc,
            max_coord_losses=cfg.max_coord_losses,
            max_partitions=cfg.max_partitions,
        )

        def stores(clock: Any, config: JobsConfig) -> Stores:
            coord = (
                services.coordination(clock, config)
                if services is not None and example.store == "postgres"
                else coordination(clock, config, SPEC_PARTS.guards)
            )
            return Stores(
                durable=self.connect(self.path),
                coordination=coord,
                target=MemoryTarget(),
                vault=MemoryVault(),
                clock=clock,
                config=config,
                guards=SPEC_PARTS.guards,
            )

        self.sim = Simulation(
            self.sim_config,
            self.hook,
            backends=stores,
            connect=self._connection,
            waits=ScheduledClock(scheduler),
        )
        for shared in (self.sim.stores.coordination, self.sim.stores.target, self.sim.stores.vault):
            instrument(shared, scheduler)
        self.submitted: set[str] = set()
        self.results: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.crashed: list[str] = []

    def _connection(self, actor: str) -> DurableStore:
        durable = self.connect(self.path)
        hook = getattr(getattr(durable, "backend", None), "statement_hook", None)
        if callable(hook):
            point = self.scheduler.point
            hook(lambda sql: point(f"{actor} sql " + " ".join(str(sql).split())[:40]))
        return durable

    def _submit(self, job: str) -> None:
        self.sim.submit(job)

    def step(self, who: str, step: JobStep) -> None:
        self.scheduler.point(f"{who}: {step.label()}")
        self.hook.begin({(f.operation, f.call): f.outcome for f in step.faults})
        try:
            result: Any = dispatch(self.sim, step, self.submitted, self._submit)
        except (RemoraError, NotEnabled, ValueError) as exc:
            result = exc
        except Exception as exc:  # a foreign exception out of the runtime: a finding
            result = exc
            with self._lock:
                self.crashed.append(f"{who}: {step.label()}: {type(exc).__name__}: {exc}")
        finally:
            self.hook.begin({})
        with self._lock:
            self.results.append((f"{who}: {step.label()}", classify(result)))

    def execute(self) -> ScheduleRecord:
        for step in self.example.prefix:
            self.step("prefix", step)

        def body(actor: str, steps: tuple[JobStep, ...]) -> Callable[[], None]:
            def run() -> None:
                for step in steps:
                    self.step(actor, step)

            return run

        return self.scheduler.run([body(a, s) for a, s in self.example.branches])

    def judge(self, schedule: ScheduleRecord) -> JobRunResult:
        results = tuple(self.results)
        if self.scheduler.failures:
            exc = self.scheduler.failures[0]
            kind = "hang" if isinstance(exc, ScheduleHang) else "exception"
            kind = "deadlock" if isinstance(exc, Deadlock) else kind
            return JobRunResult(f"ERROR {kind}", f"{type(exc).__name__}: {exc}", schedule)
        if self.crashed:
            return JobRunResult("ERROR exception", self.crashed[0], schedule, 0, results)
        sim = self.sim
        durable = sim.stores.durable
        snap = durable.snapshot()
        merged = merge_records(
            sim.recorder.steps,
            durable.log(),
            sim.stores.coordination.log(),
            target_staging(snap, sim.stores.target.snapshot()),
        )
        cfg = self.sim_config
        constants = constants_for(
            cfg.jobs,
            cfg.workers,
            cfg.jobs_config,
            local_limit=cfg.concurrency,
            max_coord_losses=cfg.max_coord_losses,
            max_partitions=cfg.max_partitions,
        )
        activated = frozenset(
            AttemptId.parse(r.params["a"]) for r in merged if r.action == "ActivateAttempt"
        )
        final = Alpha(constants, cfg.jobs_config)(runtime_view(sim, activated, snap))
        try:
            report = validate_run(merged, constants, cfg.jobs_config, final=final)
        except RefinementViolation as exc:
            return JobRunResult("ERROR refinement", str(exc), schedule, len(merged), results)
        return JobRunResult(None, "", schedule, report.steps, results)

    def close(self) -> None:
        self.sim.close()


def run_once(
    example: JobParallelExample, policy: Policy, services: Services | None = None
) -> JobRunResult:
    """One run of ``example`` under ``policy`` on fresh stores (``services``: where a
    ``postgres`` example runs)."""
    scheduler = Scheduler(policy, stall=example.stall_ms / 1000)
    # in memory where the system has a tmpfs: a run's files are thrown away
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="remora-parjobs-", dir=base) as where:
        run = _Run(example, scheduler, Path(where), services)
        try:
            try:
                schedule = run.execute()
            except ScheduleHang as exc:
                return JobRunResult("ERROR hang", str(exc), scheduler.record())
            return run.judge(schedule)
        finally:
            run.close()
            if services is not None:
                services.release()


def schedule_variants(example: JobParallelExample, steps: int, depth: int) -> Iterator[PCT]:
    """PCT schedules beyond the example's own, seeded by its policy, with ``depth - 1``
    change points over the ``steps`` its first run took."""
    seed = zlib.crc32(json.dumps(example.policy, sort_keys=True).encode())
    for i in itertools.count(1):
        yield PCT.seeded(seed + i, len(example.branches), depth, max(steps, 1))


def explore(
    example: JobParallelExample, runs: int, depth: int, services: Services | None = None
) -> tuple[JobParallelExample, list[JobRunResult]]:
    """The example's own schedule, then up to ``runs - 1`` variants, stopping at the first
    failure; returns the example as it ran last (policy and recorded choices)."""
    results = [run_once(example, example.schedule_policy(recorded=False), services)]
    last = attrs.evolve(example, decisions=results[0].schedule.decisions)
    variants = schedule_variants(example, len(results[0].schedule.decisions), depth)
    while results[-1].failure is None and len(results) < runs:
        variant = attrs.evolve(example, policy=next(variants).to_json())
        results.append(run_once(variant, variant.schedule_policy(recorded=False), services))
        last = attrs.evolve(variant, decisions=results[-1].schedule.decisions)
    return last, results


@attrs.frozen
class JobReplayReport:
    runs: int
    failed: int
    first: JobRunResult | None
    last: JobRunResult

    @property
    def status(self) -> str:
        return "PASS" if self.failed == 0 else "ERROR"

    def document(self, example: JobParallelExample) -> dict[str, Any]:
        shown = self.first or self.last
        return {
            "implementation": IMPLEMENTATION,
            "status": self.status,
            "failure": None if self.first is None else self.first.failure,
            "runs": self.runs,
            "reproduced": self.failed,
            "detail": shown.detail,
            "steps": shown.steps,
            "schedule": {
                "decisions": len(shown.schedule.decisions),
                "stalls": shown.schedule.stalls,
                "diverged": shown.schedule.diverged,
            },
            "recorded": None
            if example.failure is None
            else {"kind": example.failure, "detail": example.detail},
        }


def replay(
    example: JobParallelExample,
    runs: int | None = None,
    *,
    recorded: bool = True,
    services: Services | None = None,
) -> JobReplayReport:
    """Run ``example``'s recorded schedule ``runs`` times (default :data:`DEFAULT_RUNS`)."""
    count = DEFAULT_RUNS if runs is None else runs
    if count < 1:
        raise InvalidInput("--runs must be at least 1")
    first: JobRunResult | None = None
    failed = 0
    last: JobRunResult | None = None
    for _ in range(count):
        last = run_once(example, example.schedule_policy(recorded), services)
        if last.failure is not None:
            failed += 1
            first = first or last
    assert last is not None
    return JobReplayReport(count, failed, first, last)


def example_for(
    config: JobConfig,
    prefix: Sequence[JobStep],
    branches: Sequence[tuple[str, Sequence[JobStep]]],
    policy: PCT,
    *,
    durable: str | None = None,
    coordination: str | None = None,
    generator: str | None = None,
    store: str = "sqlite",
) -> JobParallelExample:
    """An example before it ran (no recorded choices yet)."""
    return JobParallelExample(
        current_toolchain(generator),
        config,
        tuple(prefix),
        tuple((a, tuple(s)) for a, s in branches),
        policy.to_json(),
        durable=durable,
        coordination=coordination,
        store=store,
    )


__all__ = [
    "DEFAULT_RUNS",
    "IMPLEMENTATION",
    "RECONCILER",
    "STORES",
    "Services",
    "JobParallelExample",
    "JobReplayReport",
    "JobRunResult",
    "actor_of",
    "example_for",
    "explore",
    "from_json",
    "is_job_parallel",
    "loads",
    "replay",
    "run_once",
    "schedule_variants",
]
