"""Fresh stores of any kind: memory (the default), SQLite or PostgreSQL.

:func:`backend_factory` is the one place that knows how to make a fresh, empty
:class:`~remora.store.Backend` of a kind — a :class:`~remora.store.MemoryBackend`, an SQLite
file in a temporary directory, or a PostgreSQL database of its own created on the server a
DSN names (its user needs CREATEDB) and dropped afterwards.  The factory it yields is the
shape every consumer agrees on: a **zero-argument callable returning a fresh Backend**.
The pytest plugin's fixtures (:mod:`remora.testing.plugin`) and ``remora sim-worker
--store`` (:func:`store_factory`) both use it, so a trace replays to the same report on every
store (the fault outcomes apply at the same boundary).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Protocol

from remora.domain import AMENDMENTS, Processing
from remora.errors import InvalidInput
from remora.sim.scheduler import StoreFactory
from remora.sim.trace import SimConfig
from remora.store import Backend, MemoryBackend, SqliteBackend, StateStore

STORES = ("memory", "sqlite", "postgres")


class BackendFactory(Protocol):
    """A zero-argument callable returning a fresh, empty :class:`~remora.store.Backend`
    (``processing=`` makes it run a custom :class:`~remora.domain.Processing`)."""

    def __call__(self, processing: Processing | None = None) -> Backend: ...


@contextmanager
def backend_factory(
    kind: str,
    dsn: str | None = None,
    directory: Path | None = None,
    processing: Processing = AMENDMENTS,
) -> Iterator[BackendFactory]:
    """A factory of fresh backends of ``kind``; on exit every backend it made is closed and
    its file or database removed.  ``dsn`` (PostgreSQL only, required there) names the
    server; ``directory`` is where SQLite files go (a temporary directory by default);
    ``processing`` is what the backends run unless a call names another."""
    if kind not in STORES:
        raise InvalidInput(f"unknown store {kind!r} (one of {', '.join(STORES)})")
    if (kind == "postgres") != (dsn is not None):
        raise InvalidInput("a DSN is required for a postgres store, and only then")
    default = processing
    with ExitStack() as stack:

        def keep(backend: Backend) -> Backend:
            stack.callback(backend.close)  # closed before its file or database goes
            return backend

        if kind == "memory":

            def memory(processing: Processing | None = None) -> Backend:
                return keep(MemoryBackend(processing or default))

            yield memory
            return
        if kind == "sqlite":
            where = directory
            if where is None:
                where = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="remora-")))
            base = where

            def sqlite(processing: Processing | None = None) -> Backend:
                path = Path(tempfile.mkdtemp(dir=base)) / "state.sqlite3"
                return keep(SqliteBackend(path, processing=processing or default))

            yield sqlite
            return
        from remora.sim.scratch import scratch_database
        from remora.store.postgres import PostgresBackend

        assert dsn is not None
        server = dsn

        def postgres(processing: Processing | None = None) -> Backend:
            database = stack.enter_context(scratch_database(server, "remora_sim"))
            return keep(PostgresBackend(database, processing=processing or default))

        yield postgres


@contextmanager
def store_factory(
    kind: str, dsn: str | None = None, processing: Processing = AMENDMENTS
) -> Iterator[StoreFactory | None]:
    """The simulation's store factory for ``remora sim-worker --store`` (None for memory,
    the simulation's own default)."""
    if (kind == "postgres") != (dsn is not None):
        raise InvalidInput("--dsn is required with --store postgres, and only then")
    with backend_factory(kind, dsn, processing=processing) as make:
        if kind == "memory":
            yield None
            return

        def stores(config: SimConfig) -> StateStore:
            return StateStore(make())

        yield stores


__all__ = [
    "STORES",
    "BackendFactory",
    "backend_factory",
    "store_factory",
]
