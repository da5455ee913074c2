"""Refinement: the runtime checked against ``Remora.tla`` (via :mod:`remora.protocol`).

**alpha** (:class:`Alpha`) maps the runtime's state — durable rows, coordination keys, target
staging, vault, the workers' local attempt records, links — to the port's
:class:`~remora.protocol.spec.State`, with the constants derived from the run:

* ``Jobs`` are the run's jobs (a job not yet submitted maps to its ``Init`` values: the
  spec's jobs are accepted in ``Init``); ``Workers`` are a *ghost* incarnation that is
  ``WorkerUp`` from ``Init`` and never acts (``InitialWorkers`` must be non-empty and
  ``CrashWorker`` needs ``OtherCapacity``), then the run's incarnations (``WorkerUnused``
  until ``StartIncarnation``);
* ``MaxAttempts``, ``MaxProgress``, ``LeaseLimit``/``ReservationLimit`` (in ticks),
  ``GlobalLimit``, ``MaxCredentialIntents`` come from :class:`JobsConfig`; ``LocalLimit``
  is the largest worker concurrency; ``FaultsEnabled`` with all three services and the
  fault budgets of the run.

Two ghost facts come from history, not from a store: whether an attempt was ever activated
(an ``ActivateAttempt`` in the coordination log — it decides ``LeaseExpired`` vs
``NoLease`` after a wipe, and whether a revoked attempt is stopped) and the link states.

**Step checking** (:class:`RefinementChecker`, deterministic simulation): every runtime
step records the spec action it performed; the step must be enabled in alpha(before) and the
spec's successor must be exactly alpha(after); a step that records no action must leave alpha
unchanged (a stutter).  Every invariant and action property of the spec is checked on alpha at
every step.

**Trace validation** (:func:`validate_run`, real services): the durable log (per-job commit
order), the coordination log (store order) and every actor's records (program order) are
merged by a depth-first search over the interleavings consistent with all those orders,
replaying each candidate step through the spec (inserting ``Tick`` where a step needs time
to have passed) until every recorded step is placed — as etcd's and CCF's trace validation
do.  A step that took effect but whose actor never wrote its record (killed in between, or
its reply lost and never resolved) is taken from the store that holds it
(:func:`merge_records`): the durable log, the coordination log, or — for a stage write,
whose target keeps no log — the target's staging itself (:func:`target_staging`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from remora.jobs import guards
from remora.jobs.coordination import order_key
from remora.jobs.io import StepRecord
from remora.jobs.model import (
    AttemptId,
    AttemptRow,
    CoordEntry,
    CoordSnapshot,
    CredentialState,
    DurableSnapshot,
    JobsConfig,
    Phase,
    SecretState,
    Service,
    StageInfo,
    Stop,
)
from remora.protocol import spec as S
from remora.protocol.spec import Constants, Remora, State, Step
from remora.protocol.trace import Renderer
from remora.store.dialect import POSTGRES

T = TypeVar("T")

GHOST = "ghost"

_PHASE = {p: S.PHASE_NAMES.index(p.value) for p in Phase}
_CRED = {c: S.CREDENTIAL_INTENT_STATE_NAMES.index(c.value) for c in CredentialState}
_SECRET = {c: S.VAULT_SECRET_STATE_NAMES.index(c.value) for c in SecretState}
_OUTCOME = {name: i for i, name in enumerate(S.OUTCOME_NAMES)}
_SERVICE = {s: S.SERVICE_NAMES.index(s.value) for s in Service}


class RefinementViolation(AssertionError):
    """A runtime step the spec forbids (or an invariant/action property violated on alpha)."""

    def __init__(self, message: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.detail = detail or {}


def constants_for(
    jobs: Sequence[str],
    workers: Sequence[str],
    config: JobsConfig,
    *,
    local_limit: int,
    max_coord_losses: int,
    max_partitions: int,
) -> Constants:
    return Constants(
        Jobs=tuple(jobs),
        Workers=(GHOST, *workers),
        InitialWorkers=frozenset({GHOST}),
        MaxAttempts=config.max_attempts,
        MaxProgress=config.max_progress,
        LeaseLimit=config.lease_ticks,
        ReservationLimit=config.reservation_ticks,
        LocalLimit=local_limit,
        GlobalLimit=config.global_limit,
        FaultsEnabled=True,
        FaultServices=frozenset(S.SERVICE_NAMES),
        MaxCoordLosses=max_coord_losses,
        MaxPartitions=max_partitions,
        MaxCredentialIntents=config.max_credential_intents,
    )


@attrs.frozen
class WorkerView:
    """One incarnation as alpha sees it (``up``: the durable store's worker row)."""

    started: bool
    up: bool
    attempts: Mapping[AttemptId, str]  # local state: authorized / executing / stopped
    down_links: frozenset[Service] = frozenset()
    recovered_links: frozenset[Service] = frozenset()


@attrs.frozen
class RuntimeView:
    """Everything alpha reads."""

    durable: DurableSnapshot
    coordination: CoordSnapshot
    activated: frozenset[AttemptId]
    target: Mapping[AttemptId, StageInfo]
    vault: Mapping[Any, SecretState]
    workers: Mapping[str, WorkerView]
    wipes: int
    partitions: int


class Alpha:
    """The refinement mapping for fixed constants."""

    def __init__(self, constants: Constants, config: JobsConfig) -> None:
        self.k = constants
        self.model = Remora(constants)
        self.config = config
        self.job_index = {j: i for i, j in enumerate(constants.Jobs)}
        self.worker_index = {w: i for i, w in enumerate(constants.Workers)}
        init = self.model.Init()[0]
        self._init = {f: getattr(init, f) for f in S.VARIABLES}

    def attempt(self, a: AttemptId) -> int:
        j = self.job_index[a.job]
        if not 1 <= a.token <= self.k.MaxAttempts:
            raise RefinementViolation(f"token {a.token} of {a.job} is outside 1..MaxAttempts")
        return self.model.AttemptId(j, a.token)

    def attempt_or_none(self, job: str, token: int) -> int:
        return S.NoAttempt if token == 0 else self.attempt(AttemptId(job, token))

    def __call__(self, v: RuntimeView) -> State:
        k, cfg = self.k, self.config
        n: dict[str, Any] = {
            f: list(x) if isinstance(x, tuple) else x for f, x in self._init.items()
        }
        tick, now = cfg.tick_ms, v.coordination.now_ms
        jobs = {r.id: r for r in v.durable.jobs}
        for job_id, j in self.job_index.items():
            r = jobs.get(job_id)
            if r is None:
                continue
            n["phase"][j] = _PHASE[r.phase]
            n["cancelRequested"][j] = r.cancel_requested
            n["currentToken"][j] = r.current_token
            n["authority"][j] = self.attempt_or_none(job_id, r.authority)
            n["dispatchNeeded"][j] = r.dispatch_needed
            n["committedAttempt"][j] = self.attempt_or_none(job_id, r.committed)
            n["checkpoint"][j] = r.checkpoint
            n["checkpointStageOwner"][j] = self.attempt_or_none(job_id, r.checkpoint_owner)
            n["checkpointValid"][j] = r.checkpoint_valid
        c = v.coordination
        for job_id, j in self.job_index.items():
            n["queued"][j] = job_id in c.queued
            res = c.reservations.get(job_id)
            if res is not None:
                n["reservation"][j] = self.worker_index[res.worker]
                n["reservationAge"][j] = guards.age(now, res.at_ms, tick, cfg.reservation_ticks)
            n["cancelNotice"][j] = job_id in c.notices
            p = c.progress.get(job_id)
            if p is not None:
                n["liveProgress"][j] = p.progress
                n["liveProgressAttempt"][j] = self.attempt(p.attempt)
        for a in v.activated:
            if a.job in self.job_index:
                n["leaseState"][self.attempt(a)] = S.LeaseExpired
        for a, lease in c.leases.items():
            if lease.live:
                i = self.attempt(a)
                n["leaseState"][i] = S.LeaseLive
                n["leaseAge"][i] = guards.age(now, lease.at_ms, tick, cfg.lease_ticks)
        n["coordLossCount"] = v.wipes
        for w, wi in self.worker_index.items():
            if w == GHOST:
                continue
            wv = v.workers.get(w)
            if wv is None or not wv.started:
                continue
            n["workerState"][wi] = S.WorkerUp if wv.up else S.WorkerDown
            links = list(n["links"][wi])
            for svc, si in _SERVICE.items():
                if svc in wv.down_links:
                    links[si] = S.LinkDown
                elif svc in wv.recovered_links:
                    links[si] = S.LinkRecovered
            n["links"][wi] = tuple(links)
        n["partitionCount"] = v.partitions
        for row in v.durable.attempts:
            job = jobs[row.job]
            i = self.attempt(row.id)
            info = v.target.get(row.id)
            n["attemptState"][i] = self._attempt_state(row, v)
            n["attemptWorker"][i] = self.worker_index[row.worker]
            n["attemptProgress"][i] = guards.stage_progress(row, info)
            n["initialProgress"][i] = row.initial_progress
            n["resumedFromCheckpoint"][i] = row.resumed
            if row.transferred:
                stage = S.StageNone
            elif info is not None and info.cleaned:
                stage = S.StageCleaned
            elif guards.stage_present(row, info):
                complete = guards.stage_complete(job, row, info)
                stage = S.StageComplete if complete else S.StagePartial
            else:
                stage = S.StageNone
            n["stageState"][i] = stage
            n["pendingOutcome"][i] = _OUTCOME[row.pending.value] if row.pending else S.NoOutcome
        for cred in v.durable.credentials:
            if cred.job not in self.job_index or cred.sequence > k.MaxCredentialIntents:
                raise RefinementViolation(f"credential intent {cred.id} outside the constants")
            ci = self.job_index[cred.job] * k.MaxCredentialIntents + cred.sequence - 1
            secret = v.vault.get(cred.id, SecretState.ABSENT)
            state = cred.state
            if state is CredentialState.ABANDONING and secret is SecretState.DESTROYED:
                state = CredentialState.ABANDONED
            n["credentialIntentState"][ci] = _CRED[state]
            n["vaultSecretState"][ci] = _SECRET[secret]
            n["credentialVersionDurable"][ci] = cred.durable
        values: list[Any] = [tuple(x) if isinstance(x, list) else x for x in n.values()]
        return State._make(values)

    def _attempt_state(self, row: AttemptRow, v: RuntimeView) -> int:
        if row.committed:
            return S.AttemptCommitted
        if row.stop is Stop.FAILED or row.stopped:
            return S.AttemptStopped
        if row.stop is Stop.REVOKED and row.id not in v.activated:
            return S.AttemptStopped
        wv = v.workers.get(row.worker)
        if wv is None or not wv.up:
            return S.AttemptStopped
        local = wv.attempts.get(row.id)
        if local in (None, "authorized") and row.id in v.activated:
            # Its activation took effect (the coordination script) but the process died
            # before it learned so (a kill point between the script and its record, taken
            # from the coordination log): executing, as the spec's ActivateAttempt left it.
            return S.AttemptExecuting
        if local is None:
            return S.AttemptAuthorized  # the worker has not learned of it yet
        return {
            "authorized": S.AttemptAuthorized,
            "executing": S.AttemptExecuting,
            "stopped": S.AttemptStopped,
            "committed": S.AttemptCommitted,
        }[local]

    # -- rendering ---------------------------------------------------------------------------
    def spec_step(self, record: StepRecord) -> Step:
        """The port's :class:`Step` for a recorded runtime step."""
        names = {p: kind for p, kind in _ACTION_PARAMS.get(record.action, ())}
        values: list[int] = []
        for pname, kind in _ACTION_PARAMS[record.action]:
            raw = record.params[pname]
            if kind == "job":
                values.append(self.job_index[raw])
            elif kind == "worker":
                values.append(self.worker_index[raw])
            elif kind == "attempt":
                values.append(self.attempt(AttemptId.parse(raw)))
            elif kind == "intent":
                job, _, seq = raw.rpartition("/")
                values.append(self.job_index[job] * self.k.MaxCredentialIntents + int(seq) - 1)
            elif kind == "service":
                values.append(S.SERVICE_NAMES.index(raw))
            elif kind == "outcome":
                values.append(S.OUTCOME_NAMES.index(raw))
            else:
                values.append(int(raw))
        del names
        return Step(record.action, tuple(values))


def _params_table() -> dict[str, tuple[tuple[str, str], ...]]:
    from remora.protocol.trace import ACTION_PARAMS

    return ACTION_PARAMS


_ACTION_PARAMS = _params_table()


_CHECKED: dict[tuple[Constants, State], tuple[str, ...]] = {}
_CHECKED_MAX = 200_000


def check_state(model: Remora, s: State) -> list[str]:
    """The invariants violated in ``s`` (remembered per state: the machines' examples
    visit the same spec states again and again, and a state's invariants do not change)."""
    key = (model.constants, s)
    bad = _CHECKED.get(key)
    if bad is None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        bad = _CHECKED[key] = tuple(name for name in S.INVARIANTS if not getattr(model, name)(s))
    return list(bad)


def check_transition(model: Remora, s: State, t: State) -> list[str]:
    """The action properties violated by the step ``s -> t``."""
    return [name for name, _ in S.ACTION_PROPERTIES.items() if not getattr(model, name)(s, t)]


def runtime_view(
    sim: Any,
    activated: frozenset[AttemptId],
    durable: DurableSnapshot | None = None,
    *,
    target: Any = None,
    vault: Any = None,
) -> RuntimeView:
    """What alpha reads of a simulation (:class:`~remora.sim.jobs.simulation.Simulation`):
    its stores, its incarnations' local records and links; ``activated``: the attempts an
    ``ActivateAttempt`` record names; ``durable``, ``target``, ``vault``: those stores'
    snapshots (each read if not given)."""
    if durable is None:
        durable = sim.stores.durable.snapshot()
    durable_up = {row.id: row.up for row in durable.workers}
    workers = {
        w: WorkerView(
            started=w in sim.started,
            # ``workerState`` is the durable store's: a process that died without a
            # record (a SIGKILL) is still up — a stutter — until another incarnation
            # declares it down (that declaration is the ``CrashWorker`` step).
            up=durable_up.get(w, False),
            attempts={a: la.state for a, la in wk.attempts.items()},
            down_links=frozenset(wk.actor.links.down),
            recovered_links=frozenset(wk.actor.links.recovered),
        )
        for w, wk in sim.workers.items()
    }
    return RuntimeView(
        durable=durable,
        coordination=sim.stores.coordination.snapshot(),
        activated=activated,
        target=sim.stores.target.snapshot() if target is None else target,
        vault=sim.stores.vault.snapshot() if vault is None else vault,
        workers=workers,
        wipes=sim.wipes,
        partitions=sim.partitions,
    )


def durable_changes(durable: Any) -> int | str | None:
    """A token that is equal at two reads only if the durable store's contents did not
    change between them, or None when the store offers none.

    SQLite: how many rows the simulation's connection has changed so far (its
    ``total_changes``: rolled-back changes count too) — the simulation's SQLite store is
    written by no other connection.  PostgreSQL: the server's current snapshot
    (``pg_current_snapshot()``: the lowest transaction still running, the next id to be
    assigned and the ids in progress).  Every write — committed, rolled back, in this
    database or another — takes a transaction id, and its end removes that id from the
    in-progress list; so an unchanged snapshot means no write began or ended since, and
    what a read saw still holds.  One statement instead of a snapshot of every table."""
    backend = getattr(durable, "backend", None)
    conn = getattr(backend, "_conn", None)
    changes = getattr(conn, "total_changes", None)
    if isinstance(changes, int):
        return changes
    if backend is not None and getattr(backend.dialect, "name", None) == POSTGRES.name:
        row = backend.read_one("snapshot token", "SELECT pg_current_snapshot()::text", ())
        return str(row[0])
    return None


class RefinementChecker:
    """Checks a simulation step by step: wrap every step in :meth:`step`."""

    def __init__(self, sim: Any) -> None:
        from remora.sim.jobs.simulation import Simulation

        assert isinstance(sim, Simulation)
        self.sim = sim
        cfg = sim.config
        self.constants = constants_for(
            cfg.jobs,
            cfg.workers,
            cfg.jobs_config,
            local_limit=cfg.concurrency,
            max_coord_losses=cfg.max_coord_losses,
            max_partitions=cfg.max_partitions,
        )
        self.alpha = Alpha(self.constants, cfg.jobs_config)
        self._seen = 0
        self._active: frozenset[AttemptId] = frozenset()
        self._snap: DurableSnapshot | None = None
        self._changes: int | str | None = None
        #: the target's and the vault's snapshots under ``_changes`` (``snapshot_of``)
        self._covered: dict[str, Any] = {}
        self._durable_dsn = getattr(getattr(sim.stores.durable, "backend", None), "dsn", None)
        self.model = self.alpha.model
        self.renderer = Renderer(self.model)
        #: What alpha last read (after the last step): the judgement's view of the runtime.
        self.last_view = self.view()
        self.state = self.alpha(self.last_view)
        self.history: list[tuple[str, State]] = [("Init", self.state)]
        #: The last step's spec actions, each with the spec state it was taken in.
        self.last_steps: list[tuple[StepRecord, State]] = []
        self.actions: dict[str, int] = {}
        if self.state != self.model.Init()[0]:
            raise RefinementViolation(
                "alpha of the initial runtime is not Init",
                self._diff(self.model.Init()[0], self.state),
            )

    def _activated(self) -> frozenset[AttemptId]:
        """Every attempt an ``ActivateAttempt`` record names (read incrementally)."""
        steps = self.sim.recorder.steps
        fresh = [
            AttemptId.parse(r.params["a"])
            for r in steps[self._seen :]
            if r.action == "ActivateAttempt"
        ]
        self._seen = len(steps)
        if fresh:
            self._active = self._active | frozenset(fresh)
        return self._active

    def durable_snapshot(self) -> DurableSnapshot:
        """The durable snapshot — the last one again while the store's change token
        (:func:`durable_changes`) is unchanged; a store without one is read every time."""
        durable = self.sim.stores.durable
        changes = durable_changes(durable)
        if changes is None or changes != self._changes or self._snap is None:
            self._snap, self._changes = durable.snapshot(), changes
            self._covered = {}
        return self._snap

    def snapshot_of(self, name: str, store: Any) -> Any:
        """``store.snapshot()`` (``name``: the target's or the vault's; call it right after
        :meth:`durable_snapshot`) — the last one again while the durable store's change token
        is unchanged, if ``store`` lives on the durable store's PostgreSQL server (the
        target's and the vault's schemas beside the jobs': the token, the server's current
        snapshot, moves with a write to any of its tables); read every time otherwise."""
        dsn = getattr(getattr(store, "backend", None), "dsn", None)
        if dsn is None or self._changes is None or dsn != self._durable_dsn:
            return store.snapshot()
        if name not in self._covered:
            self._covered[name] = store.snapshot()
        return self._covered[name]

    def view(self) -> RuntimeView:
        durable = self.durable_snapshot()
        st = self.sim.stores
        return runtime_view(
            self.sim,
            self._activated(),
            durable,
            target=self.snapshot_of("target", st.target),
            vault=self.snapshot_of("vault", st.vault),
        )

    def _diff(self, s: State, t: State) -> dict[str, Any]:
        return {"expected": self.renderer.changes(t, s), "actual": self.renderer.changes(s, t)}

    def step(self, op: Callable[[], T]) -> T | Exception:
        """Run one runtime step and check it.  An exception of the step (a refused step,
        an unavailable store) is returned, not raised — the step must then have changed
        nothing the spec sees, or recorded what it did."""
        recorder = self.sim.recorder
        start = len(recorder.steps)
        before = self.state
        result: T | Exception
        try:
            result = op()
        except Exception as exc:
            if isinstance(exc, (RefinementViolation, AssertionError)):
                raise
            result = exc
        view = self.view()
        # a step that changed nothing alpha reads (a refusal, a read) leaves its state
        after = self.state if view == self.last_view else self.alpha(view)
        records = [r for r in recorder.steps[start:] if r.action]
        s = before
        self.last_steps = []
        for record in records:
            self.last_steps.append((record, s))
            step = self.alpha.spec_step(record)
            t = self.model.apply(s, step)
            label = self.renderer.step_label(step)
            if t is None and step.name == "Tick" and self.model.Tick(s) is None:
                t = s  # time passed with nothing to age: a stutter
            if t is None:
                raise RefinementViolation(
                    f"{label} by {record.actor} is not enabled in alpha(before)",
                    {"step": label, "state": self.renderer.state(s)},
                )
            bad = check_transition(self.model, s, t)
            if bad:
                raise RefinementViolation(f"{label} violates {', '.join(bad)}")
            if record is not records[-1] and t != s:
                # A fused transaction's intermediate state (several spec steps, one
                # commit): no other actor observes it, but it is still a spec state.
                bad = check_state(self.model, t)
                if bad:
                    raise RefinementViolation(
                        f"invariants violated on the state after {label}: {', '.join(bad)}"
                    )
            self.actions[record.action] = self.actions.get(record.action, 0) + 1
            s = t
        if s != after:
            labels = [self.renderer.step_label(self.alpha.spec_step(r)) for r in records]
            raise RefinementViolation(
                f"alpha(after) is not the spec's successor of {labels or 'a stutter'}",
                self._diff(s, after),
            )
        bad_inv = check_state(self.model, after) if after != before else []
        if bad_inv:
            raise RefinementViolation(f"invariants violated on alpha: {', '.join(bad_inv)}")
        self.state = after
        self.last_view = view
        if records:
            self.history.append((",".join(r.action for r in records), after))
        return result

    def quiescent(self) -> bool:
        return self.model.SystemQuiescent(self.state)


# -- trace validation of a real run ----------------------------------------------------------


@attrs.frozen
class ValidationReport:
    steps: int
    actions: dict[str, int]
    ticks_inserted: int
    explored: int
    seconds: float


@attrs.frozen
class _Node:
    rec: StepRecord
    preds: tuple[int, ...]


@attrs.frozen
class StagedWrite:
    """What the target holds of one attempt: the highest progress ever staged (a cleaned
    staging keeps it) and the incarnation that ran the attempt (the only writer of its
    staging: a worker stages only the attempts it executes)."""

    attempt: AttemptId
    worker: str
    progress: int


def target_staging(
    durable: DurableSnapshot, target: Mapping[AttemptId, StageInfo]
) -> list[StagedWrite]:
    """The target's staging of every attempt the durable store knows (for
    :func:`merge_records`)."""
    return [
        StagedWrite(row.id, row.worker, target[row.id].progress)
        for row in durable.attempts
        if row.id in target and target[row.id].progress > 0
    ]


TARGET = "target"
"""The ``store`` of a stage write taken from the target (:func:`merge_records`): no program
order places it — the spec's guards do (``AdvanceAttempt`` needs its attempt executing)."""


def merge_records(
    actor_records: Iterable[StepRecord],
    durable_log: Iterable[Any],
    coordination_log: Iterable[CoordEntry] = (),
    staging: Iterable[StagedWrite] = (),
) -> list[StepRecord]:
    """The run's steps: the actors' records, completed with the stores' own logs — a
    durable transition or a coordination script whose reply was lost, or whose actor died
    before writing its record, is in the store's log but not in the actor's records.

    The target keeps no log, but its staging shows the highest progress each attempt
    staged: when that is ahead of every ``AdvanceAttempt`` its worker recorded, the write
    that staged it took effect unrecorded (the process was killed between the write and
    its record, or the reply was lost and the re-read failed too) and is added — as a
    step of ``store`` :data:`TARGET`, which the validation places wherever the spec
    enables it after the attempt's activation (no program order: its position among its
    worker's steps is unknown)."""
    records = list(actor_records)
    by_key: dict[tuple[str, int], StepRecord] = {(r.actor, r.seq): r for r in records}
    staged: dict[str, int] = {}
    seen: dict[tuple[str, str], float] = {}
    for r in records:
        if r.action == "AdvanceAttempt":
            a = str(r.params["a"])
            staged[a] = max(staged.get(a, 0), int(r.params["amount"]))
        if r.action in ("ActivateAttempt", "AdvanceAttempt"):
            seen[(r.actor, str(r.params["a"]))] = r.wall
    for k, w in enumerate(sorted(staging, key=lambda x: (x.attempt, x.worker)), start=1):
        a = str(w.attempt)
        if w.progress > staged.get(a, 0):
            by_key[(w.worker, -k)] = StepRecord(
                w.worker,
                -k,
                "AdvanceAttempt",
                {"a": a, "amount": w.progress},
                TARGET,
                wall=seen.get((w.worker, a), 0.0),
            )
    for e in durable_log:
        key = (e.actor, e.actor_seq)
        if key not in by_key:
            by_key[key] = StepRecord(
                e.actor, e.actor_seq, e.action, e.params, "durable", e.key, e.version
            )
    for c in coordination_log:
        key = (c.actor, c.actor_seq)
        if key not in by_key and c.action:
            by_key[key] = StepRecord(
                c.actor, c.actor_seq, c.action, c.params, "coordination", order=c.order
            )
    return sorted(by_key.values(), key=lambda r: (r.actor, r.seq))


def validate_run(
    records: Sequence[StepRecord],
    constants: Constants,
    config: JobsConfig,
    *,
    budget: int = 2_000_000,
    final: State | None = None,
) -> ValidationReport:
    """Search an interleaving of ``records`` consistent with the durable order (per key, by
    version), the coordination order, every actor's program order, and the lock positions
    of steps taken under a durable lock, in which every step is a spec step from ``Init``
    and every invariant and action property holds (``Tick`` is inserted where a step needs
    time to have passed).  Raises :class:`RefinementViolation` when none exists.

    ``final``: the spec state the run's stores ended in (alpha of them): an interleaving
    that places every step but ends elsewhere is a dead end too — the stores must be what
    the accepted interleaving implies (the parallel runs, :mod:`remora.sim.jobs.parallel`).

    Depth-first, trying ready steps in wall-clock order first (a hint only), remembering
    dead ends as ``(placed steps, spec state)``."""
    started = time.perf_counter()
    alpha = Alpha(constants, config)
    model = alpha.model
    nodes = [r for r in records if r.action or r.store == "durable"]
    n = len(nodes)
    edges: set[tuple[int, int]] = set()
    by_actor: dict[str, list[int]] = {}
    for i, r in enumerate(nodes):
        if r.store != TARGET:
            by_actor.setdefault(r.actor, []).append(i)
    for ids in by_actor.values():
        ids.sort(key=lambda i: nodes[i].seq)
        edges.update(itertools.pairwise(ids))
    durable_at = {(r.key, r.version): i for i, r in enumerate(nodes) if r.store == "durable"}
    for (key, version), i in durable_at.items():
        prev = durable_at.get((key, version - 1))
        if prev is not None:
            edges.add((prev, i))
    for i, r in enumerate(nodes):
        if r.store != "durable" and r.key:
            before = durable_at.get((r.key, r.version))
            after = durable_at.get((r.key, r.version + 1))
            if before is not None:
                edges.add((before, i))
            if after is not None:
                edges.add((i, after))
    coord = sorted(
        (i for i, r in enumerate(nodes) if r.store == "coordination" and r.order),
        key=lambda i: order_key(nodes[i].order),
    )
    edges.update(itertools.pairwise(coord))
    succs: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for x, y in edges:
        succs[x].append(y)
        indeg[y] += 1
    steps = [alpha.spec_step(r) if r.action else None for r in nodes]
    rank = {
        i: k
        for k, i in enumerate(
            sorted(range(n), key=lambda i: (nodes[i].wall, nodes[i].actor, nodes[i].seq))
        )
    }
    max_ticks = max(constants.LeaseLimit, constants.ReservationLimit)
    full = (1 << n) - 1
    explored = 0

    def enabled(s: State, i: int) -> tuple[State, int] | None:
        st = steps[i]
        if st is None:
            return s, 0
        if st.name == "Tick" and model.Tick(s) is None:
            return s, 0  # time passed with nothing to age: a stutter (as step checking)
        cur, used = s, 0
        while True:
            t = model.apply(cur, st)
            if t is not None:
                if check_transition(model, cur, t) or check_state(model, t):
                    return None
                return t, used
            if used >= max_ticks:
                return None
            nxt = model.Tick(cur)
            if nxt is None:
                return None
            cur, used = nxt, used + 1

    ready: set[int] = {i for i in range(n) if indeg[i] == 0}

    def place(i: int) -> None:
        ready.discard(i)
        for y in succs[i]:
            indeg[y] -= 1
            if indeg[y] == 0:
                ready.add(y)

    def unplace(i: int) -> None:
        for y in succs[i]:
            if indeg[y] == 0:
                ready.discard(y)
            indeg[y] += 1
        ready.add(i)

    def options() -> Iterator[int]:
        return iter(sorted(ready, key=rank.__getitem__))

    failed: set[tuple[int, State]] = set()
    s0 = model.Init()[0]
    if n == 0 and final is not None and final != s0:
        raise RefinementViolation("no step was recorded, yet the stores are not in Init")
    # frame: [state before, remaining options, chosen node, ticks used]
    frames: list[list[Any]] = [[s0, options(), None, 0]]
    done = 0
    while frames and done != full:
        f = frames[-1]
        if f[2] is not None:  # backtrack this frame's previous choice
            done &= ~(1 << f[2])
            unplace(f[2])
            f[2] = None
        for i in f[1]:
            explored += 1
            if explored > budget:
                raise RefinementViolation(f"trace validation gave up after {budget} candidates")
            placed = enabled(f[0], i)
            if placed is None:
                continue
            t, used = placed
            nd = done | (1 << i)
            if (nd, t) in failed:
                continue
            if nd == full and final is not None and t != final:
                failed.add((nd, t))
                continue
            f[2], f[3] = i, used
            done = nd
            place(i)
            frames.append([t, options(), None, 0])
            break
        else:
            failed.add((done, f[0]))
            frames.pop()
            if not frames:
                break
    if done != full:
        stuck = [nodes[i] for i in sorted(i for i in range(n) if indeg[i] == 0)[:3]]
        ending = " ending in the stores' final state" if final is not None else ""
        raise RefinementViolation(
            f"no interleaving of the recorded run is a behaviour of the spec{ending} "
            f"({n} steps, {explored} candidates; first ready: "
            f"{[f'{x.actor}:{x.action}{x.params}' for x in stuck]})"
        )
    actions: dict[str, int] = {}
    ticks = 0
    for f in frames[:-1]:
        i = f[2]
        ticks += f[3]
        if steps[i] is not None:
            actions[nodes[i].action] = actions.get(nodes[i].action, 0) + 1
    return ValidationReport(
        steps=sum(1 for st in steps if st is not None),
        actions=actions,
        ticks_inserted=ticks,
        explored=explored,
        seconds=time.perf_counter() - started,
    )


def constants_of_run(
    records: Sequence[StepRecord],
    jobs: Sequence[str],
    workers: Sequence[str],
    config: JobsConfig,
    *,
    local_limit: int,
) -> Constants:
    """The constants of a recorded run: its jobs and incarnations, the deployment's limits,
    its number of wipes."""
    wipes = sum(1 for r in records if r.action == "LoseCoordinationState")
    return constants_for(
        jobs, workers, config, local_limit=local_limit, max_coord_losses=wipes, max_partitions=0
    )


__all__ = [
    "GHOST",
    "Alpha",
    "RefinementChecker",
    "RefinementViolation",
    "RuntimeView",
    "StagedWrite",
    "TARGET",
    "ValidationReport",
    "WorkerView",
    "check_state",
    "check_transition",
    "constants_for",
    "constants_of_run",
    "merge_records",
    "runtime_view",
    "target_staging",
    "validate_run",
]
