"""The schedule machines over PostgreSQL: nightly only (a scratch database per run)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.sim.stores import backend_factory
from remora.sim.trace import SimConfig
from remora.store import StateStore
from remora.testing.profiles import selected_profile
from tests.postgres.services import require_postgres
from tests.stateful.machines import ManyPartitionsAndLifetimes, SinglePartitionHeavyFaults

pytestmark = pytest.mark.skipif(
    selected_profile() != "nightly", reason="PostgreSQL machines run under the nightly profile"
)


@pytest.mark.parametrize("base", [SinglePartitionHeavyFaults, ManyPartitionsAndLifetimes])
def test_machine_on_postgres(base: type[ManyPartitionsAndLifetimes]) -> None:
    dsn = require_postgres()
    with backend_factory("postgres", dsn) as make:

        def postgres_store(config: SimConfig) -> StateStore:
            return StateStore(make())

        machine = type(f"{base.__name__}OnPostgres", (base,), {})
        machine.store_factory = postgres_store  # type: ignore[attr-defined]
        machine.store_kind = "postgres"  # type: ignore[attr-defined]
        # a scratch database per run (about 3 s each here): a fixed 50 runs per machine
        run_state_machine_as_test(machine, settings=settings(settings.default, max_examples=50))
