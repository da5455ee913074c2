"""The state-store contract, run against every backend (memory, SQLite, ...)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs
import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import OutboxEntry, SourceRecord
from remora.errors import Canceled, Fenced, InvalidInput, Unavailable, UnknownResult
from remora.faults import At, Operation
from remora.sim.stores import BackendFactory
from remora.store import (
    Backend,
    MemoryBackend,
    PartitionState,
    PartitionSummary,
    PartitionTail,
    SqliteStore,
    StateStore,
    StoreSnapshot,
    Token,
)
from remora.testing.faults import ScriptedFaults
from tests.common.support import amendment, decision, records

P = 0


def ctx() -> Context:
    return Context(LogicalClock())


def recs() -> list[SourceRecord]:
    return records(
        P,
        amendment("a", "submit", 1, n=1),
        amendment("a", "correct", 2, n=2),
        amendment("a", "correct", 9, n=3),  # conflict: blocks a
        amendment("b", "submit", 1, n=4),
        amendment("a", "correct", 3, n=5),  # blocked
    )


def test_fresh_partition_is_epoch_zero(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    assert store.observe(P, ctx()) == Token(0, 0)
    assert store.snapshot().partitions == ()


def test_claim_installs_next_epoch_and_keeps_frontier(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    assert store.claim(P, ctx()) == Token(1, 0)
    r = recs()
    store.process(P, Token(1, 0), r[0], ctx())
    assert store.claim(P, ctx()) == Token(2, 1)
    assert store.observe(P, ctx()) == Token(2, 1)
    assert store.observe(P + 1, ctx()) == Token(0, 0)


def test_process_applies_fold_and_advances_frontier(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    token = store.claim(P, ctx())
    for record in recs():
        token = store.process(P, token, record, ctx())
        assert token == Token(1, record.offset + 1)
    snap = store.snapshot()
    assert [(e.seq, e.subject, e.version, e.op) for e in snap.outbox] == [
        (1, "a", 1, "submit"),
        (2, "a", 2, "correct"),
        (3, "b", 1, "submit"),
    ]
    assert [(q.offset, q.reason) for q in snap.quarantine] == [(2, "conflict"), (4, "blocked")]
    assert [(i.subject, i.version) for i in snap.intents] == [("a", 1), ("a", 2), ("b", 1)]
    assert snap.partition(P).frontier == 5 and snap.partition(P).next_seq == 4
    assert [(p, s.subject, s.revision, s.status, s.blocked) for p, s in snap.subjects] == [
        (P, "a", 2, "live", True),
        (P, "b", 1, "live", False),
    ]


def test_frontier_follows_offsets_with_gaps(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    token = store.claim(P, ctx())
    gap = SourceRecord(P, 41, True, None, b'{"subject":"g","op":"submit","revision":1,"body":{}}')
    assert store.process(P, token, gap, ctx()) == Token(1, 42)


@pytest.mark.parametrize(
    ("token", "why"),
    [(Token(1, 0), "stale epoch"), (Token(2, 1), "wrong frontier"), (Token(3, 0), "future epoch")],
)
def test_fence_refuses_without_effect(
    remora_store_factory: BackendFactory, token: Token, why: str
) -> None:
    store = StateStore(remora_store_factory())
    store.claim(P, ctx())
    store.claim(P, ctx())
    before = store.snapshot()
    with pytest.raises(Fenced):
        store.process(P, token, recs()[0], ctx())
    assert store.snapshot() == before, why


def test_process_before_any_claim_is_fenced(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    with pytest.raises(Fenced):
        store.process(P, Token(0, 0), recs()[0], ctx())
    assert store.snapshot().outbox == ()


def test_invalid_records_rejected(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    token = store.claim(P, ctx())
    token = store.process(P, token, recs()[0], ctx())
    with pytest.raises(InvalidInput):  # behind the frontier
        store.process(P, token, recs()[0], ctx())
    with pytest.raises(InvalidInput):  # invisible
        store.process(P, token, attrs.evolve(recs()[1], visible=False), ctx())
    with pytest.raises(InvalidInput):  # wrong partition
        store.process(P, token, attrs.evolve(recs()[1], partition=P + 1), ctx())
    assert len(store.snapshot().outbox) == 1


# -- controlled outcomes --------------------------------------------------------------


def scripted(store: StateStore, op: str, outcome: str) -> ScriptedFaults:
    hook = ScriptedFaults()
    hook.script[(Operation(op), 1)] = decision(outcome)
    store.hook = hook
    return hook


@pytest.mark.parametrize(
    ("outcome", "error", "applied"),
    [
        ("commit", None, True),
        ("abort", Unavailable, False),
        ("unknown-committed", UnknownResult, True),
        ("unknown-aborted", UnknownResult, False),
    ],
)
def test_claim_outcomes(
    remora_store_factory: BackendFactory, outcome: str, error: type[Exception] | None, applied: bool
) -> None:
    store = StateStore(remora_store_factory())
    hook = scripted(store, "claim", outcome)
    if error is None:
        store.claim(P, ctx())
    else:
        with pytest.raises(error):
            store.claim(P, ctx())
    assert store.observe(P, ctx()).epoch == (1 if applied else 0)
    assert hook.log[0][:4] == ("claim", 1, outcome, applied)


@pytest.mark.parametrize(
    ("outcome", "error", "applied"),
    [
        ("commit", None, True),
        ("abort", Unavailable, False),
        ("unknown-committed", UnknownResult, True),
        ("unknown-aborted", UnknownResult, False),
    ],
)
def test_process_outcomes(
    remora_store_factory: BackendFactory, outcome: str, error: type[Exception] | None, applied: bool
) -> None:
    store = StateStore(remora_store_factory())
    token = store.claim(P, ctx())
    hook = scripted(store, "process", outcome)
    if error is None:
        store.process(P, token, recs()[0], ctx())
    else:
        with pytest.raises(error):
            store.process(P, token, recs()[0], ctx())
    snap = store.snapshot()
    assert len(snap.outbox) == (1 if applied else 0)
    assert snap.partition(P).frontier == (1 if applied else 0)
    assert len(snap.intents) == (1 if applied else 0)
    assert hook.log == [("process", 1, outcome, applied, "ok" if error is None else hook.log[0][4])]


@pytest.mark.parametrize("outcome", ["unknown-committed", "unknown-aborted"])
def test_observe_rejects_unknown_outcomes(
    remora_store_factory: BackendFactory, outcome: str
) -> None:
    store = StateStore(remora_store_factory())
    scripted(store, "observe", outcome)
    with pytest.raises(InvalidInput):
        store.observe(P, ctx())


def test_observe_abort_is_unavailable(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    scripted(store, "observe", "abort")
    with pytest.raises(Unavailable):
        store.observe(P, ctx())


@pytest.mark.parametrize("outcome", ["commit", "unknown-committed", "unknown-aborted"])
def test_fence_wins_over_requested_outcome(
    remora_store_factory: BackendFactory, outcome: str
) -> None:
    store = StateStore(remora_store_factory())
    store.claim(P, ctx())
    store.claim(P, ctx())
    hook = scripted(store, "process", outcome)
    with pytest.raises(Fenced):
        store.process(P, Token(1, 0), recs()[0], ctx())
    assert hook.log == [("process", 1, outcome, False, "fenced")]
    assert store.snapshot().outbox == ()


def test_abort_never_reaches_the_fence(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    hook = scripted(store, "process", "abort")
    with pytest.raises(Unavailable):
        store.process(P, Token(9, 9), recs()[0], ctx())
    assert hook.log == [("process", 1, "abort", False, "unavailable")]


@pytest.mark.parametrize("outcome", ["commit", "unknown-committed"])
def test_cancellation_before_effect_wins(
    remora_store_factory: BackendFactory, outcome: str
) -> None:
    store = StateStore(remora_store_factory())
    token = store.claim(P, ctx())
    hook = scripted(store, "process", outcome)
    hook.on_boundary(Operation.PROCESS, 1, At.BEFORE, lambda c: c.cancel())
    with pytest.raises(Canceled):
        store.process(P, token, recs()[0], ctx())
    assert hook.log == [("process", 1, outcome, False, "canceled")]
    assert store.snapshot().outbox == ()


def test_cancellation_after_effect_keeps_effect(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    token = store.claim(P, ctx())
    hook = scripted(store, "process", "commit")
    hook.on_boundary(Operation.PROCESS, 1, At.AFTER, lambda c: c.cancel())
    with pytest.raises(Canceled):
        store.process(P, token, recs()[0], ctx())
    assert hook.log == [("process", 1, "commit", True, "canceled")]
    assert len(store.snapshot().outbox) == 1


def test_already_canceled_context_makes_no_call(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    c = ctx()
    c.cancel()
    with pytest.raises(Canceled):
        store.claim(P, c)
    assert store.observe(P, ctx()) == Token(0, 0)


def test_backends_agree_on_snapshot(remora_store_factory: BackendFactory) -> None:
    """Same calls, same durable state, whatever the backend (compared to memory)."""
    from remora.store import MemoryStore

    reference = MemoryStore()
    store = StateStore(remora_store_factory())
    for s in (reference, store):
        token = s.claim(P, ctx())
        for record in recs():
            token = s.process(P, token, record, ctx())
        s.claim(P + 1, ctx())
    assert store.snapshot() == reference.snapshot()


# -- optional observer reads ----------------------------------------------------------


def workload(store: StateStore) -> list[Callable[[], object]]:
    """Writes that leave outbox, quarantine (a blocked subject) and intents on P, a bare
    claim on P + 1 and a rolled-back claim on P + 2 — each as one step, so that observers
    can look in between."""
    steps: list[Callable[[], object]] = []
    token = [Token(0, 0)]

    def claim(p: int) -> Callable[[], object]:
        def run() -> None:
            token[0] = store.claim(p, ctx())

        return run

    def process(record: SourceRecord) -> Callable[[], object]:
        def run() -> None:
            token[0] = store.process(P, token[0], record, ctx())

        return run

    def rolled_back_claim() -> None:
        scripted(store, "claim", "unknown-aborted")
        with pytest.raises(UnknownResult):
            store.claim(P + 2, ctx())

    steps.append(claim(P))
    steps += [process(r) for r in recs()]
    steps += [claim(P + 1), rolled_back_claim]
    return steps


def read_differences(backend: Backend, partitions: Iterable[int]) -> list[str]:
    """Where ``backend``'s optional reads differ from the defaults built from its snapshot."""
    found = []
    for p in partitions:
        pairs: list[tuple[str, object, object]] = [
            ("partition_row", backend.partition_row(p), Backend.partition_row(backend, p)),
            ("partition_state", backend.partition_state(p), Backend.partition_state(backend, p)),
        ]
        for since in ((0, 0, 0), (1, 0, 1), (2, 1, 0), (9, 9, 9)):
            pairs.append(
                (
                    f"partition_tail({since})",
                    backend.partition_tail(p, since),
                    Backend.partition_tail(backend, p, since),
                )
            )
        for seq, limit in ((0, 100), (1, 2), (4, 1), (9, 5)):
            pairs.append(
                (
                    f"outbox_after({seq}, {limit})",
                    backend.outbox_after(p, seq, limit),
                    Backend.outbox_after(backend, p, seq, limit),
                )
            )
        found += [f"partition {p}: {name}: {a!r} != {b!r}" for name, a, b in pairs if a != b]
    summaries = backend.partition_summaries()
    if summaries != Backend.partition_summaries(backend):
        found.append(f"partition_summaries: {summaries!r}")
    return found


def dishonest_counts(store: StateStore, steps: Iterable[Callable[[], object]]) -> list[str]:
    """Steps after which a partition's state changed although its change count did not."""
    found = []
    partitions = (P, P + 1, P + 2)

    def look() -> dict[int, tuple[int | None, PartitionState]]:
        b = store.backend
        return {p: (b.change_count(p), b.partition_state(p)) for p in partitions}

    before = look()
    for i, step in enumerate(steps):
        step()
        after = look()
        for p in partitions:
            (count, state), (count2, state2) = before[p], after[p]
            if count is not None and count == count2 and state != state2:
                found.append(f"step {i}: partition {p} changed, change count stayed {count}")
        before = after
    return found


def test_optional_reads_equal_their_snapshot_defaults(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    assert read_differences(store.backend, range(4)) == []  # empty store
    for step in workload(store):
        step()
        assert read_differences(store.backend, range(4)) == []
    assert [s.partition for s in store.backend.partition_summaries()] == [P, P + 1]
    summary = store.backend.partition_summaries()[0]
    assert (summary.frontier, summary.next_seq, summary.outbox, summary.quarantine) == (5, 4, 3, 2)


def test_change_count_changes_whenever_the_state_does(remora_store_factory: BackendFactory) -> None:
    store = StateStore(remora_store_factory())
    assert dishonest_counts(store, workload(store)) == []


class WrongSummaries(MemoryBackend):
    """Planted: counts quarantine rows as outbox entries."""

    def partition_summaries(self) -> list[PartitionSummary]:
        return [
            attrs.evolve(s, outbox=s.outbox + s.quarantine) for s in super().partition_summaries()
        ]


class OffByOneOutbox(MemoryBackend):
    """Planted: ``outbox_after`` skips the first entry it should return."""

    def outbox_after(self, partition: int, seq: int, limit: int) -> list[OutboxEntry]:
        return super().outbox_after(partition, seq + 1, limit)


class TailSkipsQuarantine(MemoryBackend):
    """Planted: ``partition_tail`` leaves out the quarantine rows appended since the mark."""

    def partition_tail(self, partition: int, since: tuple[int, int, int]) -> PartitionTail:
        tail = super().partition_tail(partition, since)
        return attrs.evolve(tail, quarantine=())


class CountsOnlyClaims(MemoryBackend):
    """Planted: the change count ignores process writes."""

    def change_count(self, partition: int) -> int:
        return self.partition_row(partition).epoch


@pytest.mark.parametrize("broken", [WrongSummaries, OffByOneOutbox, TailSkipsQuarantine])
def test_a_wrong_read_override_is_caught(broken: type[MemoryBackend]) -> None:
    store = StateStore(broken())
    for step in workload(store):
        step()
    assert read_differences(store.backend, range(4)) != []


def test_a_dishonest_change_count_is_caught() -> None:
    store = StateStore(CountsOnlyClaims())
    assert dishonest_counts(store, workload(store)) != []


def test_a_backend_needs_only_the_required_methods() -> None:
    """The optional reads of a backend that implements only the required methods work, from
    its snapshot (and it cannot be made without them)."""

    class Minimal(Backend):
        def __init__(self) -> None:
            self.inner = MemoryBackend()

        def claim(self, partition: int, ctx: Context, commit: bool) -> Token:
            return self.inner.claim(partition, ctx, commit)

        def observe(self, partition: int, ctx: Context) -> Token:
            return self.inner.observe(partition, ctx)

        def process(
            self, partition: int, token: Token, record: SourceRecord, ctx: Context, commit: bool
        ) -> Token:
            return self.inner.process(partition, token, record, ctx, commit)

        def snapshot(self) -> StoreSnapshot:
            return self.inner.snapshot()

        def close(self) -> None:
            self.inner.close()

    minimal, reference = StateStore(Minimal()), StateStore(MemoryBackend())
    for store in (minimal, reference):
        for step in workload(store):
            step()
    for p in range(4):
        assert minimal.backend.partition_state(p) == reference.backend.partition_state(p)
        assert minimal.backend.outbox_after(p, 1, 1) == reference.backend.outbox_after(p, 1, 1)
        assert minimal.backend.change_count(p) is None
    assert minimal.backend.partition_summaries() == reference.backend.partition_summaries()

    class Incomplete(Backend):
        def snapshot(self) -> StoreSnapshot:
            return StoreSnapshot((), (), (), (), ())

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]


# -- SQLite specifics ------------------------------------------------------------


def test_sqlite_schema_newer_version_rejected(tmp_path: Path) -> None:
    db = tmp_path / "db"
    SqliteStore(db).close()
    SqliteStore(db).close()  # migration is idempotent
    conn = sqlite3.connect(db)
    conn.execute("UPDATE remora_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidInput, match="schema version 99"):
        SqliteStore(db)
