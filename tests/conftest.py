"""Fixtures shared by the test suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from remora.store import MemoryStore, SqliteStore, StateStore

STORE_KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.services)]

StoreFactory = Callable[[], StateStore]


@pytest.fixture(params=STORE_KINDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Make fresh stores of one kind; every store the test made is closed afterwards.

    ``postgres`` stores each live in a fresh database of their own, dropped afterwards (the
    test skips — or fails under ``REMORA_REQUIRE_SERVICES=1`` — without a server)."""
    made: list[StateStore] = []
    counter = iter(range(1_000_000))
    with ExitStack() as databases:

        def make() -> StateStore:
            store: StateStore
            if request.param == "memory":
                store = MemoryStore()
            elif request.param == "sqlite":
                store = SqliteStore(tmp_path / f"state-{next(counter)}.sqlite3")
            else:
                from remora.store.postgres import PostgresStore
                from tests.postgres.services import fresh_database

                store = PostgresStore(databases.enter_context(fresh_database()))
            made.append(store)
            return store

        yield make
        for store in made:
            store.close()
