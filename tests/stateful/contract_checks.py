"""The inputs a correct schedule never produces, checked by a state machine: bad retry
policies, outcomes an operation does not accept, effects that fail inside the fault seam,
stores that lie or fail, callbacks without an owner, a mutex held past the budget, and a
source client that breaks the :class:`~remora.worker.runner.Runner`.

The schedule machines drive the real lifecycle through a correct store, a correct hook
and a correct source, so the guards against everything else — the lifecycle's sanity
checks, the retry policy's validation, the fault seam's refusals and its reports of
foreign exceptions, the runner's error attribution — were never executed by them.
:class:`ContractChecks` is a mixin for a
:class:`~remora.testing.machines.WorkerScheduleMachine`: between the schedule's steps each
rule builds a *scratch* lifecycle (a fresh memory store and source, a logical clock — the
machine's own store is not touched) with drawn inputs and checks the observable result
against the documented rule as a postcondition: the typed error, what was held, what the
store wrote (its write log), what the hook was told.

Failures are ``ERROR contract``; ``tests/stateful/test_contract_checks.py`` shows each rule
catching a planted bug.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import rule

from remora import faults as seam
from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import (
    DeadlineExceeded,
    Fenced,
    InvalidInput,
    RemoraError,
    RetriesExhausted,
    Unavailable,
    UnknownResult,
)
from remora.faults import (
    UNKNOWN_OUTCOMES,
    At,
    FaultDecision,
    IOCall,
    IOReport,
    Observation,
    Operation,
    Outcome,
)
from remora.source import MemorySourceLog
from remora.store import MemoryStore, Token
from remora.worker.lifecycle import Lifecycle
from remora.worker.retry import RetryPolicy
from remora.worker.runner import Runner, RunStats

SEAM_EFFECTS = ("value", "fenced", "invalid", "unknown", "foreign", "hook-raises")
LIFECYCLE_CASES = (
    "assign",
    "stop-in-claim",
    "stop-in-observe",
    "lie-zero",
    "lie-same",
    "claim-unavailable",
    "process-unowned",
    "process-behind",
    "mutex-budget",
    "foreign",
)
RUNNER_CASES = ("progress", "poll-raises", "seek-raises", "record-refused")

LIFECYCLE: Callable[..., Lifecycle] = Lifecycle
RETRY_POLICY: Callable[..., RetryPolicy] = RetryPolicy
CONTROLLED_CALL: Callable[..., Any] = seam.controlled_call
RUNNER: Callable[..., Runner] = Runner
MEMORY_STORE: Callable[[], MemoryStore] = MemoryStore
"""What the rules build (a planted-bug test swaps one)."""

WAITS = (0.1, 0.2, 0.4)


class ContractError(AssertionError):
    pass


def _records(partition: int, n: int) -> list[SourceRecord]:
    return [
        SourceRecord(partition, k, True, f"s{k % 2}", b'{"op": "upsert", "version": %d}' % (k + 1))
        for k in range(n)
    ]


def _scratch(
    store: Any = None, n: int = 3, **kwargs: Any
) -> tuple[Lifecycle, MemoryStore, LogicalClock]:
    memory = MEMORY_STORE()
    log = MemorySourceLog(_records(0, n) + _records(1, n), (0, 1))
    clock = LogicalClock()
    kwargs.setdefault("retry", RETRY_POLICY(3, WAITS[:2]))
    lifecycle = LIFECYCLE(store or memory, log, clock=clock, name="scratch", **kwargs)
    return lifecycle, memory, clock


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except Exception as exc:
        return type(exc).__name__, exc


class _Wrapped:
    """An ownership store that forwards to a memory store, with one method replaced."""

    def __init__(self, inner: MemoryStore, **replaced: Callable[..., Any]) -> None:
        self.inner = inner
        self.replaced = replaced

    def __getattr__(self, name: str) -> Any:
        return self.replaced.get(name) or getattr(self.inner, name)


class _Hook:
    """A hook that answers one decision and records what it is told (and, with
    ``raise_after``, raises a foreign exception at the after boundary)."""

    def __init__(self, decision: FaultDecision, raise_after: Exception | None = None) -> None:
        self.decision = decision
        self.raise_after = raise_after
        self.boundaries: list[At] = []
        self.reports: list[IOReport] = []

    def decide(self, call: IOCall, ctx: Context) -> FaultDecision:
        return self.decision

    def boundary(self, call: IOCall, at: At, ctx: Context) -> None:
        self.boundaries.append(at)
        if at is At.AFTER and self.raise_after is not None:
            raise self.raise_after

    def returned(self, call: IOCall, report: IOReport) -> None:
        self.reports.append(report)


def seam_problems(operation: Operation, outcome: Outcome, effect_kind: str) -> list[str]:
    """One controlled call with a drawn outcome and effect, against the module docstring of
    :mod:`remora.faults` (empty when it obeys it)."""
    broken_hook = ValueError("a bug in the hook") if effect_kind == "hook-raises" else None
    hook = _Hook(FaultDecision(outcome, 0, True), broken_hook)
    ran: list[bool] = []
    errors: dict[str, Exception] = {
        "fenced": Fenced("fenced by the store"),
        "invalid": InvalidInput("refused by the store"),
        "unknown": UnknownResult("the reply was lost"),
        "foreign": ValueError("a bug in the effect"),
    }

    def effect(commit: bool) -> int:
        ran.append(commit)
        if effect_kind in errors:
            raise errors[effect_kind]
        return 7

    call = IOCall(operation, 0)
    got = _outcome(lambda: CONTROLLED_CALL(hook, call, Context(LogicalClock()), effect))
    problems: list[str] = []
    what = f"{operation.value}/{outcome.value}/{effect_kind}"
    if outcome in UNKNOWN_OUTCOMES and operation in (Operation.VALIDATE, Operation.OBSERVE):
        if got[0] != "InvalidInput" or ran or hook.boundaries or hook.reports:
            problems.append(
                f"{what}: {got[0]}, effect ran {ran}, boundaries {hook.boundaries}, "
                f"reports {len(hook.reports)} (refused before anything: InvalidInput)"
            )
        return problems
    if len(hook.reports) != 1:
        return [f"{what}: {len(hook.reports)} reports, not one"]
    report = hook.reports[0]
    if outcome is Outcome.ABORT:
        want: tuple[str, bool | None, Observation, list[bool]] = (
            ("ValueError", False, Observation.ERROR, [])
            if effect_kind == "hook-raises"
            else ("Unavailable", False, Observation.UNAVAILABLE, [])
        )
    elif effect_kind == "hook-raises":  # after the effect: it landed iff it committed
        commit = outcome is not Outcome.UNKNOWN_ABORTED
        want = ("ValueError", True if commit else None, Observation.ERROR, [commit])
    elif effect_kind == "value":
        commit = outcome is not Outcome.UNKNOWN_ABORTED
        if outcome in UNKNOWN_OUTCOMES:
            want = ("UnknownResult", commit, Observation.UNKNOWN, [commit])
        else:
            want = ("ok", True, Observation.OK, [True])
    else:
        commit = outcome is not Outcome.UNKNOWN_ABORTED
        kind, applied, observation = {
            "fenced": ("Fenced", False, Observation.FENCED),
            "invalid": ("InvalidInput", False, Observation.ERROR),
            "unknown": ("UnknownResult", None, Observation.UNKNOWN),
            "foreign": ("ValueError", None, Observation.ERROR),
        }[effect_kind]
        want = (kind, applied, observation, [commit])
    seen = (got[0], report.effect_applied, report.observation, ran)
    if seen != want:
        problems.append(f"{what}: (result, applied, observation, effect ran) {seen}, not {want}")
    if got[0] == "ok" and got[1] != 7:
        problems.append(f"{what}: returned {got[1]}, not the effect's 7")
    if hook.boundaries != [At.BEFORE, At.AFTER]:
        problems.append(f"{what}: boundaries {hook.boundaries}, not before and after")
    foreign = None
    if effect_kind == "hook-raises" or (effect_kind == "foreign" and outcome is not Outcome.ABORT):
        foreign = got[1]
    if report.foreign is not foreign:
        problems.append(f"{what}: reported foreign {report.foreign!r}, not {foreign!r}")
    error = got[1] if isinstance(got[1], RemoraError) else None
    if report.error is not error:
        problems.append(f"{what}: reported error {report.error!r}, not {error!r}")
    if report.decision != hook.decision:
        problems.append(f"{what}: reported decision {report.decision}, not {hook.decision}")
    return problems


def no_faults_problems(operation: Operation) -> list[str]:
    """The production hook: every call commits, the effect's result is returned."""
    ran: list[bool] = []

    def effect(commit: bool) -> int:
        ran.append(commit)
        return 5

    hook = seam.NO_FAULTS
    got = _outcome(
        lambda: CONTROLLED_CALL(hook, IOCall(operation, 0), Context(LogicalClock()), effect)
    )
    decided = hook.decide(IOCall(operation, 0), Context(LogicalClock()))
    if got != ("ok", 5) or ran != [True] or decided != seam.COMMIT:
        return [f"NO_FAULTS {operation.value}: {got}, effect ran {ran}, decided {decided}"]
    return []


def retry_problems(max_calls: int, waits: tuple[float, ...]) -> list[str]:
    """A policy is accepted iff it holds at least one call and one non-negative wait per
    retry; an accepted policy waits exactly ``waits`` in order."""
    valid = max_calls >= 1 and len(waits) == max_calls - 1 and all(w >= 0 for w in waits)
    got = _outcome(lambda: RETRY_POLICY(max_calls, waits))
    if valid != (got[0] == "ok") or (not valid and got[0] != "InvalidInput"):
        return [f"RetryPolicy({max_calls}, {waits}): {got[0]} ({got[1]})"]
    if max_calls < 1 and "max_calls must be at least 1" not in str(got[1]):
        return [f"RetryPolicy({max_calls}, {waits}) refused for another reason: {got[1]}"]
    if valid:
        policy: RetryPolicy = got[1]
        seen = tuple(policy.wait_before(k) for k in range(2, max_calls + 1))
        if seen != waits:
            return [f"RetryPolicy({max_calls}, {waits}) waits {seen}"]
    return []


def _retired_after(lifecycle: Lifecycle, memory: MemoryStore, what: str) -> list[str]:
    """A failed call leaves the lifetime retired, holding nothing; the next callback is
    rejected without I/O."""
    problems = []
    if lifecycle.retired is None or lifecycle.owned():
        problems.append(f"{what}: retired {lifecycle.retired!r}, holds {lifecycle.owned()}")
    writes = len(memory.backend.write_log)
    got = _outcome(lambda: lifecycle.assign([0]))
    if got[0] != "LifetimeRetired" or len(memory.backend.write_log) != writes:
        problems.append(f"{what}: a later assign gave {got[0]} (not LifetimeRetired, no I/O)")
    return problems


def lifecycle_problems(case: str, partitions: Sequence[int]) -> list[str]:
    """One scratch lifecycle driven into ``case`` (:data:`LIFECYCLE_CASES`)."""
    if case == "assign":  # a plain eager assignment of the drawn partitions
        lifecycle, memory, _ = _scratch()
        got = _outcome(lambda: lifecycle.assign(partitions))
        installed = {p: memory.backend.partition_row(p) for p in partitions}
        want = {p: Token(r.epoch, r.frontier) for p, r in installed.items()}
        problems = []
        if got != ("ok", want) or lifecycle.owned() != want:
            problems.append(
                f"assign {list(partitions)}: {got}, holds {lifecycle.owned()}, not {want}"
            )
        epochs: dict[int, int] = {}
        for w in memory.backend.write_log:  # a claim installs exactly the next epoch
            if w.epoch != epochs.get(w.partition, 0) + 1:
                problems.append(f"claim of partition {w.partition} installed epoch {w.epoch}")
            epochs[w.partition] = w.epoch
        if sorted(epochs.items()) != sorted(
            (p, list(partitions).count(p)) for p in set(partitions)
        ):
            problems.append(f"assign {list(partitions)}: claims {epochs}")
        return problems
    if case in ("stop-in-claim", "stop-in-observe"):  # a stop lands as the reply arrives
        memory = MEMORY_STORE()
        box: list[Lifecycle] = []

        def claim(partition: int, ctx: Context) -> Token:
            token = memory.claim(partition, ctx)
            if case == "stop-in-claim":
                box[0].stop()
            return token

        def observe(partition: int, ctx: Context) -> Token:
            token = memory.observe(partition, ctx)
            box[0].stop()
            return token

        lifecycle, _, _ = _scratch(_Wrapped(memory, claim=claim, observe=observe))
        box.append(lifecycle)
        got = _outcome(lambda: lifecycle.assign([0]))
        if case == "stop-in-observe" and got[0] == "ok":
            got = _outcome(lambda: lifecycle.seek(0))
        problems = []
        if got[0] != "Canceled" or lifecycle.owned() or not lifecycle.stopped:
            problems.append(
                f"a stop while the {case[8:]} reply arrived: {got[0]}, holds {lifecycle.owned()}"
            )
        return problems
    if case in ("lie-zero", "lie-same"):  # a store whose claim returns an impossible token
        memory = MEMORY_STORE()
        lies: list[Token] = []

        def claim(partition: int, ctx: Context) -> Token:
            token = memory.claim(partition, ctx)
            return lies[0] if lies else token

        lifecycle, _, _ = _scratch(_Wrapped(memory, claim=claim))
        held = None
        if case == "lie-same":  # held from an earlier assignment, then claimed "again"
            lifecycle.assign([0])
            held = lifecycle.owned().get(0)
        lies.append(Token(0, 0) if held is None else held)
        got = _outcome(lambda: lifecycle.assign([0]))
        problems = []
        if got[0] != "Fenced" or "incompatible" not in str(got[1]):
            problems.append(f"a claim that returned {lies[0]} holding {held}: {got[0]} {got[1]}")
        return problems + _retired_after(lifecycle, memory, case)
    if case == "claim-unavailable":  # every claim unavailable: the policy's calls and waits
        memory = MEMORY_STORE()

        def refuse(partition: int, ctx: Context) -> Token:
            raise Unavailable("the store is down")

        lifecycle, _, clock = _scratch(_Wrapped(memory, claim=refuse))
        got = _outcome(lambda: lifecycle.assign([1]))
        problems = []
        if not isinstance(got[1], RetriesExhausted) or clock.ms != round(sum(WAITS[:2]) * 1000):
            problems.append(f"claims always unavailable: {got[0]}, {clock.ms} ms waited")
        return problems + _retired_after(lifecycle, memory, case)
    if case == "process-unowned":
        lifecycle, memory, _ = _scratch()
        got = _outcome(lambda: lifecycle.process(0, _records(0, 1)[0]))
        problems = []
        if got[0] != "Fenced" or "without a saved owner" not in str(got[1]):
            problems.append(f"process without an owner: {got[0]} {got[1]}")
        if memory.backend.write_log:
            problems.append(f"process without an owner wrote {memory.backend.write_log}")
        return problems + _retired_after(lifecycle, memory, case)
    if case == "process-behind":
        lifecycle, memory, _ = _scratch()
        record = _records(0, 1)[0]
        lifecycle.assign([0])
        lifecycle.seek(0)
        done = lifecycle.process(0, record)
        writes = len(memory.backend.write_log)
        got = _outcome(lambda: lifecycle.process(0, record))
        problems = []
        if done != Token(1, 1) or got[0] != "InvalidInput" or "behind" not in str(got[1]):
            problems.append(f"the same record twice: {done}, then {got[0]} {got[1]}")
        if len(memory.backend.write_log) != writes:
            problems.append("a record behind the local frontier was written")
        return problems + _retired_after(lifecycle, memory, case)
    if case == "mutex-budget":  # a callback that waits for the mutex past its budget
        inner: list[tuple[str, Any]] = []
        reentered: list[Lifecycle] = []

        class Reentrant(MemorySourceLog):
            def validate(self, partition: int, ctx: Context) -> None:
                inner.append(_outcome(lambda: reentered[0].seek(partition)))

        memory = MEMORY_STORE()
        lifecycle = LIFECYCLE(
            memory,
            Reentrant(_records(0, 1), (0,)),
            clock=LogicalClock(),
            retry=RETRY_POLICY(3, WAITS[:2]),
            budget=0.001,
            name="scratch",
        )
        reentered.append(lifecycle)
        lifecycle.assign([0])
        problems = []
        if [k for k, _ in inner] != ["DeadlineExceeded"] or "mutex" not in str(inner[0][1]):
            problems.append(f"a call waiting for the held mutex past its budget: {inner}")
        if not isinstance(lifecycle.retired, DeadlineExceeded):
            problems.append(f"the lifetime is retired by {lifecycle.retired!r}, not the deadline")
        later = _outcome(lambda: lifecycle.seek(0))
        if later[0] != "LifetimeRetired":
            problems.append(f"a later seek gave {later[0]}, not LifetimeRetired")
        return problems
    assert case == "foreign"  # a store that raises something no RemoraError

    def broken(partition: int, ctx: Context) -> Token:
        raise ValueError("a bug in the store")

    memory = MEMORY_STORE()
    lifecycle, _, _ = _scratch(_Wrapped(memory, observe=broken))
    lifecycle.assign([0])
    got = _outcome(lambda: lifecycle.seek(0))
    retired = lifecycle.retired
    problems = []
    if got[0] != "ValueError" or not (
        type(retired) is RemoraError and "a bug in the store" in str(retired)
    ):
        problems.append(f"a store raising ValueError: {got[0]}, retired {retired!r}")
    return problems + _retired_after(lifecycle, memory, case)


@attrs.define
class _Client:
    """A scripted source client over a log client's records."""

    records: list[SourceRecord]
    fail: str = ""
    on_assigned: Callable[[Sequence[int]], None] | None = None
    on_revoked: Callable[[Sequence[int]], None] | None = None
    polls: int = 0
    closed: bool = False
    sought: list[tuple[int, int]] = attrs.field(factory=list)

    def subscribe(
        self,
        on_assigned: Callable[[Sequence[int]], None],
        on_revoked: Callable[[Sequence[int]], None],
    ) -> None:
        self.on_assigned, self.on_revoked = on_assigned, on_revoked

    def seek(self, partition: int, offset: int) -> None:
        if self.fail == "seek-raises":
            raise ValueError("the client cannot seek")
        self.sought.append((partition, offset))

    def poll(self, max_records: int) -> list[SourceRecord]:
        self.polls += 1
        if self.polls == 1:
            assert self.on_assigned is not None
            self.on_assigned([0])
            if self.fail == "poll-raises":
                raise ValueError("the client broke")
            return self.records
        return []

    def close(self) -> None:
        self.closed = True


def runner_problems(case: str, n: int) -> list[str]:
    """A :class:`Runner` over a scratch lifecycle and a scripted client (``case`` of
    :data:`RUNNER_CASES`): its stats, its error attribution, its clean-up."""
    lifecycle, _, _ = _scratch(n=n)
    records = _records(0, n)
    if case == "record-refused":
        records = [*records, records[0]]  # the first record again: behind the frontier
    client = _Client(records, case)
    seen: list[int] = []
    runner = RUNNER(lifecycle, client)

    def progress(stats: RunStats) -> None:
        seen.append(stats.processed)

    got = _outcome(lambda: runner.run(progress=progress))
    problems = []
    if lifecycle.owned() or not client.closed:
        problems.append(f"{case}: after the run holds {lifecycle.owned()}, closed {client.closed}")
    if case == "poll-raises":  # outside any partition: the run itself fails
        if got[0] != "ValueError":
            problems.append(f"a client failing outside any partition: {got[0]} {got[1]}")
        return problems
    if got[0] != "ok":
        return [*problems, f"{case}: the run raised {got[0]} {got[1]}"]
    stats: RunStats = got[1]
    want: tuple[Any, ...]
    if case == "progress":
        want = (n, [n, n], None, None, None)
    elif case == "seek-raises":
        want = (0, [], "RemoraError", 0, None)
    else:
        want = (n, [], "InvalidInput", 0, 0)
    error = None if stats.error is None else type(stats.error).__name__
    seen_stats = (stats.processed, seen, error, stats.failed_partition, stats.failed_offset)
    if seen_stats != want:
        problems.append(
            f"{case}: (processed, progress, error, failed partition, offset) {seen_stats}, "
            f"not {want}"
        )
    if case == "seek-raises" and "cannot seek" not in str(stats.error):
        problems.append(f"{case}: the error {stats.error!r} does not name the client's")
    return problems


class ContractChecks:
    """Mixin rules for a :class:`~remora.testing.machines.WorkerScheduleMachine` (module
    docstring); list it before the machine class."""

    contract_reach: ClassVar[set[tuple[str, str]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.contract_reach = set()

    def _contract(self, kind: str, variant: str, problems: list[str]) -> None:
        type(self).contract_reach.add((kind, variant))
        if problems:
            self.fail("ERROR contract", "; ".join(problems[:3]))  # type: ignore[attr-defined]

    @rule(
        max_calls=st.integers(-1, 4),
        waits=st.lists(st.sampled_from((-0.1, 0.0, *WAITS)), max_size=4).map(tuple),
    )
    def retry_policy(self, max_calls: int, waits: tuple[float, ...]) -> None:
        valid = max_calls >= 1 and len(waits) == max_calls - 1 and all(w >= 0 for w in waits)
        self._contract("retry", "valid" if valid else "refused", retry_problems(max_calls, waits))

    @rule(operation=st.sampled_from(list(Operation)))
    def fault_seam(self, operation: Operation) -> None:
        """Every outcome x effect for the drawn operation (each a pure call: cheap)."""
        problems = no_faults_problems(operation)
        for outcome in Outcome:
            for effect in SEAM_EFFECTS:
                problems += seam_problems(operation, outcome, effect)
        refused = operation in (Operation.VALIDATE, Operation.OBSERVE)
        self._contract("seam", "reads" if refused else "writes", problems)

    @rule(
        cases=st.lists(st.sampled_from(LIFECYCLE_CASES), min_size=1, max_size=4, unique=True),
        partitions=st.lists(st.integers(0, 1), min_size=1, max_size=3),
    )
    def lifecycle_contract(self, cases: list[str], partitions: list[int]) -> None:
        for case in cases:  # a scratch lifecycle each: cheap, so a few a step
            self._contract("lifecycle", case, lifecycle_problems(case, partitions))

    @rule(case=st.sampled_from(RUNNER_CASES), n=st.integers(1, 3))
    def runner_contract(self, case: str, n: int) -> None:
        self._contract("runner", case, runner_problems(case, n))
