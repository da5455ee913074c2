"""The relay and the materialized view: in seq order, idempotent, gaps refused."""

from __future__ import annotations

import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.delivery import DeliveryGap, MemoryView, Relay
from remora.domain import OutboxEntry
from remora.sim.stores import BackendFactory
from remora.store import StateStore
from tests.common.support import amendment, records


def filled(remora_store_factory: BackendFactory) -> object:
    store = StateStore(remora_store_factory())
    ctx = Context(LogicalClock())
    token = store.claim(0, ctx)
    for r in records(
        0,
        amendment("a", "submit", 1, v=1),
        amendment("b", "submit", 1, v=2),
        amendment("a", "correct", 2, v=3),
        amendment("b", "withdraw", 2),
    ):
        token = store.process(0, token, r, ctx)
    return store


def test_relay_delivers_in_order_and_is_idempotent(remora_store_factory: BackendFactory) -> None:
    store = filled(remora_store_factory)
    view = MemoryView()
    relay = Relay(store.backend, view, batch=3)  # type: ignore[attr-defined]
    assert relay.deliver([0, 1]) == 4
    assert [(r.subject, r.version, r.status, r.body) for r in view.rows()] == [
        ("a", 2, "live", '{"v":3}'),
        ("b", 2, "withdrawn", "{}"),
    ]
    assert view.delivered(0) == 4
    assert relay.deliver([0]) == 0  # nothing twice


def entry(seq: int) -> OutboxEntry:
    return OutboxEntry(0, seq, "s", seq, "submit" if seq == 1 else "correct", "{}", seq)


def test_view_ignores_duplicates_and_refuses_gaps() -> None:
    view = MemoryView()
    assert view.apply(entry(1))
    assert not view.apply(entry(1))
    with pytest.raises(DeliveryGap):
        view.apply(entry(3))
    assert view.apply(entry(2)) and view.delivered(0) == 2
