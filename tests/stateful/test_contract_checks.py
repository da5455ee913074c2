"""The contract rules (:mod:`tests.stateful.contract_checks`) shown catching planted bugs.

Each planted bug replaces one thing the rules build (the lifecycle, the retry policy, the
fault seam, the runner or the memory store) with a subclass or wrapper that is wrong in one
way; the real code passes every variant of every rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pytest

from remora.context import Context
from remora.errors import DeadlineExceeded, Fenced, InvalidInput, RemoraError
from remora.faults import IOCall, IOHook, IOReport, Observation, Operation, Outcome
from remora.faults import controlled_call as real_controlled_call
from remora.store import MemoryStore, Token
from remora.store.memory import MemoryBackend, Write
from remora.worker.lifecycle import Lifecycle
from remora.worker.retry import RetryPolicy
from remora.worker.runner import Runner, RunStats
from tests.stateful import contract_checks
from tests.stateful.contract_checks import (
    LIFECYCLE_CASES,
    RUNNER_CASES,
    SEAM_EFFECTS,
    lifecycle_problems,
    no_faults_problems,
    retry_problems,
    runner_problems,
    seam_problems,
)

PARTITIONS = ([0], [1, 0], [0, 1, 0], [1, 1])


def everything() -> list[str]:
    problems: list[str] = []
    for op in Operation:
        for outcome in Outcome:
            for effect in SEAM_EFFECTS:
                problems += seam_problems(op, outcome, effect)
        problems += no_faults_problems(op)
    for case in LIFECYCLE_CASES:
        for parts in PARTITIONS:
            problems += lifecycle_problems(case, parts)
    for case in RUNNER_CASES:
        for n in (1, 3):
            problems += runner_problems(case, n)
    for max_calls in range(-1, 5):
        for waits in ((), (0.1,), (0.0, 0.2), (-0.1,), (0.1, 0.2, 0.4)):
            problems += retry_problems(max_calls, waits)
    return problems


def test_the_real_code_passes() -> None:
    assert everything() == []


# -- planted bugs ------------------------------------------------------------------------------


class AssignReturnsNothing(Lifecycle):
    """assign retains the tokens but returns an empty map."""

    def assign(self, partitions: Iterable[int]) -> dict[int, Token]:
        super().assign(partitions)
        return {}


class TrustsEveryClaim(Lifecycle):
    """assign keeps whatever token the store's claim returns (no sanity check)."""

    def assign(self, partitions: Iterable[int]) -> dict[int, Token]:
        wanted = list(partitions)

        def run(ctx: Context) -> dict[int, Token]:
            for partition in wanted:
                self._validate(ctx, partition)
                self._owned[partition] = self._claim(ctx, partition)
            return {p: self._owned[p] for p in wanted}

        return self._guarded("assign", run)


class RetainsAfterStop(Lifecycle):
    """assign and seek retain what the store answered even when the lifetime was stopped
    while the answer arrived (no cancellation check before retaining)."""

    def assign(self, partitions: Iterable[int]) -> dict[int, Token]:
        wanted = list(partitions)

        def run(ctx: Context) -> dict[int, Token]:
            for partition in wanted:
                self._validate(ctx, partition)
                token = self._claim(ctx, partition)
                previous = self._owned.get(partition)
                if token.epoch < 1 or (previous is not None and token.epoch <= previous.epoch):
                    raise Fenced(f"partition {partition}: claim returned incompatible {token}")
                self._owned[partition] = token
            return {p: self._owned[p] for p in wanted}

        return self._guarded("assign", run)

    def seek(self, partition: int) -> int:
        def run(ctx: Context) -> int:
            saved = self._owned[partition]
            seen = self.store.observe(partition, ctx)
            self._owned[partition] = Token(saved.epoch, seen.frontier)
            return seen.frontier

        return self._guarded("seek", run)


class ProcessWithoutOwnerIsIgnored(Lifecycle):
    """A record for a partition nobody assigned is dropped silently."""

    def process(self, partition: int, record: Any) -> Token:
        if partition not in self._owned and self.live:
            return Token(0, 0)
        return super().process(partition, record)


class MutexTimeoutDoesNotRetire(Lifecycle):
    """A call that spent its budget waiting for the mutex fails without retiring."""

    def _guarded(self, operation: str, run: Callable[[Context], Any]) -> Any:
        try:
            return super()._guarded(operation, run)
        except DeadlineExceeded as exc:
            if "mutex" in str(exc) and self._retired is exc:
                self._retired = None
            raise


class ForeignErrorNotWrapped(Lifecycle):
    """A foreign exception retires the lifetime with a bare, nameless error."""

    def _retire(self, error: RemoraError) -> None:
        super()._retire(RemoraError("failed") if type(error) is RemoraError else error)


class EpochStepsByTwo(MemoryBackend):
    """A claim installs epoch + 2 (still newer, still fenced, but not the next epoch)."""

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        token = super().claim(partition, ctx, commit)
        if not commit:
            return token
        with self._lock:
            part = self._get(partition)
            part.epoch += 1
            self.write_log[-1] = Write(partition, "claim", part.epoch, part.frontier)
            return Token(part.epoch, part.frontier)


def epoch_by_two_store() -> MemoryStore:
    store = MemoryStore()
    store.backend = EpochStepsByTwo()
    return store


def lenient_policy(max_calls: int = 3, waits: tuple[float, ...] = (0.1, 0.2)) -> RetryPolicy:
    """A retry policy without validation."""
    with attrs.validators.disabled():
        return RetryPolicy(max_calls, waits)


def policy_without_call_check(max_calls: int = 3, waits: tuple[float, ...] = (0.1, 0.2)) -> Any:
    """A policy that checks only the waits (a zero-call policy is refused for its waits)."""
    if len(waits) != max_calls - 1:
        raise InvalidInput("waits must hold one non-negative wait per retry (max_calls - 1)")
    return lenient_policy(max_calls, waits)


def all_operations_write(hook: IOHook, call: IOCall, ctx: Context, effect: Any) -> Any:
    """The seam that lets every operation take a write's unknown outcomes."""
    return real_controlled_call(hook, IOCall(Operation.CLAIM, call.partition), ctx, effect)


class _OkHook:
    def __init__(self, hook: IOHook) -> None:
        self.hook = hook

    def decide(self, call: IOCall, ctx: Context) -> Any:
        return self.hook.decide(call, ctx)

    def boundary(self, call: IOCall, at: Any, ctx: Context) -> None:
        self.hook.boundary(call, at, ctx)

    def returned(self, call: IOCall, report: IOReport) -> None:
        if report.foreign is not None:  # as on main before issue 10: a bug reported as ok
            report = IOReport(report.decision, True, Observation.OK, None, None)
        self.hook.returned(call, report)


class _UnknownHook(_OkHook):
    def returned(self, call: IOCall, report: IOReport) -> None:
        if report.foreign is not None:  # every foreign failure reported as an unknown effect
            report = IOReport(report.decision, None, report.observation, None, report.foreign)
        self.hook.returned(call, report)


def foreign_effect_unknown(hook: IOHook, call: IOCall, ctx: Context, effect: Any) -> Any:
    return real_controlled_call(_UnknownHook(hook), call, ctx, effect)


def foreign_reported_ok(hook: IOHook, call: IOCall, ctx: Context, effect: Any) -> Any:
    return real_controlled_call(_OkHook(hook), call, ctx, effect)


class RunnerSwallowsEverything(Runner):
    """The runner turns a client's failure outside any partition into a partition error."""

    def run(self, **kwargs: Any) -> RunStats:
        try:
            return super().run(**kwargs)
        except ValueError as exc:
            self.stats.error = RemoraError(repr(exc))
            return self.stats


class RunnerWithoutProgress(Runner):
    """The runner never reports progress."""

    def run(self, **kwargs: Any) -> RunStats:
        kwargs["progress"] = None
        return super().run(**kwargs)


class RunnerKeepsForeignErrors(Runner):
    """A foreign exception in a partition is stored as is (not a RemoraError)."""

    def run(self, **kwargs: Any) -> RunStats:
        stats = super().run(**kwargs)
        if type(stats.error) is RemoraError:
            stats.error = ValueError(str(stats.error))  # type: ignore[assignment]
        return stats


PLANTED: list[tuple[str, Any, str]] = [
    ("LIFECYCLE", AssignReturnsNothing, "assign"),
    ("LIFECYCLE", TrustsEveryClaim, "a claim that returned"),
    ("LIFECYCLE", ProcessWithoutOwnerIsIgnored, "process without an owner"),
    ("LIFECYCLE", RetainsAfterStop, "a stop while the claim reply arrived"),
    ("LIFECYCLE", RetainsAfterStop, "a stop while the observe reply arrived"),
    ("LIFECYCLE", MutexTimeoutDoesNotRetire, "retired by None"),
    ("LIFECYCLE", ForeignErrorNotWrapped, "a store raising ValueError"),
    ("MEMORY_STORE", epoch_by_two_store, "installed epoch 2"),
    ("RETRY_POLICY", lenient_policy, "RetryPolicy(0"),
    ("RETRY_POLICY", policy_without_call_check, "refused for another reason"),
    ("CONTROLLED_CALL", all_operations_write, "refused before anything"),
    ("CONTROLLED_CALL", foreign_reported_ok, "/foreign:"),
    ("CONTROLLED_CALL", foreign_effect_unknown, "/commit/hook-raises:"),
    ("RUNNER", RunnerSwallowsEverything, "a client failing outside any partition"),
    ("RUNNER", RunnerWithoutProgress, "progress:"),
    ("RUNNER", RunnerKeepsForeignErrors, "seek-raises:"),
]


@pytest.mark.parametrize(
    ("name", "planted", "found"), PLANTED, ids=lambda p: getattr(p, "__name__", str(p))
)
def test_a_planted_bug_is_reported(
    monkeypatch: pytest.MonkeyPatch, name: str, planted: Any, found: str
) -> None:
    monkeypatch.setattr(contract_checks, name, planted)
    problems = everything()
    assert any(found in p for p in problems), problems[:5]
