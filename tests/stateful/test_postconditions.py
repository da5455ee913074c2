"""Every per-attempt postcondition (:mod:`remora.sim.rules`) shown catching a planted bug.

Each case runs a short schedule twice: through the real lifecycle and store (no
``postcondition-*`` violation) and with one planted bug (the row's violation appears).  The
bugs are test-only subclasses or patches, as in :mod:`tests.common.planted`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from unittest import mock

import attrs
import pytest

import remora.clock
import remora.faults
import remora.store.memory
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import Canceled, UnknownResult
from remora.sim.report import replay
from remora.sim.rules import Call, check_call
from remora.sim.scheduler import LifecycleFactory, StoreFactory
from remora.sim.trace import FaultSelector, SimConfig, Step
from remora.store import MemoryStore, StateStore, Token
from remora.store.memory import MemoryBackend, Write
from remora.worker import Lifecycle
from tests.common import planted as bug
from tests.common.planted import OWN, sel, trace

# -- planted bugs ---------------------------------------------------------------------------


class KeepsOldTokenOnReassign(Lifecycle):
    """A second assignment of a held partition keeps the old token (assign row)."""

    def assign(self, partitions: Any) -> dict[int, Token]:
        old = self.owned()
        tokens = super().assign(partitions)
        for p in tokens:
            if p in old:
                self._owned[p] = old[p]
        return tokens


class SeekClaimsAgain(Lifecycle):
    """Seek installs a fresh epoch instead of re-reading under the retained one (seek row)."""

    def seek(self, partition: int) -> int:
        def run(ctx: Context) -> int:
            token = self.store.claim(partition, ctx)
            self._owned[partition] = token
            return token.frontier

        return self._guarded("seek", run)


class StopOnlyCancels(Lifecycle):
    """Stop cancels the context but forgets to mark the lifetime stopped (stop row)."""

    def stop(self) -> None:
        self._ctx.cancel(Canceled(f"{self.name} stopped"))


class WaitsDouble(Lifecycle):
    """Retries wait twice the policy's waits (retry row)."""

    def _before_call(self, ctx: Context, call: int) -> None:
        if call > 1:
            ctx.sleep(2 * self.retry.wait_before(call))
        ctx.check()


class SwallowsCancel(Lifecycle):
    """A canceled process call is taken as done (interleave stop rows)."""

    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        try:
            return super()._process(ctx, partition, saved, record)
        except Canceled:
            return Token(saved.epoch, record.offset + 1)


class TrustsUnknownCommit(Lifecycle):
    """An unknown process result is trusted as committed without the recovery read (the
    seed's epoch race)."""

    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        try:
            return self.store.process(partition, saved, record, ctx)
        except UnknownResult:
            return Token(saved.epoch, record.offset + 1)


class ClaimForgetsToWrite(MemoryBackend):
    """A committed claim returns the new epoch but never writes it (effect/commit rows)."""

    def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
        token = super().claim(partition, ctx, False)
        return token


class ProcessIgnoresRollback(MemoryBackend):
    """``commit=False`` is ignored: an unknown-aborted process is applied (effect row)."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        return super().process(partition, token, record, ctx, True)


def backend_store(backend: type[MemoryBackend]) -> StoreFactory:
    def factory(config: SimConfig) -> StateStore:
        return StateStore(backend())

    return factory


def _unknown_is_ok() -> AbstractContextManager[object]:
    """The seam forgets that an unknown-committed reply is unknown: it returns ok."""
    return mock.patch.object(
        remora.faults, "UNKNOWN_OUTCOMES", frozenset({remora.faults.Outcome.UNKNOWN_ABORTED})
    )


def _skip_fence() -> AbstractContextManager[object]:
    return mock.patch.object(remora.store.memory, "check_fence", lambda *args: None)


def delayed(op: str, outcome: str, delay_ms: int) -> FaultSelector:
    s = sel(op, outcome)
    return FaultSelector(s.operation, s.call, s.outcome, delay_ms, s.interleave)


PROCESS = Step("process", 0, 0)


@attrs.frozen
class Case:
    kind: str
    steps: tuple[Step, ...]
    lifecycle: LifecycleFactory = Lifecycle
    store: StoreFactory | None = None
    patch: Callable[[], AbstractContextManager[object]] | None = None


CASES = [
    # the method table
    Case("assign", (*OWN, Step("assign", 0, 0)), KeepsOldTokenOnReassign),
    Case(
        "assign",
        (Step("start", 0), Step("assign", 0, 0, (sel("validate", "abort"),))),
        bug.ClaimsBeforeValidating,
    ),
    Case("seek", OWN, SeekClaimsAgain),
    Case("process", (*OWN, PROCESS), bug.ProcessesNothing),
    Case("revoke", (*OWN, Step("revoke", 0)), bug.RevokeForgets),
    Case("stop", (*OWN, Step("stop", 0)), StopOnlyCancels),
    Case(
        "failure",
        (*OWN, Step("process", 0, 0, (sel("process", "commit", at="before", replacement=1),))),
        bug.KeepsTokensOnRetire,
    ),
    Case("rejected", (*OWN, Step("stop", 0), Step("assign", 0, 0)), bug.NeverRetires),
    Case("retry", (*OWN, Step("process", 0, 0, (sel("process", "abort"),))), WaitsDouble),
    # the budget table: a mutex held by a concurrent call of the lifetime
    Case("mutex-budget", (*OWN, Step("process", 0, 0, (), 20_001)), bug.BudgetAfterMutex),
    Case("mutex-budget", (*OWN, Step("assign", 0, 0, (), 20_001)), bug.BudgetAfterMutex),
    Case(
        "budget",
        (*OWN, Step("process", 0, 0, (sel("process", "abort"),), 19_950)),
        bug.BudgetAfterMutex,
    ),
    Case(
        "spurious-fence",
        (*OWN, Step("process", 0, 0, (sel("process", "unknown-aborted"),))),
        bug.FencesWhenNothingHappened,
    ),
    # the fault-boundary table
    Case(
        "effect", (Step("start", 0), Step("assign", 0, 0)), store=backend_store(ClaimForgetsToWrite)
    ),
    Case(
        "effect",
        (*OWN, Step("process", 0, 0, (sel("process", "unknown-aborted"),))),
        store=backend_store(ProcessIgnoresRollback),
    ),
    Case(
        "unknown-committed",
        (*OWN, Step("process", 0, 0, (sel("process", "unknown-committed"),))),
        patch=_unknown_is_ok,
    ),
    Case(
        "interleave-before",
        (*OWN, Step("process", 0, 0, (sel("process", "commit", at="before", stop=True),))),
        SwallowsCancel,
    ),
    Case(
        "interleave-after",
        (*OWN, Step("process", 0, 0, (sel("process", "commit", at="after", stop=True),))),
        SwallowsCancel,
    ),
    Case(
        "interleave-before",
        (*OWN, Step("process", 0, 0, (sel("process", "commit", at="before", replacement=1),))),
        patch=_skip_fence,
    ),
    Case(
        "epoch-race",
        (
            *OWN,
            Step(
                "process", 0, 0, (sel("process", "unknown-committed", at="after", replacement=1),)
            ),
        ),
        TrustsUnknownCommit,
    ),
]


def kinds(case: Case, planted: bool) -> list[str]:
    schedule = trace(*case.steps)
    patch = case.patch if planted and case.patch is not None else nullcontext
    with patch():
        sim = replay(
            schedule,
            lifecycle_factory=case.lifecycle if planted else Lifecycle,
            store_factory=case.store if planted else None,
        )
    return [v.kind for v in sim.violations]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.kind}")
def test_postcondition_catches_its_planted_bug(case: Case) -> None:
    assert not [k for k in kinds(case, planted=False) if k.startswith("postcondition-")]
    assert f"postcondition-{case.kind}" in kinds(case, planted=True)


# Rows whose bug sits in the fault seam or the scheduler's own bookkeeping are shown on the
# call record the scheduler would build from such a bug.
WRITE = Write(0, "process", 1, 1, 0)


def call(**changes: Any) -> Call:
    base = Call(0, 0, "process", "commit", True, True, "ok", (WRITE,), 0)
    return attrs.evolve(base, **changes)


SEAM_CASES = [
    ("commit", call(applied=False, writes=())),  # ok reported without the effect
    ("abort", call(outcome="abort", observation="unavailable")),  # an abort that applied
    ("abort", call(outcome="abort", observation="ok", applied=False, writes=())),
    ("unknown-aborted", call(outcome="unknown-aborted", observation="unknown")),
    ("unknown-committed", call(outcome="unknown-committed", observation="ok")),
    ("delay", call(delay_ms=20, elapsed_ms=0)),  # the delay was not spent
    ("effect", call(selected=False, applied=True, writes=(WRITE, WRITE))),
    ("effect", call(operation="observe", selected=False, applied=True, writes=(WRITE,))),
]


@pytest.mark.parametrize(("kind", "bad"), SEAM_CASES, ids=[k for k, _ in SEAM_CASES])
def test_fault_rows_on_planted_call_records(kind: str, bad: Call) -> None:
    from remora.sim.rules import After

    after = After({}, False, None)
    assert check_call(call(), "ok", after) == []
    assert f"postcondition-{kind}" in [v.kind for v in check_call(bad, "ok", after)]


def test_rules_are_quiet_on_the_corpus_and_the_scenarios() -> None:
    """Belt and braces beside the corpus test: no postcondition fires on real code."""
    from remora.sim.generate import generate

    for seed in (1, 2, 3):
        for cls in ("valid", "conflict"):
            sim = replay(generate(seed, cls))
            assert not sim.violations, sim.violations[:1]


def test_memory_store_write_log_records_what_it_wrote() -> None:
    store = MemoryStore()
    ctx = Context(remora.clock.LogicalClock())
    token = store.claim(0, ctx)
    store.process(0, token, SourceRecord(0, 0, True, None, b"{}"), ctx)
    store.backend.claim(0, ctx, False)  # rolled back: not logged
    assert [w.operation for w in store.backend.write_log] == ["claim", "process"]
    assert store.backend.write_log[1] == Write(0, "process", 1, 1, 0)


def test_an_assigns_recovery_read_after_a_replacement_is_not_a_seek() -> None:
    """Regression (a false positive found by the machines): in an assign, an observe with a
    replacement interleaved before it is the recovery read of an unknown claim, and the
    fresh claim that follows may succeed."""
    steps = (
        Step("start", 0),
        Step(
            "assign",
            0,
            0,
            (
                sel("claim", "unknown-committed"),
                sel("observe", "commit", at="before", replacement=1),
            ),
        ),
    )
    sim = replay(trace(*steps))
    assert sim.attempts[1].result == "ok"
    assert not [v for v in sim.violations if v.kind.startswith("postcondition-")]


def test_a_fenced_effect_with_a_stop_after_it_is_observed_fenced() -> None:
    """Regression (a false positive found by the machines once their generation got
    cheaper): a process whose first call aborts with a replacement interleaved before it
    retries into the replacement's fence; a stop interleaved after that refused effect is
    seen after the fence, so the caller observes ``fenced``, not ``canceled``."""
    steps = (
        Step("start", 0),
        Step("assign", 0, 0),
        Step("seek", 0, 0),
        Step(
            "process",
            0,
            0,
            (
                sel("process", "abort", at="before", replacement=1),
                sel("process", "unknown-committed", call=2, at="after", stop=True, replacement=2),
            ),
        ),
    )
    sim = replay(trace(*steps))
    assert sim.attempts[3].result == "fenced"
    assert not [v for v in sim.violations if v.kind.startswith("postcondition-")]


def test_a_stop_after_an_applied_effect_may_not_be_observed_fenced() -> None:
    """The planted bug for the row above: ``fenced`` is allowed at ``after`` only when
    nothing applied (a call that wrote and then reported the fence is still caught)."""
    from remora.sim.rules import After

    stopped = After({}, True, None)
    refused = call(at="after", stop=True, observation="fenced", applied=False, writes=())
    assert check_call(refused, "fenced", stopped) == []
    wrote = call(at="after", stop=True, observation="fenced")
    assert "postcondition-interleave-after" in [
        v.kind for v in check_call(wrote, "fenced", stopped)
    ]


def test_a_fenced_write_then_a_stop_after_it_is_not_a_violation() -> None:
    """Regression (a false positive the many-partitions machine found once its draws
    shifted): a replacement before call 1 moved the epoch, so call 2's write was refused by
    the store's fence (nothing applied) before the stop interleaved after it ran — the
    fence wins, as in the outcome table."""
    steps = (
        Step("start", 0),
        Step("start", 1),
        Step("assign", 1, 0),
        Step("seek", 1, 0),
        Step(
            "process",
            1,
            0,
            (sel("process", "unknown-committed", at="after", replacement=2),),
        ),
        Step(
            "process",
            2,
            0,
            (
                sel("process", "abort", at="before", replacement=3),
                sel("process", "commit", 2, at="after", stop=True, replacement=4),
            ),
        ),
    )
    sim = replay(trace(*steps))
    assert [c.observation for c in sim.calls if c.lifetime == 2 and c.selected][-1] == "fenced"
    assert not [v for v in sim.violations if v.kind.startswith("postcondition-")]


def test_the_stop_after_row_still_refuses_a_fenced_call_that_applied() -> None:
    """The relaxed row keeps its teeth: ``fenced`` after a stop is allowed only when the
    write did not happen."""
    from remora.sim.rules import After

    after = After({}, True, None)
    stopped = call(at="after", stop=True, observation="fenced")
    assert "postcondition-interleave-after" in [
        v.kind for v in check_call(stopped, "fenced", after)
    ]
    refused = attrs.evolve(stopped, applied=False, writes=())
    assert check_call(refused, "fenced", after) == []
