"""Executable port of ``Remora.tla`` (module ``Remora``).

Every CONSTANT, VARIABLE, helper operator, action, invariant and action property of the
module has a Python counterpart that carries the TLA+ name (see ``docs/protocol.md`` for the
complete table).  The port is written to be read side by side with the spec: each action
checks its conjuncts in the order the spec lists them and builds the successor from exactly
the primed variables the spec assigns.

Representation
--------------
* Model values for jobs and workers are indices (``0 .. n-1``) into
  :attr:`Constants.Jobs` / :attr:`Constants.Workers`; ``NoWorker`` is ``-1``.
* An attempt id ``[job |-> j, token |-> t]`` is the index ``j * MaxAttempts + t - 1`` into
  :attr:`Remora.AttemptIds`; ``NoAttempt`` (``[job |-> NoJob, token |-> 0]``) is ``-1``.
* A credential intent ``[job |-> j, sequence |-> q]`` is the index
  ``j * MaxCredentialIntents + q - 1``.
* The string constants of the module (``Queued``, ``LinkDown``, ...) are small ``int`` codes;
  ``*_NAMES`` tuples give back the TLA+ strings for output.
* A :class:`State` is a ``NamedTuple`` whose fields are the module's VARIABLES in declaration
  order; every function-valued variable is a ``tuple`` indexed as above (``links`` is a tuple
  per worker of a tuple per service).  States are immutable and hashable.

An action is a method ``Action(state, *params) -> State | None`` (``None`` when its guard is
false).  Invariants are ``Inv(state) -> bool``; the step predicates of the action properties
are ``Step(state, successor) -> bool``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any, NamedTuple, TypeAlias

from remora.protocol.errors import ConfigError, SpecEvaluationError

# ---------------------------------------------------------------------------------------------
# String constants of the module (encoded as small ints).
# ---------------------------------------------------------------------------------------------
Queued, Running, RetryWait, Cancelling, Succeeded, Failed, Cancelled = range(7)
PHASE_NAMES = ("Queued", "Running", "RetryWait", "Cancelling", "Succeeded", "Failed", "Cancelled")
Phases = frozenset(range(7))
TerminalPhases = frozenset({Succeeded, Failed, Cancelled})

WorkerUnused, WorkerUp, WorkerDown = range(3)
WORKER_STATE_NAMES = ("WorkerUnused", "WorkerUp", "WorkerDown")
WorkerStates = frozenset(range(3))

CoordSvc, DurableSvc, TargetSvc = range(3)
SERVICE_NAMES = ("Coordination", "Durable", "Target")
Services = (CoordSvc, DurableSvc, TargetSvc)

LinkUp, LinkDown, LinkRecovered = range(3)
LINK_STATE_NAMES = ("LinkUp", "LinkDown", "LinkRecovered")
LinkStates = frozenset(range(3))

AttemptUnused, AttemptAuthorized, AttemptExecuting, AttemptStopped, AttemptCommitted = range(5)
ATTEMPT_STATE_NAMES = (
    "AttemptUnused",
    "AttemptAuthorized",
    "AttemptExecuting",
    "AttemptStopped",
    "AttemptCommitted",
)
AttemptStates = frozenset(range(5))

NoLease, LeaseLive, LeaseExpired = range(3)
LEASE_STATE_NAMES = ("NoLease", "LeaseLive", "LeaseExpired")
LeaseStates = frozenset(range(3))

StageNone, StagePartial, StageComplete, StageCleaned = range(4)
STAGE_STATE_NAMES = ("StageNone", "StagePartial", "StageComplete", "StageCleaned")
StageStates = frozenset(range(4))

(
    CredentialIntentUnused,
    CredentialIntentPrepared,
    CredentialIntentWriting,
    CredentialIntentWritten,
    CredentialIntentCommitted,
    CredentialIntentAbandoning,
    CredentialIntentAbandoned,
) = range(7)
CREDENTIAL_INTENT_STATE_NAMES = (
    "CredentialIntentUnused",
    "CredentialIntentPrepared",
    "CredentialIntentWriting",
    "CredentialIntentWritten",
    "CredentialIntentCommitted",
    "CredentialIntentAbandoning",
    "CredentialIntentAbandoned",
)
CredentialIntentStates = frozenset(range(7))

VaultSecretAbsent, VaultSecretLive, VaultSecretDestroyed = range(3)
VAULT_SECRET_STATE_NAMES = ("VaultSecretAbsent", "VaultSecretLive", "VaultSecretDestroyed")
VaultSecretStates = frozenset(range(3))

NoOutcome, WantsSuccess, WantsRetryableFailure, WantsPermanentFailure = range(4)
OUTCOME_NAMES = ("NoOutcome", "WantsSuccess", "WantsRetryableFailure", "WantsPermanentFailure")
FailureOutcomes = frozenset({WantsRetryableFailure, WantsPermanentFailure})
OutcomeRequests = frozenset({NoOutcome, WantsSuccess}) | FailureOutcomes

#: ``NoAttempt == [job |-> NoJob, token |-> 0]``
NoAttempt = -1
#: ``NoWorker`` (a model value outside ``Workers``).
NoWorker = -1

BOOLEAN = frozenset({False, True})

IntTuple: TypeAlias = tuple[int, ...]
BoolTuple: TypeAlias = tuple[bool, ...]


class Constants(NamedTuple):
    """The CONSTANTS of the module.  ``Jobs``/``Workers`` hold model-value names."""

    Jobs: tuple[str, ...]
    Workers: tuple[str, ...]
    InitialWorkers: frozenset[str]
    MaxAttempts: int
    MaxProgress: int
    LeaseLimit: int = 1
    ReservationLimit: int = 1
    LocalLimit: int = 1
    GlobalLimit: int = 1
    FaultsEnabled: bool = False
    FaultServices: frozenset[str] = frozenset()
    MaxCoordLosses: int = 0
    MaxPartitions: int = 0
    MaxCredentialIntents: int = 0
    NoJob: str = "NoJob"
    NoWorker: str = "NoWorker"


class State(NamedTuple):
    """The VARIABLES of the module, in declaration order."""

    # DurableStore authority.
    phase: IntTuple
    cancelRequested: BoolTuple
    currentToken: IntTuple
    authority: IntTuple
    dispatchNeeded: BoolTuple
    committedAttempt: IntTuple
    checkpoint: IntTuple
    checkpointStageOwner: IntTuple
    checkpointValid: BoolTuple
    # CoordinationStore (reconstructible).
    queued: BoolTuple
    reservation: IntTuple
    reservationAge: IntTuple
    leaseState: IntTuple
    leaseAge: IntTuple
    cancelNotice: BoolTuple
    liveProgress: IntTuple
    liveProgressAttempt: IntTuple
    coordLossCount: int
    # Worker incarnations, per-service links, partition budget.
    workerState: IntTuple
    links: tuple[IntTuple, ...]
    partitionCount: int
    # Attempts, staging, delayed outcome requests.
    attemptState: IntTuple
    attemptWorker: IntTuple
    attemptProgress: IntTuple
    initialProgress: IntTuple
    resumedFromCheckpoint: BoolTuple
    stageState: IntTuple
    pendingOutcome: IntTuple
    # Credential write ownership across DurableStore and Vault.
    credentialIntentState: IntTuple
    vaultSecretState: IntTuple
    credentialVersionDurable: BoolTuple


VARIABLES: tuple[str, ...] = State._fields
(
    _phase,
    _cancelRequested,
    _currentToken,
    _authority,
    _dispatchNeeded,
    _committedAttempt,
    _checkpoint,
    _checkpointStageOwner,
    _checkpointValid,
    _queued,
    _reservation,
    _reservationAge,
    _leaseState,
    _leaseAge,
    _cancelNotice,
    _liveProgress,
    _liveProgressAttempt,
    _coordLossCount,
    _workerState,
    _links,
    _partitionCount,
    _attemptState,
    _attemptWorker,
    _attemptProgress,
    _initialProgress,
    _resumedFromCheckpoint,
    _stageState,
    _pendingOutcome,
    _credentialIntentState,
    _vaultSecretState,
    _credentialVersionDurable,
) = range(31)

durableVars = VARIABLES[0:9]
coordinationVars = VARIABLES[9:18]
workerVars = VARIABLES[18:21]
attemptVars = VARIABLES[21:28]
credentialVars = VARIABLES[28:31]
jobVars = durableVars + coordinationVars + workerVars + attemptVars
vars = jobVars + credentialVars

_new_state: Callable[[type[State], list[Any]], State] = tuple.__new__


def _mk(values: list[Any]) -> State:
    return _new_state(State, values)


def _ex(t: tuple[Any, ...], i: int, v: Any) -> tuple[Any, ...]:
    """``[t EXCEPT ![i] = v]``."""
    return (*t[:i], v, *t[i + 1 :])


class Step(NamedTuple):
    """One action instance of ``Next``: the TLA+ action name and its parameters."""

    name: str
    params: tuple[int, ...]


class Remora:
    """Module ``Remora`` instantiated with a set of :class:`Constants`.

    Subclass and override a method to plant a mutation (tests do this); the explorer only
    calls methods through the instance.
    """

    def __init__(self, constants: Constants) -> None:
        self.constants = constants
        self._check_assumptions(constants)
        self.Jobs: range = range(len(constants.Jobs))
        self.Workers: range = range(len(constants.Workers))
        self.InitialWorkers = frozenset(
            i for i, w in enumerate(constants.Workers) if w in constants.InitialWorkers
        )
        self.MaxAttempts = constants.MaxAttempts
        self.MaxProgress = constants.MaxProgress
        self.LeaseLimit = constants.LeaseLimit
        self.ReservationLimit = constants.ReservationLimit
        self.LocalLimit = constants.LocalLimit
        self.GlobalLimit = constants.GlobalLimit
        self.FaultsEnabled = constants.FaultsEnabled
        self.FaultServices = frozenset(SERVICE_NAMES.index(s) for s in constants.FaultServices)
        self.MaxCoordLosses = constants.MaxCoordLosses
        self.MaxPartitions = constants.MaxPartitions
        self.MaxCredentialIntents = constants.MaxCredentialIntents
        #: ``AttemptIds`` as indices; ``AttemptsOf[j]`` are the ids of job ``j`` by token.
        self.AttemptIds: range = range(len(constants.Jobs) * constants.MaxAttempts)
        self.AttemptsOf: tuple[range, ...] = tuple(
            range(j * self.MaxAttempts, (j + 1) * self.MaxAttempts) for j in self.Jobs
        )
        self.CredentialIntents: range = range(len(constants.Jobs) * constants.MaxCredentialIntents)
        self.Services = Services
        self._steps: tuple[Step, ...] | None = None
        self._typeok: list[tuple[int, str, int, int, int]] | None = None
        self._typeok_memo: dict[tuple[int, tuple[int, ...]], bool] = {}

    # -- ASSUME ----------------------------------------------------------------------------
    @staticmethod
    def _check_assumptions(k: Constants) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise ConfigError(f"ASSUME violated: {what}")

        need(len(k.Jobs) > 0, "Jobs # {}")
        need(len(set(k.Jobs)) == len(k.Jobs), "Jobs are distinct model values")
        need(len(k.Workers) > 0, "Workers # {}")
        need(len(set(k.Workers)) == len(k.Workers), "Workers are distinct model values")
        need(k.InitialWorkers <= frozenset(k.Workers), "InitialWorkers \\subseteq Workers")
        need(len(k.InitialWorkers) > 0, "InitialWorkers # {}")
        for name in (
            "MaxAttempts",
            "MaxProgress",
            "LeaseLimit",
            "ReservationLimit",
            "LocalLimit",
            "GlobalLimit",
        ):
            v = getattr(k, name)
            need(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                f"{name} \\in Nat \\ {{0}}",
            )
        need(isinstance(k.FaultsEnabled, bool), "FaultsEnabled \\in BOOLEAN")
        need(
            k.FaultServices <= frozenset(SERVICE_NAMES),
            'FaultServices \\subseteq {"Coordination", "Durable", "Target"}',
        )
        for name in ("MaxCoordLosses", "MaxPartitions", "MaxCredentialIntents"):
            v = getattr(k, name)
            need(isinstance(v, int) and not isinstance(v, bool) and v >= 0, f"{name} \\in Nat")
        need(k.NoJob not in k.Jobs, "NoJob \\notin Jobs")
        need(k.NoWorker not in k.Workers, "NoWorker \\notin Workers")

    # -- attempt ids -------------------------------------------------------------------------
    def AttemptId(self, j: int, token: int) -> int:
        return j * self.MaxAttempts + token - 1

    def JobOf(self, a: int) -> int:
        return -1 if a == NoAttempt else a // self.MaxAttempts

    def TokenOf(self, a: int) -> int:
        return 0 if a == NoAttempt else a % self.MaxAttempts + 1

    # -- helper operators ----------------------------------------------------------------------
    def Terminal(self, s: State, j: int) -> bool:
        return s.phase[j] in TerminalPhases

    def CanReach(self, s: State, w: int, service: int) -> bool:
        return s.links[w][service] != LinkDown

    def CurrentAuthority(self, s: State, a: int) -> bool:
        j = a // self.MaxAttempts
        return s.authority[j] == a and s.currentToken[j] == a % self.MaxAttempts + 1

    def ReservedJobs(self, s: State) -> frozenset[int]:
        return frozenset(j for j in self.Jobs if s.reservation[j] != NoWorker)

    def LiveLeases(self, s: State) -> frozenset[int]:
        return frozenset(a for a in self.AttemptIds if s.leaseState[a] == LeaseLive)

    def ReservedFor(self, s: State, w: int) -> frozenset[int]:
        return frozenset(j for j in self.Jobs if s.reservation[j] == w)

    def LeasedFor(self, s: State, w: int) -> frozenset[int]:
        return frozenset(
            a for a in self.AttemptIds if s.leaseState[a] == LeaseLive and s.attemptWorker[a] == w
        )

    def ExecutingFor(self, s: State, w: int) -> frozenset[int]:
        return frozenset(
            a
            for a in self.AttemptIds
            if s.attemptState[a] == AttemptExecuting and s.attemptWorker[a] == w
        )

    def CapacityAvailable(self, s: State, w: int) -> bool:
        return (
            len(self.ReservedJobs(s)) + len(self.LiveLeases(s)) < self.GlobalLimit
            and len(self.ReservedFor(s, w)) + len(self.ExecutingFor(s, w)) < self.LocalLimit
        )

    def OtherCapacity(self, s: State, w: int) -> bool:
        return any(w2 != w and s.workerState[w2] in (WorkerUp, WorkerUnused) for w2 in self.Workers)

    def CoordinationClean(self, s: State, j: int) -> bool:
        return (
            not s.queued[j]
            and s.reservation[j] == NoWorker
            and s.reservationAge[j] == 0
            and not s.cancelNotice[j]
            and s.liveProgress[j] == 0
            and s.liveProgressAttempt[j] == NoAttempt
        )

    def SystemQuiescent(self, s: State) -> bool:
        for j in self.Jobs:
            if not (self.Terminal(s, j) and self.CoordinationClean(s, j)):
                return False
        for a in self.AttemptIds:
            if not (
                s.leaseState[a] != LeaseLive
                and s.pendingOutcome[a] == NoOutcome
                and s.attemptState[a] not in (AttemptAuthorized, AttemptExecuting)
                and (
                    s.stageState[a] not in (StagePartial, StageComplete)
                    or s.committedAttempt[a // self.MaxAttempts] == a
                )
            ):
                return False
        return all(
            s.credentialIntentState[c]
            in (CredentialIntentUnused, CredentialIntentCommitted, CredentialIntentAbandoned)
            for c in self.CredentialIntents
        )

    # -- Init ----------------------------------------------------------------------------------
    def Init(self) -> list[State]:
        nJ, nA, nC = len(self.Jobs), len(self.AttemptIds), len(self.CredentialIntents)
        return [
            State(
                phase=(Queued,) * nJ,
                cancelRequested=(False,) * nJ,
                currentToken=(0,) * nJ,
                authority=(NoAttempt,) * nJ,
                dispatchNeeded=(True,) * nJ,
                committedAttempt=(NoAttempt,) * nJ,
                checkpoint=(0,) * nJ,
                checkpointStageOwner=(NoAttempt,) * nJ,
                checkpointValid=(False,) * nJ,
                queued=(False,) * nJ,
                reservation=(NoWorker,) * nJ,
                reservationAge=(0,) * nJ,
                leaseState=(NoLease,) * nA,
                leaseAge=(0,) * nA,
                cancelNotice=(False,) * nJ,
                liveProgress=(0,) * nJ,
                liveProgressAttempt=(NoAttempt,) * nJ,
                coordLossCount=0,
                workerState=tuple(
                    WorkerUp if w in self.InitialWorkers else WorkerUnused for w in self.Workers
                ),
                links=tuple((LinkUp, LinkUp, LinkUp) for _ in self.Workers),
                partitionCount=0,
                attemptState=(AttemptUnused,) * nA,
                attemptWorker=(NoWorker,) * nA,
                attemptProgress=(0,) * nA,
                initialProgress=(0,) * nA,
                resumedFromCheckpoint=(False,) * nA,
                stageState=(StageNone,) * nA,
                pendingOutcome=(NoOutcome,) * nA,
                credentialIntentState=(CredentialIntentUnused,) * nC,
                vaultSecretState=(VaultSecretAbsent,) * nC,
                credentialVersionDurable=(False,) * nC,
            )
        ]

    # -- job actions ---------------------------------------------------------------------------
    def Enqueue(self, s: State, j: int) -> State | None:
        if not (
            s.phase[j] == Queued
            and s.dispatchNeeded[j]
            and not s.queued[j]
            and s.reservation[j] == NoWorker
        ):
            return None
        n = list(s)
        n[_queued] = _ex(s.queued, j, True)
        return _mk(n)

    def Reserve(self, s: State, j: int, w: int) -> State | None:
        if not (
            s.queued[j]
            and s.reservation[j] == NoWorker
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, CoordSvc)
            and self.CapacityAvailable(s, w)
        ):
            return None
        n = list(s)
        n[_queued] = _ex(s.queued, j, False)
        n[_reservation] = _ex(s.reservation, j, w)
        n[_reservationAge] = _ex(s.reservationAge, j, 0)
        return _mk(n)

    def AuthorizeAttempt(self, s: State, j: int, w: int) -> State | None:
        a = self.AttemptId(j, s.currentToken[j] + 1)
        if not (
            s.phase[j] == Queued
            and s.dispatchNeeded[j]
            and s.reservation[j] == w
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, DurableSvc)
            and s.currentToken[j] < self.MaxAttempts
            and s.attemptState[a] == AttemptUnused
            and (
                s.attemptState[_index(s.checkpointStageOwner[j], "checkpointStageOwner[j]")]
                == AttemptStopped
                if s.checkpointValid[j]
                else True
            )
        ):
            return None
        cv = s.checkpointValid[j]
        cp = s.checkpoint[j]
        n = list(s)
        n[_phase] = _ex(s.phase, j, Running)
        n[_currentToken] = _ex(s.currentToken, j, s.currentToken[j] + 1)
        n[_authority] = _ex(s.authority, j, a)
        n[_dispatchNeeded] = _ex(s.dispatchNeeded, j, False)
        n[_attemptState] = _ex(s.attemptState, a, AttemptAuthorized)
        n[_attemptWorker] = _ex(s.attemptWorker, a, w)
        n[_attemptProgress] = _ex(s.attemptProgress, a, cp if cv else 0)
        n[_initialProgress] = _ex(s.initialProgress, a, cp if cv else 0)
        n[_resumedFromCheckpoint] = _ex(s.resumedFromCheckpoint, a, cv and cp > 0)
        if cv:
            # [stageState EXCEPT ![owner] = StageNone, ![a] = ...] applies left to right.
            st = _ex(s.stageState, s.checkpointStageOwner[j], StageNone)
            n[_stageState] = _ex(st, a, StageComplete if cp == self.MaxProgress else StagePartial)
        else:
            n[_stageState] = _ex(s.stageState, a, StageNone)
        n[_checkpointStageOwner] = _ex(s.checkpointStageOwner, j, a if cv else NoAttempt)
        return _mk(n)

    def ActivateAttempt(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        w = s.attemptWorker[a]
        if not (
            self.CurrentAuthority(s, a)
            and s.phase[j] == Running
            and s.attemptState[a] == AttemptAuthorized
            and s.reservation[j] == w
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, CoordSvc)
        ):
            return None
        n = list(s)
        n[_reservation] = _ex(s.reservation, j, NoWorker)
        n[_reservationAge] = _ex(s.reservationAge, j, 0)
        n[_leaseState] = _ex(s.leaseState, a, LeaseLive)
        n[_leaseAge] = _ex(s.leaseAge, a, 0)
        n[_liveProgress] = _ex(s.liveProgress, j, s.attemptProgress[a])
        n[_liveProgressAttempt] = _ex(s.liveProgressAttempt, j, a)
        n[_attemptState] = _ex(s.attemptState, a, AttemptExecuting)
        return _mk(n)

    def RenewLease(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        w = s.attemptWorker[a]
        if not (
            s.leaseState[a] == LeaseLive
            and s.leaseAge[a] > 0
            and self.CurrentAuthority(s, a)
            and s.attemptState[a] == AttemptExecuting
            and s.phase[j] not in TerminalPhases
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, CoordSvc)
        ):
            return None
        n = list(s)
        n[_leaseAge] = _ex(s.leaseAge, a, 0)
        return _mk(n)

    def Tick(self, s: State) -> State | None:
        if not (
            any(
                s.leaseState[a] == LeaseLive and s.leaseAge[a] < self.LeaseLimit
                for a in self.AttemptIds
            )
            or any(
                s.reservation[j] != NoWorker and s.reservationAge[j] < self.ReservationLimit
                for j in self.Jobs
            )
        ):
            return None
        n = list(s)
        n[_leaseAge] = tuple(
            s.leaseAge[a] + 1
            if s.leaseState[a] == LeaseLive and s.leaseAge[a] < self.LeaseLimit
            else s.leaseAge[a]
            for a in self.AttemptIds
        )
        n[_reservationAge] = tuple(
            s.reservationAge[j] + 1
            if s.reservation[j] != NoWorker and s.reservationAge[j] < self.ReservationLimit
            else s.reservationAge[j]
            for j in self.Jobs
        )
        return _mk(n)

    def ExpireReservation(self, s: State, j: int) -> State | None:
        if not (s.reservation[j] != NoWorker and s.reservationAge[j] == self.ReservationLimit):
            return None
        n = list(s)
        n[_reservation] = _ex(s.reservation, j, NoWorker)
        n[_reservationAge] = _ex(s.reservationAge, j, 0)
        return _mk(n)

    def ExpireLease(self, s: State, a: int) -> State | None:
        if not (s.leaseState[a] == LeaseLive and s.leaseAge[a] == self.LeaseLimit):
            return None
        n = list(s)
        n[_leaseState] = _ex(s.leaseState, a, LeaseExpired)
        n[_leaseAge] = _ex(s.leaseAge, a, 0)
        return _mk(n)

    def LoseCoordinationState(self, s: State) -> State | None:
        if not (
            self.FaultsEnabled
            and CoordSvc in self.FaultServices
            and s.coordLossCount < self.MaxCoordLosses
        ):
            return None
        nJ, nA = len(self.Jobs), len(self.AttemptIds)
        n = list(s)
        n[_queued] = (False,) * nJ
        n[_reservation] = (NoWorker,) * nJ
        n[_reservationAge] = (0,) * nJ
        n[_leaseState] = tuple(
            LeaseExpired if s.leaseState[a] == LeaseLive else s.leaseState[a]
            for a in self.AttemptIds
        )
        n[_leaseAge] = (0,) * nA
        n[_cancelNotice] = (False,) * nJ
        n[_liveProgress] = (0,) * nJ
        n[_liveProgressAttempt] = (NoAttempt,) * nJ
        n[_coordLossCount] = s.coordLossCount + 1
        return _mk(n)

    def DropLink(self, s: State, w: int, service: int) -> State | None:
        if not (
            self.FaultsEnabled
            and service in self.FaultServices
            and s.workerState[w] == WorkerUp
            and s.links[w][service] in (LinkUp, LinkRecovered)
            and s.partitionCount < self.MaxPartitions
        ):
            return None
        n = list(s)
        n[_links] = _ex(s.links, w, _ex(s.links[w], service, LinkDown))
        n[_partitionCount] = s.partitionCount + 1
        return _mk(n)

    def RestoreLink(self, s: State, w: int, service: int) -> State | None:
        if s.links[w][service] != LinkDown:
            return None
        n = list(s)
        n[_links] = _ex(s.links, w, _ex(s.links[w], service, LinkRecovered))
        return _mk(n)

    def CrashWorker(self, s: State, w: int) -> State | None:
        if not (self.FaultsEnabled and s.workerState[w] == WorkerUp and self.OtherCapacity(s, w)):
            return None
        n = list(s)
        n[_workerState] = _ex(s.workerState, w, WorkerDown)
        n[_attemptState] = tuple(
            AttemptStopped
            if s.attemptWorker[a] == w
            and s.attemptState[a] in (AttemptAuthorized, AttemptExecuting)
            else s.attemptState[a]
            for a in self.AttemptIds
        )
        return _mk(n)

    def StartIncarnation(self, s: State, w: int) -> State | None:
        if s.workerState[w] != WorkerUnused:
            return None
        n = list(s)
        n[_workerState] = _ex(s.workerState, w, WorkerUp)
        return _mk(n)

    def ReleaseReservation(self, s: State, j: int) -> State | None:
        w = s.reservation[j]
        if not (
            w != NoWorker
            and (
                self.Terminal(s, j)
                or s.phase[j] == Cancelling
                or s.workerState[w] != WorkerUp
                or (
                    s.authority[j] != NoAttempt
                    and s.attemptState[s.authority[j]] != AttemptAuthorized
                )
            )
        ):
            return None
        n = list(s)
        n[_reservation] = _ex(s.reservation, j, NoWorker)
        n[_reservationAge] = _ex(s.reservationAge, j, 0)
        return _mk(n)

    def ReapLostAttempt(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        if not (
            self.CurrentAuthority(s, a)
            and s.phase[j] == Running
            and s.leaseState[a] != LeaseLive
            and (s.attemptState[a] != AttemptAuthorized or s.reservation[j] == NoWorker)
        ):
            return None
        n = list(s)
        n[_phase] = _ex(s.phase, j, RetryWait if s.currentToken[j] < self.MaxAttempts else Failed)
        n[_authority] = _ex(s.authority, j, NoAttempt)
        n[_attemptState] = _ex(
            s.attemptState,
            a,
            AttemptStopped if s.attemptState[a] == AttemptAuthorized else s.attemptState[a],
        )
        return _mk(n)

    def ScheduleRetry(self, s: State, j: int) -> State | None:
        if s.phase[j] != RetryWait:
            return None
        n = list(s)
        n[_phase] = _ex(s.phase, j, Queued)
        n[_dispatchNeeded] = _ex(s.dispatchNeeded, j, True)
        return _mk(n)

    def RequestCancel(self, s: State, j: int) -> State | None:
        if s.phase[j] not in (Queued, Running, RetryWait):
            return None
        running = s.phase[j] == Running
        n = list(s)
        n[_cancelRequested] = _ex(s.cancelRequested, j, True)
        n[_phase] = _ex(s.phase, j, Cancelling if running else Cancelled)
        n[_authority] = _ex(s.authority, j, s.authority[j] if running else NoAttempt)
        n[_dispatchNeeded] = _ex(s.dispatchNeeded, j, False)
        return _mk(n)

    def FinalizeCancel(self, s: State, j: int) -> State | None:
        if s.phase[j] != Cancelling:
            return None
        n = list(s)
        n[_phase] = _ex(s.phase, j, Cancelled)
        n[_authority] = _ex(s.authority, j, NoAttempt)
        n[_attemptState] = tuple(
            AttemptStopped
            if self.JobOf(a) == j and s.attemptState[a] == AttemptAuthorized
            else s.attemptState[a]
            for a in self.AttemptIds
        )
        return _mk(n)

    def PublishCancelNotice(self, s: State, j: int) -> State | None:
        if not (s.cancelRequested[j] and not self.Terminal(s, j) and not s.cancelNotice[j]):
            return None
        n = list(s)
        n[_cancelNotice] = _ex(s.cancelNotice, j, True)
        return _mk(n)

    def CooperativeStop(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        w = s.attemptWorker[a]
        if not (
            s.attemptState[a] == AttemptExecuting
            and (
                s.leaseState[a] == LeaseExpired
                or s.cancelNotice[j]
                or (self.CanReach(s, w, DurableSvc) and s.cancelRequested[j])
                or not self.CurrentAuthority(s, a)
            )
        ):
            return None
        n = list(s)
        n[_attemptState] = _ex(s.attemptState, a, AttemptStopped)
        return _mk(n)

    def ReleaseLease(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        if not (
            s.leaseState[a] == LeaseLive
            and (
                s.attemptState[a] in (AttemptStopped, AttemptCommitted)
                or not self.CurrentAuthority(s, a)
                or self.Terminal(s, j)
            )
        ):
            return None
        n = list(s)
        n[_leaseState] = _ex(s.leaseState, a, LeaseExpired)
        n[_leaseAge] = _ex(s.leaseAge, a, 0)
        return _mk(n)

    def ClearStaleLiveProgress(self, s: State, j: int) -> State | None:
        if s.liveProgressAttempt[j] == NoAttempt:
            return None
        a = s.liveProgressAttempt[j]
        if self.CurrentAuthority(s, a) and s.leaseState[a] == LeaseLive:
            return None
        n = list(s)
        n[_liveProgress] = _ex(s.liveProgress, j, 0)
        n[_liveProgressAttempt] = _ex(s.liveProgressAttempt, j, NoAttempt)
        return _mk(n)

    def CleanTerminalCoordination(self, s: State, j: int) -> State | None:
        if not (
            self.Terminal(s, j)
            and (
                s.queued[j]
                or s.reservation[j] != NoWorker
                or s.cancelNotice[j]
                or s.liveProgress[j] != 0
                or s.liveProgressAttempt[j] != NoAttempt
            )
        ):
            return None
        n = list(s)
        n[_queued] = _ex(s.queued, j, False)
        n[_reservation] = _ex(s.reservation, j, NoWorker)
        n[_reservationAge] = _ex(s.reservationAge, j, 0)
        n[_cancelNotice] = _ex(s.cancelNotice, j, False)
        n[_liveProgress] = _ex(s.liveProgress, j, 0)
        n[_liveProgressAttempt] = _ex(s.liveProgressAttempt, j, NoAttempt)
        return _mk(n)

    def AdvanceAttempt(self, s: State, a: int, amount: int) -> State | None:
        w = s.attemptWorker[a]
        if not (
            s.attemptState[a] == AttemptExecuting
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, TargetSvc)
            and 1 <= amount <= self.MaxProgress
            and amount > s.attemptProgress[a]
        ):
            return None
        n = list(s)
        n[_attemptProgress] = _ex(s.attemptProgress, a, amount)
        n[_stageState] = _ex(
            s.stageState, a, StageComplete if amount == self.MaxProgress else StagePartial
        )
        return _mk(n)

    def PersistCheckpoint(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        w = s.attemptWorker[a]
        if not (
            self.CurrentAuthority(s, a)
            and s.phase[j] == Running
            and s.attemptState[a] == AttemptExecuting
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, DurableSvc)
            and s.attemptProgress[a] > 0
            and (not s.checkpointValid[j] or s.checkpoint[j] != s.attemptProgress[a])
        ):
            return None
        n = list(s)
        n[_checkpoint] = _ex(s.checkpoint, j, s.attemptProgress[a])
        n[_checkpointStageOwner] = _ex(s.checkpointStageOwner, j, a)
        n[_checkpointValid] = _ex(s.checkpointValid, j, True)
        return _mk(n)

    def InvalidateCheckpoint(self, s: State, j: int) -> State | None:
        if not (not self.Terminal(s, j) and s.checkpointValid[j]):
            return None
        n = list(s)
        n[_checkpointStageOwner] = _ex(s.checkpointStageOwner, j, NoAttempt)
        n[_checkpointValid] = _ex(s.checkpointValid, j, False)
        return _mk(n)

    def ReportProgress(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        w = s.attemptWorker[a]
        if not (
            self.CurrentAuthority(s, a)
            and s.phase[j] == Running
            and s.leaseState[a] == LeaseLive
            and s.attemptState[a] == AttemptExecuting
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, CoordSvc)
            and (s.liveProgress[j] != s.attemptProgress[a] or s.liveProgressAttempt[j] != a)
        ):
            return None
        n = list(s)
        n[_liveProgress] = _ex(s.liveProgress, j, s.attemptProgress[a])
        n[_liveProgressAttempt] = _ex(s.liveProgressAttempt, j, a)
        return _mk(n)

    def SendOutcome(self, s: State, a: int, outcome: int) -> State | None:
        w = s.attemptWorker[a]
        if not (
            (outcome == WantsSuccess or outcome in FailureOutcomes)
            and s.attemptState[a] == AttemptExecuting
            and s.pendingOutcome[a] == NoOutcome
            and s.workerState[w] == WorkerUp
            and self.CanReach(s, w, DurableSvc)
            and (outcome in FailureOutcomes or s.stageState[a] == StageComplete)
        ):
            return None
        n = list(s)
        n[_pendingOutcome] = _ex(s.pendingOutcome, a, outcome)
        return _mk(n)

    def CommitEligible(self, s: State, a: int) -> bool:
        j = self.JobOf(a)
        return (
            s.pendingOutcome[a] == WantsSuccess
            and self.CurrentAuthority(s, a)
            and s.phase[j] == Running
            and not s.cancelRequested[j]
            and s.stageState[a] == StageComplete
        )

    def FailureEligible(self, s: State, a: int) -> bool:
        j = self.JobOf(a)
        return (
            s.pendingOutcome[a] in FailureOutcomes
            and self.CurrentAuthority(s, a)
            and s.phase[j] == Running
            and not s.cancelRequested[j]
        )

    def AcceptSuccess(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        if not self.CommitEligible(s, a):
            return None
        n = list(s)
        n[_phase] = _ex(s.phase, j, Succeeded)
        n[_authority] = _ex(s.authority, j, NoAttempt)
        n[_committedAttempt] = _ex(s.committedAttempt, j, a)
        n[_checkpoint] = _ex(s.checkpoint, j, self.MaxProgress)
        n[_checkpointStageOwner] = _ex(s.checkpointStageOwner, j, a)
        n[_checkpointValid] = _ex(s.checkpointValid, j, True)
        n[_attemptState] = _ex(s.attemptState, a, AttemptCommitted)
        n[_pendingOutcome] = _ex(s.pendingOutcome, a, NoOutcome)
        return _mk(n)

    def AcceptFailure(self, s: State, a: int, outcome: int) -> State | None:
        j = self.JobOf(a)
        if not (s.pendingOutcome[a] == outcome and self.FailureEligible(s, a)):
            return None
        n = list(s)
        if outcome == WantsPermanentFailure:
            new_phase = Failed
        else:
            new_phase = RetryWait if s.currentToken[j] < self.MaxAttempts else Failed
        n[_phase] = _ex(s.phase, j, new_phase)
        n[_authority] = _ex(s.authority, j, NoAttempt)
        n[_attemptState] = _ex(s.attemptState, a, AttemptStopped)
        n[_pendingOutcome] = _ex(s.pendingOutcome, a, NoOutcome)
        return _mk(n)

    def AcceptPermanentFailure(self, s: State, a: int) -> State | None:
        if s.pendingOutcome[a] != WantsPermanentFailure:
            return None
        return self.AcceptFailure(s, a, WantsPermanentFailure)

    def AcceptRetryableFailureWithBudget(self, s: State, a: int) -> State | None:
        if not s.currentToken[self.JobOf(a)] < self.MaxAttempts:
            return None
        return self.AcceptFailure(s, a, WantsRetryableFailure)

    def AcceptRetryableFailureExhausted(self, s: State, a: int) -> State | None:
        if s.currentToken[self.JobOf(a)] != self.MaxAttempts:
            return None
        return self.AcceptFailure(s, a, WantsRetryableFailure)

    def RejectOutcome(self, s: State, a: int) -> State | None:
        if not (
            s.pendingOutcome[a] != NoOutcome
            and not self.CommitEligible(s, a)
            and not self.FailureEligible(s, a)
        ):
            return None
        n = list(s)
        n[_pendingOutcome] = _ex(s.pendingOutcome, a, NoOutcome)
        return _mk(n)

    def CleanupStage(self, s: State, a: int) -> State | None:
        j = self.JobOf(a)
        if not (
            s.stageState[a] in (StagePartial, StageComplete)
            and s.committedAttempt[j] != a
            and not self.CurrentAuthority(s, a)
            and (self.Terminal(s, j) or not s.checkpointValid[j] or s.checkpointStageOwner[j] != a)
            and (
                s.attemptState[a] == AttemptStopped
                or s.workerState[_index(s.attemptWorker[a], "attemptWorker[a]")] == WorkerDown
            )
        ):
            return None
        n = list(s)
        n[_stageState] = _ex(s.stageState, a, StageCleaned)
        return _mk(n)

    # -- credential actions --------------------------------------------------------------------
    def PrepareCredentialIntent(self, s: State, c: int) -> State | None:
        if s.credentialIntentState[c] != CredentialIntentUnused:
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentPrepared)
        return _mk(n)

    def BeginCredentialWrite(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] == CredentialIntentPrepared
            and s.vaultSecretState[c] == VaultSecretAbsent
        ):
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentWriting)
        return _mk(n)

    def CompleteCredentialWrite(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] == CredentialIntentWriting
            and s.vaultSecretState[c] == VaultSecretAbsent
        ):
            return None
        n = list(s)
        n[_vaultSecretState] = _ex(s.vaultSecretState, c, VaultSecretLive)
        return _mk(n)

    def RecordCredentialWrite(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] == CredentialIntentWriting
            and s.vaultSecretState[c] == VaultSecretLive
        ):
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentWritten)
        return _mk(n)

    def FenceFailedCredentialWrite(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] == CredentialIntentWriting
            and s.vaultSecretState[c] == VaultSecretAbsent
        ):
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentPrepared)
        return _mk(n)

    def CommitCredentialVersion(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] == CredentialIntentWritten
            and s.vaultSecretState[c] == VaultSecretLive
        ):
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentCommitted)
        n[_credentialVersionDurable] = _ex(s.credentialVersionDurable, c, True)
        return _mk(n)

    def ClaimCredentialCleanup(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] in (CredentialIntentWriting, CredentialIntentWritten)
            and s.vaultSecretState[c] == VaultSecretLive
            and not s.credentialVersionDurable[c]
        ):
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentAbandoning)
        return _mk(n)

    def DestroyClaimedCredentialSecret(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] == CredentialIntentAbandoning
            and s.vaultSecretState[c] == VaultSecretLive
            and not s.credentialVersionDurable[c]
        ):
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentAbandoned)
        n[_vaultSecretState] = _ex(s.vaultSecretState, c, VaultSecretDestroyed)
        return _mk(n)

    def AbandonFencedCredentialIntent(self, s: State, c: int) -> State | None:
        if not (
            s.credentialIntentState[c] == CredentialIntentPrepared
            and s.vaultSecretState[c] == VaultSecretAbsent
        ):
            return None
        n = list(s)
        n[_credentialIntentState] = _ex(s.credentialIntentState, c, CredentialIntentAbandoned)
        return _mk(n)

    # -- Done and Next ---------------------------------------------------------------------------
    def Done(self, s: State) -> State | None:
        if not self.SystemQuiescent(s):
            return None
        return s

    def JobNextSteps(self) -> Iterator[Step]:
        """The disjuncts of ``JobNext`` with their bound parameters, in the spec's order."""
        J, W, A = self.Jobs, self.Workers, self.AttemptIds
        S = self.Services
        yield from (Step("Enqueue", (j,)) for j in J)
        yield from (Step("Reserve", (j, w)) for j in J for w in W)
        yield from (Step("AuthorizeAttempt", (j, w)) for j in J for w in W)
        yield from (Step("ActivateAttempt", (a,)) for a in A)
        yield from (Step("RenewLease", (a,)) for a in A)
        yield Step("Tick", ())
        yield from (Step("ExpireLease", (a,)) for a in A)
        yield from (Step("ExpireReservation", (j,)) for j in J)
        yield Step("LoseCoordinationState", ())
        yield from (Step("DropLink", (w, s)) for w in W for s in S)
        yield from (Step("RestoreLink", (w, s)) for w in W for s in S)
        yield from (Step("CrashWorker", (w,)) for w in W)
        yield from (Step("StartIncarnation", (w,)) for w in W)
        yield from (Step("ReleaseReservation", (j,)) for j in J)
        yield from (Step("ReapLostAttempt", (a,)) for a in A)
        yield from (Step("ScheduleRetry", (j,)) for j in J)
        yield from (Step("RequestCancel", (j,)) for j in J)
        yield from (Step("FinalizeCancel", (j,)) for j in J)
        yield from (Step("PublishCancelNotice", (j,)) for j in J)
        yield from (Step("CooperativeStop", (a,)) for a in A)
        yield from (Step("ReleaseLease", (a,)) for a in A)
        yield from (Step("ClearStaleLiveProgress", (j,)) for j in J)
        yield from (Step("CleanTerminalCoordination", (j,)) for j in J)
        yield from (
            Step("AdvanceAttempt", (a, n)) for a in A for n in range(1, self.MaxProgress + 1)
        )
        yield from (Step("PersistCheckpoint", (a,)) for a in A)
        yield from (Step("InvalidateCheckpoint", (j,)) for j in J)
        yield from (Step("ReportProgress", (a,)) for a in A)
        yield from (
            Step("SendOutcome", (a, o))
            for a in A
            for o in (WantsSuccess, WantsRetryableFailure, WantsPermanentFailure)
        )
        yield from (Step("AcceptSuccess", (a,)) for a in A)
        yield from (Step("AcceptPermanentFailure", (a,)) for a in A)
        yield from (Step("AcceptRetryableFailureWithBudget", (a,)) for a in A)
        yield from (Step("AcceptRetryableFailureExhausted", (a,)) for a in A)
        yield from (Step("RejectOutcome", (a,)) for a in A)
        yield from (Step("CleanupStage", (a,)) for a in A)

    def CredentialNextSteps(self) -> Iterator[Step]:
        """The disjuncts of ``CredentialNext`` with their bound parameters."""
        for name in CREDENTIAL_ACTIONS:
            yield from (Step(name, (c,)) for c in self.CredentialIntents)

    def NextSteps(self) -> tuple[Step, ...]:
        """Every action instance of ``Next`` (job, credential, then ``Done``), in order."""
        if self._steps is None:
            self._steps = (
                *self.JobNextSteps(),
                *self.CredentialNextSteps(),
                Step("Done", ()),
            )
        return self._steps

    def apply(self, s: State, step: Step) -> State | None:
        """Evaluate one action instance: the successor, or ``None`` if disabled."""
        fn: Callable[..., State | None] = getattr(self, step.name)
        return fn(s, *step.params)

    def Next(self, s: State) -> list[tuple[Step, State]]:
        """All ``(step, successor)`` pairs of ``Next`` from ``s``."""
        out: list[tuple[Step, State]] = []
        for step in self.NextSteps():
            t = self.apply(s, step)
            if t is not None:
                out.append((step, t))
        return out

    # -- composite actions used by Fairness -------------------------------------------------------
    def ReserveJob(self, s: State, j: int) -> list[State]:
        return _some(self.Reserve(s, j, w) for w in self.Workers)

    def AuthorizeJob(self, s: State, j: int) -> list[State]:
        return _some(self.AuthorizeAttempt(s, j, w) for w in self.Workers)

    def ActivateJob(self, s: State, j: int) -> list[State]:
        return _some(self.ActivateAttempt(s, a) for a in self.AttemptsOf[j])

    def ExecuteJob(self, s: State, j: int) -> list[State]:
        out: list[State | None] = []
        for a in self.AttemptsOf[j]:
            out.append(self.SendOutcome(s, a, WantsRetryableFailure))
            out.append(self.SendOutcome(s, a, WantsPermanentFailure))
            out.append(self.SendOutcome(s, a, WantsSuccess))
            out.extend(self.AdvanceAttempt(s, a, m) for m in range(1, self.MaxProgress + 1))
        return _some(out)

    def ProcessOutcome(self, s: State, a: int) -> list[State]:
        return _some(
            (
                self.AcceptSuccess(s, a),
                self.AcceptPermanentFailure(s, a),
                self.AcceptRetryableFailureWithBudget(s, a),
                self.AcceptRetryableFailureExhausted(s, a),
                self.RejectOutcome(s, a),
            )
        )

    def ReapJob(self, s: State, j: int) -> list[State]:
        return _some(self.ReapLostAttempt(s, a) for a in self.AttemptsOf[j])

    # -- invariants --------------------------------------------------------------------------
    def _typeok_domains(self) -> list[tuple[int, str, int, int, int]]:
        """``TypeOK``'s function sets as ``(variable, kind, |domain|, lo, hi)``.

        ``kind`` is ``"ints"`` (``[D -> lo..hi]``; enumerations are their contiguous codes,
        ``AttemptIds \\cup {NoAttempt}`` is ``-1..|AttemptIds|-1``, ``Workers \\cup
        {NoWorker}`` is ``-1..|Workers|-1``), ``"bools"`` (``[D -> BOOLEAN]``), ``"int"`` (a
        scalar ``lo..hi``) or ``"links"`` (``[Workers -> [Services -> LinkStates]]``).
        """
        nJ, nA = len(self.Jobs), len(self.AttemptIds)
        nW, nC = len(self.Workers), len(self.CredentialIntents)
        M, P = self.MaxAttempts, self.MaxProgress
        return [
            (_phase, "ints", nJ, 0, len(Phases) - 1),
            (_cancelRequested, "bools", nJ, 0, 0),
            (_currentToken, "ints", nJ, 0, M),
            (_authority, "ints", nJ, -1, nA - 1),
            (_dispatchNeeded, "bools", nJ, 0, 0),
            (_committedAttempt, "ints", nJ, -1, nA - 1),
            (_checkpoint, "ints", nJ, 0, P),
            (_checkpointStageOwner, "ints", nJ, -1, nA - 1),
            (_checkpointValid, "bools", nJ, 0, 0),
            (_queued, "bools", nJ, 0, 0),
            (_reservation, "ints", nJ, -1, nW - 1),
            (_reservationAge, "ints", nJ, 0, self.ReservationLimit),
            (_leaseState, "ints", nA, 0, len(LeaseStates) - 1),
            (_leaseAge, "ints", nA, 0, self.LeaseLimit),
            (_cancelNotice, "bools", nJ, 0, 0),
            (_liveProgress, "ints", nJ, 0, P),
            (_liveProgressAttempt, "ints", nJ, -1, nA - 1),
            (_coordLossCount, "int", 0, 0, self.MaxCoordLosses),
            (_workerState, "ints", nW, 0, len(WorkerStates) - 1),
            (_links, "links", nW, 0, len(LinkStates) - 1),
            (_partitionCount, "int", 0, 0, self.MaxPartitions),
            (_attemptState, "ints", nA, 0, len(AttemptStates) - 1),
            (_attemptWorker, "ints", nA, -1, nW - 1),
            (_attemptProgress, "ints", nA, 0, P),
            (_initialProgress, "ints", nA, 0, P),
            (_resumedFromCheckpoint, "bools", nA, 0, 0),
            (_stageState, "ints", nA, 0, len(StageStates) - 1),
            (_pendingOutcome, "ints", nA, 0, len(OutcomeRequests) - 1),
            (_credentialIntentState, "ints", nC, 0, len(CredentialIntentStates) - 1),
            (_vaultSecretState, "ints", nC, 0, len(VaultSecretStates) - 1),
            (_credentialVersionDurable, "bools", nC, 0, 0),
        ]

    def TypeOK(self, s: State) -> bool:
        """Every variable is in its function set (a BOOLEAN is never a number here).

        Element types are checked in one pass over the whole state; the range check of a
        field value is then memoised (its elements are known to be genuine ``int``s, so
        equal tuples have equal verdicts).
        """
        if type(s) is not State:
            return False
        table = self._typeok
        if table is None:
            table = self._typeok = self._typeok_domains()
        ranged: list[tuple[int, tuple[int, ...], int, int]] = []
        ints: list[tuple[Any, ...]] = []
        bools: list[tuple[Any, ...]] = []
        for i, kind, n, lo, hi in table:
            v: Any = s[i]
            if kind == "int":
                if not (type(v) is int and lo <= v <= hi):
                    return False
                continue
            if type(v) is not tuple or len(v) != n:
                return False
            if kind == "bools":
                bools.append(v)
            elif kind == "ints":
                ints.append(v)
                ranged.append((i, v, lo, hi))
            else:  # links
                for row in v:
                    if type(row) is not tuple or len(row) != len(Services):
                        return False
                    ints.append(row)
                    ranged.append((i, row, lo, hi))
        if not set(map(type, chain.from_iterable(ints))) <= _INT_ONLY:
            return False
        if not set(map(type, chain.from_iterable(bools))) <= _BOOL_ONLY:
            return False
        memo = self._typeok_memo
        for i, v, lo, hi in ranged:
            key = (i, v)
            ok = memo.get(key)
            if ok is None:
                ok = memo[key] = not v or (lo <= min(v) and max(v) <= hi)
            if not ok:
                return False
        return True

    def CredentialLifecycleWellFormed(self, s: State) -> bool:
        for c in self.CredentialIntents:
            st, vs, d = (
                s.credentialIntentState[c],
                s.vaultSecretState[c],
                s.credentialVersionDurable[c],
            )
            ok = (
                (st != CredentialIntentUnused or (vs == VaultSecretAbsent and not d))
                and (st != CredentialIntentPrepared or (vs == VaultSecretAbsent and not d))
                and (
                    st != CredentialIntentWriting
                    or (vs in (VaultSecretAbsent, VaultSecretLive) and not d)
                )
                and (st != CredentialIntentWritten or (vs == VaultSecretLive and not d))
                and (
                    st != CredentialIntentCommitted
                    or (vs in (VaultSecretLive, VaultSecretDestroyed) and d)
                )
                and (st != CredentialIntentAbandoning or (vs == VaultSecretLive and not d))
                and (
                    st != CredentialIntentAbandoned
                    or (vs in (VaultSecretAbsent, VaultSecretDestroyed) and not d)
                )
            )
            if not ok:
                return False
        return True

    def NoOrphanSecrets(self, s: State) -> bool:
        return all(
            s.vaultSecretState[c] != VaultSecretLive
            or s.credentialVersionDurable[c]
            or s.credentialIntentState[c]
            in (CredentialIntentWriting, CredentialIntentWritten, CredentialIntentAbandoning)
            for c in self.CredentialIntents
        )

    def StateConsistency(self, s: State) -> bool:
        for j in self.Jobs:
            ph = s.phase[j]
            auth = s.authority[j]
            if ph in (Running, Cancelling) and not (
                auth in self.AttemptIds
                and self.JobOf(auth) == j
                and self.TokenOf(auth) == s.currentToken[j]
            ):
                return False
            if ph in (Queued, RetryWait, Succeeded, Failed, Cancelled) and auth != NoAttempt:
                return False
            if ph in (Queued, Running, RetryWait) and s.cancelRequested[j]:
                return False
            if ph in (Cancelling, Cancelled) and not s.cancelRequested[j]:
                return False
            if ph in (Succeeded, Failed) and s.cancelRequested[j]:
                return False
            if (s.committedAttempt[j] != NoAttempt) != (ph == Succeeded):
                return False
            if ph == Queued and not s.dispatchNeeded[j]:
                return False
            if s.reservation[j] != NoWorker and s.queued[j]:
                return False
            if s.reservation[j] == NoWorker and s.reservationAge[j] != 0:
                return False
        for a in self.AttemptIds:
            st = s.attemptState[a]
            if (st == AttemptUnused) != (s.attemptWorker[a] == NoWorker):
                return False
            if st != AttemptUnused and not (
                s.attemptWorker[a] in self.Workers
                and self.TokenOf(a) <= s.currentToken[self.JobOf(a)]
            ):
                return False
            if s.leaseState[a] == LeaseLive and st == AttemptUnused:
                return False
            if s.stageState[a] == StageCleaned and s.committedAttempt[self.JobOf(a)] == a:
                return False
        return True

    def AllocatedTokensUsed(self, s: State) -> bool:
        return all(
            s.attemptState[self.AttemptId(j, t)] != AttemptUnused
            for j in self.Jobs
            for t in range(1, s.currentToken[j] + 1)
        )

    def LiveProgressWellFormed(self, s: State) -> bool:
        for j in self.Jobs:
            a = s.liveProgressAttempt[j]
            if a != NoAttempt and not (
                self.JobOf(a) == j
                and s.attemptState[a] != AttemptUnused
                and self.TokenOf(a) <= s.currentToken[j]
                and s.liveProgress[j] <= s.attemptProgress[a]
            ):
                return False
        return True

    def LiveProgressCompatibleWithLiveLease(self, s: State) -> bool:
        # \A j, a : (JobOf(a) = j /\ ...) => ...; the attempts with JobOf(a) = j are
        # exactly AttemptsOf[j].
        for j in self.Jobs:
            owner = s.liveProgressAttempt[j]
            for a in self.AttemptsOf[j]:
                if s.leaseState[a] == LeaseLive and owner not in (NoAttempt, a):
                    return False
        return True

    def AtMostOneLiveLeasePerJob(self, s: State) -> bool:
        return all(
            sum(1 for a in self.AttemptsOf[j] if s.leaseState[a] == LeaseLive) <= 1
            for j in self.Jobs
        )

    def AuthorityWellFormed(self, s: State) -> bool:
        for j in self.Jobs:
            a = s.authority[j]
            if a != NoAttempt and not (
                self.JobOf(a) == j
                and self.TokenOf(a) == s.currentToken[j]
                and s.attemptState[a] in (AttemptAuthorized, AttemptExecuting, AttemptStopped)
            ):
                return False
        return True

    def CommittedResultConsistent(self, s: State) -> bool:
        for j in self.Jobs:
            a = s.committedAttempt[j]
            if a != NoAttempt and not (
                self.JobOf(a) == j
                and self.TokenOf(a) == s.currentToken[j]
                and s.attemptState[a] == AttemptCommitted
                and s.stageState[a] == StageComplete
                and not s.cancelRequested[j]
            ):
                return False
        return True

    def CancellationSafety(self, s: State) -> bool:
        return all(
            not s.cancelRequested[j] or s.committedAttempt[j] == NoAttempt for j in self.Jobs
        )

    def PermitSafety(self, s: State) -> bool:
        return len(self.ReservedJobs(s)) + len(self.LiveLeases(s)) <= self.GlobalLimit and all(
            len(self.ReservedFor(s, w)) + len(self.ExecutingFor(s, w)) <= self.LocalLimit
            for w in self.Workers
        )

    def ResumeValidity(self, s: State) -> bool:
        return all(
            s.attemptProgress[a] >= s.initialProgress[a]
            and (not s.initialProgress[a] > 0 or s.resumedFromCheckpoint[a])
            and (not s.resumedFromCheckpoint[a] or s.initialProgress[a] > 0)
            for a in self.AttemptIds
        )

    def CheckpointStagingOwnership(self, s: State) -> bool:
        for j in self.Jobs:
            valid = s.checkpointValid[j]
            owner = s.checkpointStageOwner[j]
            if not valid and owner != NoAttempt:
                return False
            if valid and not (
                s.checkpoint[j] > 0
                and owner in self.AttemptIds
                and self.JobOf(owner) == j
                and s.attemptState[owner] != AttemptUnused
            ):
                return False
            if (
                not self.Terminal(s, j)
                and valid
                and s.stageState[owner] not in (StagePartial, StageComplete)
            ):
                return False
            if s.phase[j] == Running and valid and owner != s.authority[j]:
                return False
        return True

    def StagingOwnership(self, s: State) -> bool:
        for a in self.AttemptIds:
            j = self.JobOf(a)
            if s.stageState[a] == StageCleaned and not (
                s.committedAttempt[j] != a and not self.CurrentAuthority(s, a)
            ):
                return False
            if s.committedAttempt[j] == a and s.stageState[a] != StageComplete:
                return False
        return True

    # -- action properties: the step predicates ------------------------------------------------
    def TerminalStep(self, s: State, t: State) -> bool:
        for j in self.Jobs:
            if s.phase[j] in TerminalPhases and not (
                t.phase[j] == s.phase[j]
                and t.cancelRequested[j] == s.cancelRequested[j]
                and t.currentToken[j] == s.currentToken[j]
                and t.authority[j] == s.authority[j]
                and t.committedAttempt[j] == s.committedAttempt[j]
                and t.checkpoint[j] == s.checkpoint[j]
                and t.checkpointStageOwner[j] == s.checkpointStageOwner[j]
                and t.checkpointValid[j] == s.checkpointValid[j]
            ):
                return False
        return True

    def FenceStep(self, s: State, t: State) -> bool:
        return all(t.currentToken[j] >= s.currentToken[j] for j in self.Jobs)

    def CommitLinearizationStep(self, s: State, t: State) -> bool:
        for j in self.Jobs:
            c1 = t.committedAttempt[j]
            if c1 != s.committedAttempt[j] and not (
                s.committedAttempt[j] == NoAttempt
                and s.phase[j] == Running
                and s.authority[j] == c1
                and self.TokenOf(c1) == s.currentToken[j]
                and s.pendingOutcome[c1] == WantsSuccess
                and not s.cancelRequested[j]
                and s.stageState[c1] == StageComplete
            ):
                return False
        return True

    def FailureDispositionStep(self, s: State, t: State) -> bool:
        for a in self.AttemptIds:
            if s.pendingOutcome[a] not in FailureOutcomes:
                continue  # FailureEligible(a) is FALSE: the implication holds
            j = self.JobOf(a)
            if (
                self.FailureEligible(s, a)
                and t.attemptState[a] == AttemptStopped
                and t.pendingOutcome[a] == NoOutcome
                and t.authority[j] == NoAttempt
            ):
                if s.pendingOutcome[a] == WantsPermanentFailure:
                    expected = Failed
                else:
                    expected = RetryWait if s.currentToken[j] < self.MaxAttempts else Failed
                if t.phase[j] != expected:
                    return False
        return True

    # ``[][P]_vars``: P or a stuttering step.
    def TerminalStateIsImmutable(self, s: State, t: State) -> bool:
        return s == t or self.TerminalStep(s, t)

    def FencingTokensMonotonic(self, s: State, t: State) -> bool:
        return s == t or self.FenceStep(s, t)

    def CommitIsFencedCAS(self, s: State, t: State) -> bool:
        return s == t or self.CommitLinearizationStep(s, t)

    def FailureDispositionHonored(self, s: State, t: State) -> bool:
        return s == t or self.FailureDispositionStep(s, t)

    # -- liveness predicates -------------------------------------------------------------------
    def WorkerAvailable(self, s: State, w: int) -> bool:
        return s.workerState[w] == WorkerUp and all(
            self.CanReach(s, w, svc) for svc in self.Services
        )

    def SomeWorkerAvailable(self, s: State) -> bool:
        """``\\E w \\in Workers : WorkerAvailable(w)`` (the body of ``RecoveryAssumption``)."""
        return any(self.WorkerAvailable(s, w) for w in self.Workers)

    def CleanupEligible(self, s: State, a: int) -> bool:
        j = self.JobOf(a)
        return (
            s.stageState[a] in (StagePartial, StageComplete)
            and s.committedAttempt[j] != a
            and not self.CurrentAuthority(s, a)
            and (self.Terminal(s, j) or not s.checkpointValid[j] or s.checkpointStageOwner[j] != a)
            and (
                s.attemptState[a] == AttemptStopped
                or s.workerState[_index(s.attemptWorker[a], "attemptWorker[a]")] == WorkerDown
            )
        )


_INT_ONLY = frozenset({int})
_BOOL_ONLY = frozenset({bool})


def _index(i: int, what: str) -> int:
    """Apply a function to ``NoAttempt``/``NoWorker``: TLC stops with an error there."""
    if i < 0:
        raise SpecEvaluationError(f"{what} is outside the function's domain")
    return i


def _some(results: Sequence[State | None] | Iterator[State | None]) -> list[State]:
    return [r for r in results if r is not None]


CREDENTIAL_ACTIONS: tuple[str, ...] = (
    "PrepareCredentialIntent",
    "BeginCredentialWrite",
    "CompleteCredentialWrite",
    "RecordCredentialWrite",
    "FenceFailedCredentialWrite",
    "CommitCredentialVersion",
    "ClaimCredentialCleanup",
    "DestroyClaimedCredentialSecret",
    "AbandonFencedCredentialIntent",
)

#: Invariants named by the issue (``TypeOK`` ... ``StagingOwnership``), in spec order.
INVARIANTS: tuple[str, ...] = (
    "TypeOK",
    "CredentialLifecycleWellFormed",
    "NoOrphanSecrets",
    "StateConsistency",
    "AllocatedTokensUsed",
    "LiveProgressWellFormed",
    "LiveProgressCompatibleWithLiveLease",
    "AtMostOneLiveLeasePerJob",
    "AuthorityWellFormed",
    "CommittedResultConsistent",
    "CancellationSafety",
    "PermitSafety",
    "ResumeValidity",
    "CheckpointStagingOwnership",
    "StagingOwnership",
)

#: Action properties ``[][Step]_vars`` and the step predicate each one boxes.
ACTION_PROPERTIES: dict[str, str] = {
    "TerminalStateIsImmutable": "TerminalStep",
    "FencingTokensMonotonic": "FenceStep",
    "CommitIsFencedCAS": "CommitLinearizationStep",
    "FailureDispositionHonored": "FailureDispositionStep",
}


__all__ = [
    "PHASE_NAMES",
    "Phases",
    "TerminalPhases",
    "WORKER_STATE_NAMES",
    "WorkerStates",
    "SERVICE_NAMES",
    "Services",
    "LINK_STATE_NAMES",
    "LinkStates",
    "ATTEMPT_STATE_NAMES",
    "AttemptStates",
    "LEASE_STATE_NAMES",
    "LeaseStates",
    "STAGE_STATE_NAMES",
    "StageStates",
    "CREDENTIAL_INTENT_STATE_NAMES",
    "CredentialIntentStates",
    "VAULT_SECRET_STATE_NAMES",
    "VaultSecretStates",
    "OUTCOME_NAMES",
    "FailureOutcomes",
    "OutcomeRequests",
    "NoAttempt",
    "NoWorker",
    "BOOLEAN",
    "IntTuple",
    "BoolTuple",
    "Constants",
    "State",
    "VARIABLES",
    "durableVars",
    "coordinationVars",
    "workerVars",
    "attemptVars",
    "credentialVars",
    "jobVars",
    "vars",
    "Step",
    "Remora",
    "CREDENTIAL_ACTIONS",
    "INVARIANTS",
    "ACTION_PROPERTIES",
]
