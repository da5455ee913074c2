"""The job runtime in deterministic simulation: memory coordination, SQLite ``:memory:``
durable store, memory target and vault, a logical clock, one scheduler.

The same runtime code runs here and in production; only the I/O is swapped.  Every method
of :class:`Simulation` (and of its workers and reconciler) is one step the scheduler takes;
faults (``CrashWorker``, ``DropLink``/``RestoreLink``, ``LoseCoordinationState``) and time
(``Tick``) are steps too.  :class:`remora.sim.jobs.refinement.RefinementChecker` wraps the
steps and checks each against the spec.

The simulation owns what the runtime is *given*: each incarnation's context (its process —
a SIGKILL cancels it, :meth:`Simulation.crash`), the links, the clock, and the
:class:`Parts` the runtime is built from (the guards, the reconciler's and the memory
coordination's classes: the spec's, or a planted mutation's,
:mod:`remora.sim.jobs.mutations`).  The runtime is generic over all of them: it never learns
it is simulated.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import attrs

from remora.clock import Clock, Disarm, LogicalClock
from remora.context import Context
from remora.errors import Canceled, RemoraError, WorkerDown
from remora.faults import NO_FAULTS, IOHook
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import DurableStore, open_sqlite
from remora.jobs.guards import SPEC_GUARDS, Guards
from remora.jobs.handlers import Registry
from remora.jobs.io import Actor, Links, MemoryRecorder
from remora.jobs.model import DEFAULT_QUEUE, AttemptId, JobsConfig, NotEnabled, Service
from remora.jobs.reconciler import Reconciler
from remora.jobs.sql import Locked
from remora.jobs.stores import Stores
from remora.jobs.target import MemoryTarget, MemoryVault
from remora.jobs.transactions import Prepare
from remora.jobs.worker import Worker
from remora.sim.jobs.loops import PausingClock

#: The simulation's default limits: as small as the spec's named configurations.
SMALL = JobsConfig(
    max_attempts=2,
    max_progress=2,
    tick_ms=1000,
    lease_ticks=1,
    reservation_ticks=1,
    global_limit=1,
    max_credential_intents=1,
)


@attrs.frozen
class SimConfig:
    """A simulation's size: the jobs and worker incarnations it may use, the limits, and
    the fault budgets (the spec's ``MaxCoordLosses``/``MaxPartitions``)."""

    jobs: tuple[str, ...] = ("j1",)
    workers: tuple[str, ...] = ("w1",)
    concurrency: int = 1
    jobs_config: JobsConfig = SMALL
    max_coord_losses: int = 1
    max_partitions: int = 2
    #: The named queues every incarnation's loop reserves from.
    queues: tuple[str, ...] = (DEFAULT_QUEUE,)
    #: Embedded mode (``remora jobs worker`` without ``--redis``, the default):
    #: :meth:`Simulation.embed`.
    embedded: bool = False
    #: A completion's stage write joins its durable transaction
    #: (:class:`FusedMemoryTarget`), as on PostgreSQL with the target in the durable
    #: store's database.
    fused_stage: bool = False


class FusedMemoryTarget(MemoryTarget):
    """The memory target with :class:`~remora.jobs.postgres.PostgresTarget`'s fused stage
    write (``locked_write``): a completion's stage write runs inside the durable
    transaction that sends and processes the outcome, and is taken back if that
    transaction does not commit (:meth:`~remora.jobs.sqlite.SqliteJobsBackend.
    on_rollback`) — one write, all or nothing, as on PostgreSQL when the target shares the
    durable store's database.  The machines over PostgreSQL + Redis run their memory +
    SQLite twin on it: with a separate stage write there, a fault on the completion left
    the stage written on one run and not on the other (found under the nightly profile,
    stop 46)."""

    def locked_write(
        self, durable: DurableStore, a: AttemptId, progress: int, data: bytes, worker: str
    ) -> Prepare | None:
        on_rollback = getattr(durable.backend, "on_rollback", None)
        if on_rollback is None:
            return None

        def prepare(cur: Any, locked: Locked) -> Locked:
            self._put(a, progress, data, worker)
            on_rollback(lambda: self._unput(a, progress))
            return locked

        return prepare


@attrs.frozen
class Parts:
    """What the simulation builds the runtime from: the guards every store and step
    evaluates, the reconciler's class and the memory coordination store's class.  The
    spec's (:data:`SPEC_PARTS`) unless a mutation is planted
    (:meth:`remora.sim.jobs.mutations.JobMutation.parts`).  Stores built by a ``backends``
    factory are given the guards; their coordination store is the factory's."""

    guards: Guards = SPEC_GUARDS
    reconciler: type[Reconciler] = Reconciler
    coordination: type[MemoryCoordination] = MemoryCoordination
    #: The incarnations' class (a planted bug may subclass it).
    worker: type[Worker] = Worker


SPEC_PARTS = Parts()


class Simulation:
    """Every store in memory, a logical clock, one scheduler (the caller)."""

    def __init__(
        self,
        config: SimConfig = SimConfig(),
        hook: IOHook = NO_FAULTS,
        *,
        backends: Callable[[LogicalClock, JobsConfig], Stores] | None = None,
        parts: Parts = SPEC_PARTS,
        registry: Registry | None = None,
        connect: Callable[[str], DurableStore] | None = None,
        waits: Clock | None = None,
    ) -> None:
        """``backends`` builds the stores on the simulation's clock (default: everything
        in memory); the contract suite passes SQLite files, PostgreSQL and Redis.
        ``parts``: what the runtime is built from (:class:`Parts`).  ``registry``: the
        incarnations' handlers (what their production loops run, :mod:`remora.sim.jobs.
        loops`; None when only single steps are taken).

        ``connect`` and ``waits`` are for runs whose actors run on threads of their own
        (:mod:`remora.sim.jobs.parallel`): ``connect(actor)`` opens a connection of its own
        to the durable store for each actor (the client, the reconciler, each incarnation),
        as separate processes would have; ``waits`` is the clock of the actors' contexts
        (what a busy-lock poll or a retry wait sleeps on — the run's scheduler yields there
        instead of letting logical time pass).  Time itself stays the logical clock's."""
        self.config = config
        self.parts = parts
        self.clock = LogicalClock()
        ctx_clock: Clock = self.clock if waits is None else _Waits(self.clock, waits)
        jc = config.jobs_config
        if backends is not None:
            self.stores = attrs.evolve(backends(self.clock, jc), guards=parts.guards)
        else:
            durable = open_sqlite(":memory:")
            self.stores = Stores(
                durable=durable,
                coordination=parts.coordination(self.clock, jc, parts.guards),
                target=FusedMemoryTarget() if config.fused_stage else MemoryTarget(),
                vault=MemoryVault(),
                clock=self.clock,
                config=jc,
                guards=parts.guards,
            )
        self.recorder = MemoryRecorder()
        self.hook = hook
        #: Each actor's stores: the shared ones, with a durable connection of its own when
        #: ``connect`` is given.
        self.connections: list[DurableStore] = []

        def own(actor: str) -> Stores:
            if connect is None:
                return self.stores
            durable = connect(actor)
            self.connections.append(durable)
            return attrs.evolve(self.stores, durable=durable)

        self.env = Actor("env", Context(ctx_clock), recorder=self.recorder)
        self.client = Actor("client", Context(ctx_clock), hook=hook, recorder=self.recorder)
        self.client_stores = own("client")
        self.reconciler = parts.reconciler(
            own("reconciler"), "reconciler", hook=hook, recorder=self.recorder
        )
        if connect is not None:
            self.reconciler.actor.ctx = Context(ctx_clock)
        #: Each incarnation's process, as its context: :meth:`crash` cancels it.  Its clock
        #: pauses a handler thread of a loop where it would sleep (time moves by ``Tick``);
        #: a parallel run's actors wait on ``waits`` instead.
        self.processes: dict[str, Context] = {
            w: Context(PausingClock(self.clock) if waits is None else ctx_clock)
            for w in config.workers
        }
        self.workers: dict[str, Worker] = {
            w: parts.worker(
                own(w),
                w,
                concurrency=config.concurrency,
                hook=hook,
                recorder=self.recorder,
                links=Links(),
                ctx=self.processes[w],
                registry=registry,
                queues=config.queues,
            )
            for w in config.workers
        }
        #: The incarnations driven by their production loop: they renew their own
        #: heartbeat (:meth:`tick` does not).
        self.looped: set[str] = set()
        #: The time of each incarnation's last heartbeat the simulation saw renewed (its
        #: start, its ticks): the run's own account of how fresh it is, never the runtime's.
        self.beats: dict[str, float] = {}
        self.started: set[str] = set()
        self.down: set[str] = set()
        #: The incarnations whose process was killed (:meth:`crash`).
        self.killed: set[str] = set()
        self.wipes = 0
        self.partitions = 0
        if config.embedded:
            self.embed()

    def embed(self) -> None:
        """Embedded mode (``remora jobs worker`` without ``--redis``): an incarnation's
        coordination is its own process's memory, so nothing another process does (a
        client's cancel, a reconciler elsewhere) raises its mirror's token floors or
        cancel marks — only the incarnation's own refresh from the durable store, under
        the job's lock, before each lease step (:attr:`Worker.durable_guard`, on for every
        incarnation here).  Modelled conservatively on the one shared store: a floor or a
        cancel mark raised by anyone but an incarnation is dropped.  The down marks stay
        shared: in the real embedded mode the incarnations declared down are dead
        processes (the store's worker lock), so their marks are never needed; here a live
        one may be declared down (a durable link dropped past its heartbeat expiry) and
        must still be fenced."""
        for wk in self.workers.values():
            wk.durable_guard = True
        coord = self.stores.coordination
        real_floor, real_cancel = coord.raise_floor, coord.mark_cancel
        incarnations = self.workers.keys()

        def raise_floor(actor: Actor, job: str, token: int) -> None:
            if actor.name in incarnations:
                real_floor(actor, job, token)

        def mark_cancel(actor: Actor, job: str) -> None:
            if actor.name in incarnations:
                real_cancel(actor, job)

        coord.raise_floor = raise_floor  # type: ignore[method-assign]
        coord.mark_cancel = mark_cancel  # type: ignore[method-assign]

    # -- client ---------------------------------------------------------------------------
    def submit(
        self,
        job: str,
        handler: str = "noop",
        payload: Any = None,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        delay: float | None = None,
        timeout: float = 0.0,
    ) -> None:
        """Submit ``job`` (``delay``: seconds on the clock before it may be enqueued;
        ``timeout``: seconds an attempt of it may run, 0 for none)."""
        self.client_stores.submit(
            self.client,
            job,
            handler,
            payload,
            queue=queue,
            priority=priority,
            delay=delay,
            timeout=timeout,
        )

    def cancel(self, job: str) -> None:
        self.client_stores.request_cancel(self.client, job)

    # -- environment steps ------------------------------------------------------------------
    def worker(self, w: str) -> Worker:
        return self.workers[w]

    def start(self, w: str) -> None:
        """``StartIncarnation(w)``."""
        self.workers[w].start()
        self.started.add(w)
        self.beats[w] = self.clock.now()

    def crash(self, w: str) -> None:
        """A SIGKILL: the process is gone without a record — no I/O, nothing recorded, its
        memory frozen as it was (its context is canceled: the incarnation takes no more
        steps).  A stutter: the incarnation stays up in the spec (its attempts executing)
        until :meth:`declare_down` (or a reconcile pass) declares it down once its
        heartbeat expired: that is the ``CrashWorker(w)`` step."""
        if not self.workers[w].up:
            raise WorkerDown(f"worker {w} is down")
        self.processes[w].cancel(Canceled(f"worker {w}: the process was killed"))
        self.killed.add(w)
        self.down.add(w)

    def declare_down(self, w: str) -> bool:
        """``CrashWorker(w)`` declared by the reconciler (its heartbeat expired)."""
        return self.reconciler.declare_down(w)

    def shutdown(self, w: str) -> None:
        """A clean shutdown (``CrashWorker(w)`` recorded durably)."""
        self.workers[w].shutdown()
        self.down.add(w)

    def drop_link(self, w: str, service: Service) -> None:
        """``DropLink(w, service)``."""
        links = self.workers[w].actor.links
        if not self.durably_up(w) or service in links.down:
            raise ValueError(f"DropLink({w}, {service.value}) is not enabled")
        if self.partitions >= self.config.max_partitions:
            raise ValueError("the partition budget is spent")
        links.drop(service)
        self.partitions += 1
        self.env.record(self.env.next_seq(), "DropLink", {"w": w, "service": service.value})

    def durably_up(self, w: str) -> bool:
        """``workerState[w] = WorkerUp`` as the durable store says — not the
        incarnation's own ``up``, which stays True until its loop learns that another
        process declared it down: a link of such an incarnation is the spec's no longer."""
        if not self.workers[w].up:
            return False
        _, rows = self.stores.durable.liveness(self.clock.now())
        return any(wid == w and up for wid, up, _ in rows)

    def restore_link(self, w: str, service: Service) -> None:
        """``RestoreLink(w, service)``."""
        links = self.workers[w].actor.links
        if service not in links.down:
            raise ValueError(f"RestoreLink({w}, {service.value}) is not enabled")
        links.restore(service)
        self.env.record(self.env.next_seq(), "RestoreLink", {"w": w, "service": service.value})

    def wipe(self) -> None:
        """``LoseCoordinationState``: a real wipe of the coordination store."""
        if self.wipes >= self.config.max_coord_losses:
            raise ValueError("the coordination-loss budget is spent")
        self.stores.coordination.wipe(self.env)
        self.wipes += 1

    def tick(self) -> None:
        """``Tick``: one tick of logical time (ages of leases and reservations grow).  Every
        incarnation whose process runs renews its heartbeat on the tick (not a spec step) —
        unless its production loop drives it (:attr:`looped`: the loop's heartbeat timing
        is under test); a killed one does not, so its heartbeat expires."""
        self.clock.advance(self.config.jobs_config.tick_ms)
        self.env.record(self.env.next_seq(), "Tick", {})
        for wk in self.workers.values():
            if wk.up and wk.id not in self.looped:
                with contextlib.suppress(RemoraError, NotEnabled):
                    if wk.heartbeat():  # a link down: the heartbeat is missed
                        self.beats[wk.id] = self.clock.now()

    def close(self) -> None:
        for durable in self.connections:
            durable.close()
        self.stores.close()


class _Waits:
    """The actors' clock when their waits are another clock's (``Simulation(waits=...)``):
    the time is the logical clock's, a sleep is ``waits``'."""

    def __init__(self, time: LogicalClock, waits: Clock) -> None:
        self.time = time
        self.waits = waits

    def now(self) -> float:
        return self.time.now()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Disarm:
        return self.time.call_later(seconds, callback)

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        return self.waits.sleep(seconds, wake)


__all__ = ["SMALL", "SPEC_PARTS", "Parts", "SimConfig", "Simulation"]
