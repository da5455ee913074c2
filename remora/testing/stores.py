"""Which store a simulation runs on: memory (the default), SQLite or PostgreSQL.

Every replay gets a fresh, empty store — a temporary SQLite file, or a scratch PostgreSQL
database created on the server the DSN names and dropped afterwards — so a trace replays to
the same report on every store (the fault outcomes apply at the same boundary)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from remora.errors import InvalidInput
from remora.sim.scheduler import StoreFactory
from remora.sim.trace import SimConfig
from remora.store import SqliteStore, StateStore

STORES = ("memory", "sqlite", "postgres")


@contextmanager
def store_factory(kind: str, dsn: str | None = None) -> Iterator[StoreFactory | None]:
    """A factory of fresh stores of ``kind`` (None for memory); everything it made is closed
    and removed on exit."""
    if kind not in STORES:
        raise InvalidInput(f"unknown store {kind!r} (one of {', '.join(STORES)})")
    if (kind == "postgres") != (dsn is not None):
        raise InvalidInput("--dsn is required with --store postgres, and only then")
    with ExitStack() as stack:

        def keep(store: StateStore) -> StateStore:
            stack.callback(store.close)  # closed before its file or database goes
            return store

        if kind == "memory":
            yield None
            return
        if kind == "sqlite":
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="remora-sim-")))

            def sqlite(config: SimConfig) -> StateStore:
                return keep(SqliteStore(Path(tempfile.mkdtemp(dir=tmp)) / "state.sqlite3"))

            yield sqlite
            return
        from remora.store.postgres import PostgresStore
        from remora.testing.scratch import scratch_database

        assert dsn is not None

        def postgres(config: SimConfig) -> StateStore:
            return keep(PostgresStore(stack.enter_context(scratch_database(dsn, "remora_sim"))))

        yield postgres
