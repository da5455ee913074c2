"""Test-only broken variants of production code and the small traces that expose them.

Nothing here is reachable from production: each bug is a subclass or a monkeypatch applied
inside a test."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from remora.context import Context
from remora.domain import SourceRecord, SubjectState
from remora.errors import Fenced, RemoraError, RetriesExhausted, Unavailable, UnknownResult
from remora.faults import At, Operation, Outcome
from remora.sim.mutations import (  # the named mutations' lifecycles live in the package
    AdoptsReadEpoch,
    FrontierBeforeResolution,
    KeepsTokensOnRetire,
    RetriesUnknownBlindly,
    RevokeForgets,
    SeekIgnoresStop,
    SkipsCancelAfterWakeup,
)
from remora.sim.trace import FaultSelector, Interleave, SimConfig, Step, Toolchain, Trace
from remora.store import StateStore, Token
from remora.store.base import check_fence
from remora.store.sql import decision_writes
from remora.store.sqlite import SqliteBackend
from remora.worker import Lifecycle

__all__ = [
    "AdoptsReadEpoch",
    "BudgetAfterMutex",
    "ClaimsBeforeValidating",
    "Crashes",
    "FencesWhenNothingHappened",
    "FrontierBeforeResolution",
    "KeepsTokensOnRetire",
    "NeverAssignsTwice",
    "NeverRetires",
    "ProcessesNothing",
    "RetriesUnknownBlindly",
    "RevokeForgets",
    "SeekIgnoresStop",
    "SkipsCancelAfterWakeup",
    "SubjectsByNameSqlite",
]


T = TypeVar("T")


def am(subject: str, op: str, rev: int, **body: Any) -> bytes:
    return json.dumps({"subject": subject, "op": op, "revision": rev, "body": body}).encode()


SOURCE = (
    SourceRecord(0, 0, True, None, am("s", "submit", 1, v=1)),
    SourceRecord(0, 1, True, None, am("s", "correct", 2, v=2)),
    SourceRecord(0, 2, True, None, am("t", "submit", 1, v=3)),
)
OWN = (Step("start", 0), Step("assign", 0, 0), Step("seek", 0, 0))


def sel(op: str, outcome: str, call: int = 1, **interleave: Any) -> FaultSelector:
    il = None
    if interleave:
        il = Interleave(
            At(interleave.pop("at")), interleave.get("stop", False), interleave.get("replacement")
        )
    return FaultSelector(Operation(op), call, Outcome(outcome), 0, il)


def trace(*steps: Step, drain: bool = True) -> Trace:
    return Trace(
        Toolchain("3.11.7", "0.1.0", None, "planted"),
        None,
        SimConfig(1, "custom", max(1, len(steps))),
        SOURCE,
        tuple(steps),
        drain,
    )


# -- broken lifecycles -----------------------------------------------------------------


class NeverRetires(Lifecycle):
    """A stopped lifetime still accepts callbacks and starts I/O (both guards dropped: the
    lifetime check and the cancellation check before a call)."""

    @property
    def live(self) -> bool:
        return True

    def _before_call(self, ctx: Context, call: int) -> None:
        if call > 1:
            ctx.sleep(self.retry.wait_before(call))


class ProcessesNothing(Lifecycle):
    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        return saved


class Crashes(Lifecycle):
    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        raise KeyError("planted")


class NeverAssignsTwice(Lifecycle):
    """Refuses every assignment after the first lifetime's (recovery cannot take over)."""

    assigned_once = False

    def _claim(self, ctx: Context, partition: int) -> Token:
        if NeverAssignsTwice.assigned_once and self.name != "lifetime 0":
            raise UnknownResult("planted: claims after the first lifetime never resolve")
        NeverAssignsTwice.assigned_once = True
        return super()._claim(ctx, partition)


# -- the worker machines' escapes (issue 21, item 8): each killed by a machine alone --------


class FencesWhenNothingHappened(Lifecycle):
    """After an unknown process result, anything but "it committed" is taken as a fence:
    the branch that retries the same record when the recovery read shows nothing happened
    is missing, so a healthy owner raises ``Fenced``, retires and gives up its partition."""

    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        last: Exception | None = None
        for call in range(1, self.retry.max_calls + 1):
            self._before_call(ctx, call)
            try:
                return self.store.process(partition, saved, record, ctx)
            except Unavailable as exc:
                last = exc
            except UnknownResult as exc:
                seen = self._recovery_read(ctx, partition)
                if seen.epoch == saved.epoch and seen.frontier == record.offset + 1:
                    return seen
                raise Fenced(f"partition {partition}: unknown commit, read {seen}") from exc
        raise RetriesExhausted("process", self.retry.max_calls, last)


class SubjectsByNameSqlite(SqliteBackend):
    """SQLite whose process reads a subject's state by its name alone (the ``partition``
    condition dropped from the ``SELECT``): a subject name used on two partitions reads the
    other partition's state, although subjects are scoped to their partition."""

    def process(
        self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
    ) -> Token:
        with self._transaction(ctx, commit) as conn:
            epoch, frontier, next_seq = self._installed(conn, partition)
            check_fence(partition, Token(epoch, frontier), token, record)
            subject = self.processing.key(record)
            current = None
            if subject is not None:
                row = conn.execute(
                    "SELECT revision, status, blocked, body FROM remora_subject WHERE subject = ?",
                    (subject,),
                ).fetchone()
                if row is not None:
                    current = SubjectState(subject, row[0], row[1], bool(row[2]), row[3])
            decision = self.processing.apply(record, current, next_seq)
            for statement, params in decision_writes(
                partition, record, decision, next_seq, placeholder="?"
            ):
                conn.execute(statement, params)
        return Token(epoch, record.offset + 1)


def subjects_by_name_sqlite(config: SimConfig) -> StateStore:
    """A fresh in-memory :class:`SubjectsByNameSqlite` store per run."""
    return StateStore(SubjectsByNameSqlite(":memory:"))


class BudgetAfterMutex(Lifecycle):
    """The operation budget starts once the mutex is taken (the context is made inside the
    lock, the way it reads naturally): the wait for a busy mutex is free, so a callback
    that waited longer than its budget still makes its I/O."""

    def _guarded(self, operation: str, run: Callable[[Context], T]) -> T:
        with self._mutex:
            budget = self.budget
            ctx = self._ctx.child(budget=budget)
            disarm = self.clock.call_later(
                budget, lambda: ctx.cancel(self._expired(operation, budget))
            )
            try:
                self._admit(operation)
                try:
                    return run(ctx)
                except Exception as exc:
                    self._retire(exc if isinstance(exc, RemoraError) else RemoraError(repr(exc)))
                    raise
            finally:
                disarm()
                ctx.close()


class ClaimsBeforeValidating(Lifecycle):
    """Assign claims the partition and then validates its source (the two lines swapped):
    an assignment whose validation fails has already installed an epoch, fencing the
    partition's healthy owner for an assignment that never happened.  (Written as a fresh
    realistic bug; the worker machines alone missed it until the ``assign`` row required
    a validation before each claim.)"""

    def assign(self, partitions: Any) -> dict[int, Token]:
        wanted = list(partitions)

        def run(ctx: Context) -> dict[int, Token]:
            tokens: dict[int, Token] = {}
            for partition in wanted:
                token = self._claim(ctx, partition)
                self._validate(ctx, partition)
                previous = self._owned.get(partition)
                if token.epoch < 1 or (previous is not None and token.epoch <= previous.epoch):
                    raise Fenced(f"partition {partition}: claim returned incompatible {token}")
                ctx.check()
                self._owned[partition] = token
                tokens[partition] = token
            return tokens

        return self._guarded("assign", run)
