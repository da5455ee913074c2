"""Remora's pytest plugin, registered through the ``pytest11`` entry point: installing
``remora[testing]`` is enough, nothing to add to a ``conftest.py``.

Fixtures (each store factory is a zero-argument callable returning a fresh, empty
:class:`remora.store.Backend` — ``factory(processing=MY_PROCESSING)`` makes one that runs a
custom :class:`remora.domain.Processing`; every backend a test made is closed afterwards, and
its file or database removed):

* ``remora_memory_store`` / ``remora_sqlite_store`` / ``remora_postgres_store`` — a factory
  of one kind;
* ``remora_store_factory`` — a factory of each kind in turn: a test that asks for it runs
  once per kind (``memory``, ``sqlite``, ``postgres``; narrow with ``--remora-store``);
* ``remora_postgres_dsn`` — the PostgreSQL server to use: ``--remora-dsn`` or
  ``$REMORA_PG_DSN`` (a libpq DSN or URI whose user may create databases);
* ``remora_scratch_database`` — the DSN of a brand-new, empty PostgreSQL database on that
  server, dropped afterwards (:func:`remora.sim.scratch.scratch_database`).

A PostgreSQL fixture skips its test with the reason when no server is configured or
reachable — and fails instead under ``REMORA_REQUIRE_SERVICES=1``, so CI cannot pass by
skipping.

The plugin also checks ``@reproduce_failure`` blobs before a test runs: a blob printed by
another Hypothesis version fails the test with one line saying which version printed it,
which one is installed, and how to replay the failure anyway.

It imports neither Hypothesis nor psycopg until a test needs them, so a project that has
``remora`` installed without these extras still runs its pytest.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NoReturn

import pytest

from remora.sim.stores import BackendFactory, backend_factory

STORE_KINDS = ("memory", "sqlite", "postgres")
DSN_ENV = "REMORA_PG_DSN"
REQUIRE_ENV = "REMORA_REQUIRE_SERVICES"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("remora", "Remora stores and state machines")
    group.addoption(
        "--remora-dsn",
        default=None,
        metavar="DSN",
        help=f"PostgreSQL server for the postgres store fixtures (default ${DSN_ENV}); its "
        "user needs CREATEDB: every store gets a database of its own",
    )
    group.addoption(
        "--remora-store",
        action="append",
        choices=STORE_KINDS,
        default=None,
        metavar="KIND",
        help="store kinds remora_store_factory runs a test on (repeatable; default all)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "remora_store_kind" in metafunc.fixturenames:
        kinds = metafunc.config.getoption("--remora-store") or list(STORE_KINDS)
        metafunc.parametrize("remora_store_kind", kinds, indirect=True)


def unavailable(message: str) -> NoReturn:
    """Skip the running test — or fail it under ``REMORA_REQUIRE_SERVICES=1``."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def remora_postgres_dsn(pytestconfig: pytest.Config) -> str:
    """The PostgreSQL server (``--remora-dsn`` or ``$REMORA_PG_DSN``), checked reachable."""
    dsn = pytestconfig.getoption("--remora-dsn") or os.environ.get(DSN_ENV)
    if not dsn:
        unavailable(f"no PostgreSQL server configured: pass --remora-dsn or set {DSN_ENV}")
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed: pip install 'remora[postgres]'")
    from remora.store.postgres import describe_dsn, one_line

    try:
        with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        unavailable(f"PostgreSQL is not reachable at {describe_dsn(dsn)}: {one_line(exc)}")
    return str(dsn)


@pytest.fixture
def remora_scratch_database(remora_postgres_dsn: str) -> Iterator[str]:
    """The DSN of a brand-new, empty database, dropped after the test."""
    from remora.sim.scratch import scratch_database

    with scratch_database(remora_postgres_dsn, prefix="remora_test") as dsn:
        yield dsn


def _factory(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendFactory]:
    dsn = request.getfixturevalue("remora_postgres_dsn") if kind == "postgres" else None
    with ExitStack() as stack:
        yield stack.enter_context(backend_factory(kind, dsn, tmp_path))


@pytest.fixture
def remora_memory_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendFactory]:
    """Fresh memory backends."""
    yield from _factory("memory", request, tmp_path)


@pytest.fixture
def remora_sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendFactory]:
    """Fresh SQLite backends, each in a file of its own under the test's ``tmp_path``."""
    yield from _factory("sqlite", request, tmp_path)


@pytest.fixture
def remora_postgres_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[BackendFactory]:
    """Fresh PostgreSQL backends, each in a database of its own (dropped afterwards)."""
    yield from _factory("postgres", request, tmp_path)


@pytest.fixture
def remora_store_kind(request: pytest.FixtureRequest) -> str:
    """The store kind of this run of the test (parametrized by the plugin)."""
    return str(request.param)


@pytest.fixture
def remora_store_factory(
    remora_store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[BackendFactory]:
    """Fresh backends of each kind in turn (the test runs once per kind)."""
    yield from _factory(remora_store_kind, request, tmp_path)


# -- @reproduce_failure blobs -----------------------------------------------------------


def _blob(item: pytest.Item) -> tuple[str, Any] | None:
    """The ``(version, blob)`` of a ``@reproduce_failure`` on the test function, or on the
    state machine class behind a ``Machine.TestCase``."""
    function = getattr(item, "obj", None)
    for holder in (function, getattr(function, "_hypothesis_state_machine_class", None)):
        found = getattr(holder, "_hypothesis_internal_use_reproduce_failure", None)
        if found is not None:
            return (str(found[0]), found[1])
    return None


def blob_version_problem(printed_by: str) -> str | None:
    """Why a blob printed by Hypothesis ``printed_by`` cannot replay here (None if it can)."""
    from importlib import metadata

    try:
        installed = metadata.version("hypothesis")
    except metadata.PackageNotFoundError:
        return "Hypothesis is not installed: pip install 'remora[testing]'"
    if installed == printed_by:
        return None
    return (
        f"this @reproduce_failure blob was printed by Hypothesis {printed_by}, but "
        f"Hypothesis {installed} is installed, and a blob replays only on the exact version "
        f"that printed it: install that version (pip install 'hypothesis=={printed_by}'; in "
        f"the Remora repository: pip install -c .ci/constraints.txt -e '.[dev]'), or replay "
        f"the failure's exported trace, which needs no Hypothesis: remora sim-worker --replay "
        f"FILE (artifacts/failures/hypothesis-<Machine>.json)"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    blob = _blob(item)
    if blob is not None:
        problem = blob_version_problem(blob[0])
        if problem is not None:
            pytest.fail(problem, pytrace=False)


__all__ = [
    "STORE_KINDS",
    "DSN_ENV",
    "REQUIRE_ENV",
    "pytest_addoption",
    "pytest_generate_tests",
    "unavailable",
    "remora_postgres_dsn",
    "remora_scratch_database",
    "remora_memory_store",
    "remora_sqlite_store",
    "remora_postgres_store",
    "remora_store_kind",
    "remora_store_factory",
    "blob_version_problem",
    "pytest_runtest_setup",
]
