"""Fixtures shared by the test suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remora.store import MemoryStore, SqliteStore, StateStore

STORE_KINDS = ["memory", "sqlite"]

StoreFactory = Callable[[], StateStore]


@pytest.fixture(params=STORE_KINDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Make fresh stores of one kind; every store the test made is closed afterwards."""
    made: list[StateStore] = []
    counter = iter(range(1_000_000))

    def make() -> StateStore:
        store: StateStore
        if request.param == "memory":
            store = MemoryStore()
        else:
            store = SqliteStore(tmp_path / f"state-{next(counter)}.sqlite3")
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
