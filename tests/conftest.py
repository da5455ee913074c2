"""The suite's configuration.  Its store fixtures are the pytest plugin's
(:mod:`remora.testing.plugin`: ``remora_store_factory``, ``remora_sqlite_store``,
``remora_scratch_database`` …), the ones a user's project gets: here the PostgreSQL server
they use defaults to the local one the suite runs against (``REMORA_PG_DSN`` or
``--remora-dsn`` still choose another)."""

from __future__ import annotations

import os

import pytest

from remora.testing.profiles import selected_profile
from tests.common.services import DEFAULT_PG_DSN
from tests.scheduling import spread_the_long_tests, xdist_workers

os.environ.setdefault("REMORA_PG_DSN", DEFAULT_PG_DSN)

CONTROLS_ENV = "REMORA_CONTROLS"


def controls_run() -> bool:
    """Whether the planted bugs' controls (``@pytest.mark.control``) and the nightly hunts
    (``@pytest.mark.nightly``) run: under the nightly profile or with
    ``REMORA_CONTROLS=1``.  A control shows that a planted bug *survives* without the rule
    or check that kills it — it spends its whole budget by design, so CI runs every kill
    and the nightly run re-proves each kill's cause.  A nightly hunt is a second, costlier
    kill of a bug a cheaper test kills in CI (a Lua script's bug: the coordination twin
    kills it in seconds; the job machines over the services, at the nightly budget)."""
    return selected_profile() == "nightly" or os.environ.get(CONTROLS_ENV) == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the long tests spread over the xdist workers' first batches (tests/scheduling.py);
    # every worker collects and reorders alike, so their collections stay identical
    items[:] = spread_the_long_tests(items, {id(it): it.nodeid for it in items}, xdist_workers())
    if controls_run():
        return
    skip = pytest.mark.skip(
        reason=(
            "a planted bug's control or a second hunt: nightly profile or "
            f"{CONTROLS_ENV}=1 (docs/stateful.md)"
        )
    )
    for item in items:
        if item.get_closest_marker("control") or item.get_closest_marker("nightly"):
            item.add_marker(skip)
