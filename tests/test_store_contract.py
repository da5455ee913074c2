"""The state-store contract, run against every backend (memory, SQLite, ...)."""

from __future__ import annotations

import attrs
import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import Canceled, Fenced, InvalidInput, Unavailable, UnknownResult
from remora.faults import At, Operation, ScriptedFaults
from remora.store import StateStore, Token
from tests.conftest import StoreFactory
from tests.support import amendment, decision, records

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


def test_fresh_partition_is_epoch_zero(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.observe(P, ctx()) == Token(0, 0)
    assert store.snapshot().partitions == ()


def test_claim_installs_next_epoch_and_keeps_frontier(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.claim(P, ctx()) == Token(1, 0)
    r = recs()
    store.process(P, Token(1, 0), r[0], ctx())
    assert store.claim(P, ctx()) == Token(2, 1)
    assert store.observe(P, ctx()) == Token(2, 1)
    assert store.observe(P + 1, ctx()) == Token(0, 0)


def test_process_applies_fold_and_advances_frontier(store_factory: StoreFactory) -> None:
    store = store_factory()
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


def test_frontier_follows_offsets_with_gaps(store_factory: StoreFactory) -> None:
    store = store_factory()
    token = store.claim(P, ctx())
    gap = SourceRecord(P, 41, True, None, b'{"subject":"g","op":"submit","revision":1,"body":{}}')
    assert store.process(P, token, gap, ctx()) == Token(1, 42)


@pytest.mark.parametrize(
    ("token", "why"),
    [(Token(1, 0), "stale epoch"), (Token(2, 1), "wrong frontier"), (Token(3, 0), "future epoch")],
)
def test_fence_refuses_without_effect(store_factory: StoreFactory, token: Token, why: str) -> None:
    store = store_factory()
    store.claim(P, ctx())
    store.claim(P, ctx())
    before = store.snapshot()
    with pytest.raises(Fenced):
        store.process(P, token, recs()[0], ctx())
    assert store.snapshot() == before, why


def test_process_before_any_claim_is_fenced(store_factory: StoreFactory) -> None:
    store = store_factory()
    with pytest.raises(Fenced):
        store.process(P, Token(0, 0), recs()[0], ctx())
    assert store.snapshot().outbox == ()


def test_invalid_records_rejected(store_factory: StoreFactory) -> None:
    store = store_factory()
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
    store_factory: StoreFactory, outcome: str, error: type[Exception] | None, applied: bool
) -> None:
    store = store_factory()
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
    store_factory: StoreFactory, outcome: str, error: type[Exception] | None, applied: bool
) -> None:
    store = store_factory()
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
def test_observe_rejects_unknown_outcomes(store_factory: StoreFactory, outcome: str) -> None:
    store = store_factory()
    scripted(store, "observe", outcome)
    with pytest.raises(InvalidInput):
        store.observe(P, ctx())


def test_observe_abort_is_unavailable(store_factory: StoreFactory) -> None:
    store = store_factory()
    scripted(store, "observe", "abort")
    with pytest.raises(Unavailable):
        store.observe(P, ctx())


@pytest.mark.parametrize("outcome", ["commit", "unknown-committed", "unknown-aborted"])
def test_fence_wins_over_requested_outcome(store_factory: StoreFactory, outcome: str) -> None:
    store = store_factory()
    store.claim(P, ctx())
    store.claim(P, ctx())
    hook = scripted(store, "process", outcome)
    with pytest.raises(Fenced):
        store.process(P, Token(1, 0), recs()[0], ctx())
    assert hook.log == [("process", 1, outcome, False, "fenced")]
    assert store.snapshot().outbox == ()


def test_abort_never_reaches_the_fence(store_factory: StoreFactory) -> None:
    store = store_factory()
    hook = scripted(store, "process", "abort")
    with pytest.raises(Unavailable):
        store.process(P, Token(9, 9), recs()[0], ctx())
    assert hook.log == [("process", 1, "abort", False, "unavailable")]


@pytest.mark.parametrize("outcome", ["commit", "unknown-committed"])
def test_cancellation_before_effect_wins(store_factory: StoreFactory, outcome: str) -> None:
    store = store_factory()
    token = store.claim(P, ctx())
    hook = scripted(store, "process", outcome)
    hook.on_boundary(Operation.PROCESS, 1, At.BEFORE, lambda c: c.cancel())
    with pytest.raises(Canceled):
        store.process(P, token, recs()[0], ctx())
    assert hook.log == [("process", 1, outcome, False, "canceled")]
    assert store.snapshot().outbox == ()


def test_cancellation_after_effect_keeps_effect(store_factory: StoreFactory) -> None:
    store = store_factory()
    token = store.claim(P, ctx())
    hook = scripted(store, "process", "commit")
    hook.on_boundary(Operation.PROCESS, 1, At.AFTER, lambda c: c.cancel())
    with pytest.raises(Canceled):
        store.process(P, token, recs()[0], ctx())
    assert hook.log == [("process", 1, "commit", True, "canceled")]
    assert len(store.snapshot().outbox) == 1


def test_already_canceled_context_makes_no_call(store_factory: StoreFactory) -> None:
    store = store_factory()
    c = ctx()
    c.cancel()
    with pytest.raises(Canceled):
        store.claim(P, c)
    assert store.observe(P, ctx()) == Token(0, 0)


def test_backends_agree_on_snapshot(store_factory: StoreFactory) -> None:
    """Same calls, same durable state, whatever the backend (compared to memory)."""
    from remora.store import MemoryStore

    reference = MemoryStore()
    store = store_factory()
    for s in (reference, store):
        token = s.claim(P, ctx())
        for record in recs():
            token = s.process(P, token, record, ctx())
        s.claim(P + 1, ctx())
    assert store.snapshot() == reference.snapshot()
