"""The job runtime's I/O seam: operations, actors, per-worker links and step records.

Every store call of the runtime goes through :func:`remora.faults.controlled_call` (the same
seam as the worker lifecycle: commit, abort, unknown-committed, unknown-aborted, delay) via
:func:`io_call`, after the actor's :class:`Links` gate: a dropped link to a service makes
that actor's calls to it fail with :class:`~remora.errors.Unavailable`.  An actor given an
:class:`~remora.worker.outage.OutageWatch` (a production worker and its reconciler) reports
every call's end to it: an outage is seen from every call site, whichever thread made it.

Every runtime step records the spec action it performed (:class:`StepRecord`) with the
actor and the actor's own sequence number, so a run can be checked step by step (in
simulation) or by merging the stores' logs (on real services); see
:mod:`remora.sim.jobs.refinement`.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import attrs

from remora.context import Context
from remora.errors import Unavailable, UnknownResult
from remora.faults import NO_FAULTS, IOCall, IOHook, controlled_call
from remora.jobs.actions import Action
from remora.jobs.model import Service
from remora.worker.outage import OutageWatch

T = TypeVar("T")


class JobOperation(enum.Enum):
    """The modeled calls of the job runtime (fault selectors name these)."""

    DURABLE_WRITE = "durable-write"
    DURABLE_READ = "durable-read"
    COORD_WRITE = "coord-write"
    COORD_READ = "coord-read"
    TARGET_WRITE = "target-write"
    TARGET_READ = "target-read"
    VAULT_WRITE = "vault-write"
    VAULT_READ = "vault-read"


SERVICE_OF: dict[JobOperation, Service] = {
    JobOperation.DURABLE_WRITE: Service.DURABLE,
    JobOperation.DURABLE_READ: Service.DURABLE,
    JobOperation.COORD_WRITE: Service.COORDINATION,
    JobOperation.COORD_READ: Service.COORDINATION,
    JobOperation.TARGET_WRITE: Service.TARGET,
    JobOperation.TARGET_READ: Service.TARGET,
    # The vault is reached over the durable link (it is the durable store's schema or a
    # directory beside it); the spec gives credential actions no link guard.
    JobOperation.VAULT_WRITE: Service.DURABLE,
    JobOperation.VAULT_READ: Service.DURABLE,
}

#: How an operator's line names each service (:class:`~remora.worker.outage.OutageWatch`).
SERVICE_NAMES: dict[Service, str] = {
    Service.DURABLE: "the durable store",
    Service.COORDINATION: "the coordination store",
    Service.TARGET: "the target staging",
}


@attrs.frozen
class StepRecord:
    """One runtime step: the spec action it implements (``""`` for a step the spec does not
    see, e.g. a read or a mirror write) and where it is ordered.

    ``store`` is ``"durable"`` (ordered by ``(key, version)`` of the durable log),
    ``"coordination"`` (ordered by ``order``, the coordination log position) or ``"local"``
    (ordered only by the actor's program order)."""

    actor: str
    seq: int
    action: str
    params: dict[str, Any]
    store: str = "local"
    key: str = ""
    version: int = 0
    order: str = ""
    wall: float = 0.0  # wall-clock time of the record: a search hint, never a constraint
    #: What the step observed beside the spec's parameters (an accepted failure's
    #: ``error``, the attempt's ``ran`` seconds, the job's ``waited`` seconds): metrics and
    #: logs read them, the checkers never do.  Omitted from the JSON when empty.
    facts: dict[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Spelled out rather than ``attrs.asdict`` (a recursive walk): every recorded step
        # of a worker goes through here (a few per cent of a busy worker's CPU).
        out: dict[str, Any] = {
            "actor": self.actor,
            "seq": self.seq,
            "action": self.action,
            "params": dict(self.params),
            "store": self.store,
            "key": self.key,
            "version": self.version,
            "order": self.order,
            "wall": self.wall,
        }
        if self.facts:
            out["facts"] = dict(self.facts)
        return out


class Recorder(Protocol):
    def record(self, step: StepRecord) -> None: ...


class MemoryRecorder:
    """Keeps every record in a list (simulation; tests)."""

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []
        self._lock = threading.Lock()

    def record(self, step: StepRecord) -> None:
        with self._lock:
            self.steps.append(step)


class FileRecorder:
    """Appends records as JSON lines to a file (one per process); each line is flushed."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8")

    def record(self, step: StepRecord) -> None:
        line = json.dumps(step.to_json(), sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class NullRecorder:
    def record(self, step: StepRecord) -> None:
        return None


NULL_RECORDER = NullRecorder()


class Links:
    """One actor's links to the three services (``links[w]``).  Production links are always
    up; a simulation or a test drops and restores them."""

    def __init__(self) -> None:
        self.down: set[Service] = set()
        self.recovered: set[Service] = set()

    def drop(self, service: Service) -> None:
        self.down.add(service)
        self.recovered.discard(service)

    def restore(self, service: Service) -> None:
        self.down.discard(service)
        self.recovered.add(service)

    def check(self, service: Service) -> None:
        if service in self.down:
            raise Unavailable(f"link to {service.value} is down")

    def reachable(self, service: Service) -> bool:
        return service not in self.down


class Actor:
    """Who performs steps: a worker incarnation, a reconciler, a client.  Carries the fault
    hook, the links, the recorder and the program-order counter."""

    def __init__(
        self,
        name: str,
        ctx: Context,
        *,
        hook: IOHook = NO_FAULTS,
        recorder: Recorder = NULL_RECORDER,
        links: Links | None = None,
        watch: OutageWatch | None = None,
    ) -> None:
        self.name = name
        self.ctx = ctx
        self.hook = hook
        self.recorder = recorder
        self.links = links or Links()
        #: Told how each call ended (None: nobody watches for outages).
        self.watch = watch
        self._seq = 0
        self._lock = threading.Lock()
        #: ``{job: version}`` while this actor holds jobs' durable locks (its steps on other
        #: stores are then ordered between that version of their job and the next one).
        self.held: dict[str, int] | None = None

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def record(
        self,
        seq: int,
        action: str,
        params: dict[str, Any],
        *,
        store: str = "local",
        key: str = "",
        version: int = 0,
        order: str = "",
        facts: dict[str, Any] | None = None,
    ) -> None:
        if self.held and store != "durable":
            if key in self.held:  # one of several jobs held: the step names its job
                version = self.held[key]
            elif len(self.held) == 1:
                ((key, version),) = self.held.items()
        self.recorder.record(
            StepRecord(
                self.name,
                seq,
                action,
                params,
                store,
                key,
                version,
                order,
                time.time(),
                dict(facts) if facts else {},
            )
        )


def io_call(actor: Actor, operation: JobOperation, key: str, effect: Callable[[bool], T]) -> T:
    """One modeled call of ``actor``: the link gate, then the controlled seam; its end is
    told to the actor's outage watch, if it has one (a lost reply counts as a failure)."""
    service = SERVICE_OF[operation]
    watch = actor.watch
    if watch is None:
        actor.links.check(service)
        # The seam accepts any operation enum (those it does not list accept every outcome).
        return controlled_call(actor.hook, IOCall(operation, 0), actor.ctx, effect)
    started = watch.now()
    try:
        actor.links.check(service)
        result = controlled_call(actor.hook, IOCall(operation, 0), actor.ctx, effect)
    except (Unavailable, UnknownResult) as exc:
        watch.failed(SERVICE_NAMES[service], exc)
        raise
    watch.answered(SERVICE_NAMES[service], started)
    return result


def resolved_call(
    actor: Actor,
    operation: JobOperation,
    key: str,
    effect: Callable[[bool], T],
    applied: Callable[[], bool],
    done: Callable[[], T],
) -> T:
    """A write through :func:`io_call` whose lost reply (:class:`UnknownResult`) is resolved
    by re-reading the store: ``applied()`` — it happened, the result is ``done()`` — or not,
    and :class:`~remora.errors.Unavailable` tells the caller it may try again.  Never a
    blind retry."""
    try:
        return io_call(actor, operation, key, effect)
    except UnknownResult:
        if applied():
            return done()
        raise Unavailable(
            f"{operation.value} of {key}: a re-read shows it did not happen"
        ) from None


__all__ = [
    "NULL_RECORDER",
    "Actor",
    "LOGGED_EVENTS",
    "SERVICE_NAMES",
    "FileRecorder",
    "LogRecorder",
    "TeeRecorder",
    "JobOperation",
    "Links",
    "MemoryRecorder",
    "NullRecorder",
    "Recorder",
    "StepRecord",
    "io_call",
    "resolved_call",
]


#: The attempt transitions an operator sees in a worker's log (spec action → event).
LOGGED_EVENTS: dict[str, str] = {
    Action.RESERVE: "reserve",
    Action.AUTHORIZE_ATTEMPT: "authorize",
    Action.ACTIVATE_ATTEMPT: "start",
    Action.PERSIST_CHECKPOINT: "checkpoint",
    Action.SEND_OUTCOME: "outcome",
    Action.ACCEPT_SUCCESS: "accept",
    Action.ACCEPT_RETRYABLE_FAILURE_WITH_BUDGET: "accept",
    Action.ACCEPT_RETRYABLE_FAILURE_EXHAUSTED: "accept",
    Action.ACCEPT_PERMANENT_FAILURE: "accept",
    Action.REJECT_OUTCOME: "reject",
    Action.COOPERATIVE_STOP: "stop",
    Action.EXPIRE_LEASE: "reap",
    Action.EXPIRE_RESERVATION: "reap",
    Action.REAP_LOST_ATTEMPT: "reap",
    Action.FINALIZE_CANCEL: "cancelled",
    Action.CRASH_WORKER: "declare-down",
}


class LogRecorder:
    """One line per attempt transition (:data:`LOGGED_EVENTS`) on a text stream: ``text``
    (``time event action key=value…``) or ``json`` (one object a line).  Writing never
    fails the step: a broken stream is ignored."""

    def __init__(self, stream: Any, fmt: str = "text") -> None:
        if fmt not in ("text", "json"):
            raise ValueError(f"log format {fmt!r}: text or json")
        self.stream = stream
        self.fmt = fmt
        self._lock = threading.Lock()

    def record(self, step: StepRecord) -> None:
        event = LOGGED_EVENTS.get(step.action)
        if event is None:
            return
        now = time.time()
        if self.fmt == "json":
            line = json.dumps(
                {
                    "ts": round(now, 3),
                    "event": event,
                    "action": step.action,
                    "actor": step.actor,
                    **{k: v for k, v in step.params.items() if k not in ("ts", "event")},
                },
                sort_keys=True,
                default=str,
            )
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            fields = " ".join(f"{k}={v}" for k, v in sorted(step.params.items()))
            line = f"{stamp}Z {event} {step.action} by={step.actor} {fields}".rstrip()
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass


class TeeRecorder:
    """Every record to each of several recorders."""

    def __init__(self, *recorders: Recorder) -> None:
        self.recorders = recorders

    def record(self, step: StepRecord) -> None:
        for r in self.recorders:
            r.record(step)
