"""The runner / group / file-source machine, on memory and on SQLite."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.sim.trace import SimConfig
from remora.store import StateStore
from remora.store.sqlite import SqliteStore
from remora.testing.group_machine import GroupRunMachine
from tests.stateful.group_checks import SourceChecks
from tests.stateful.group_failures import GroupFailureChecks
from tests.stateful.source_checks import (
    DomainChecks,
    LegacyStoreCheck,
    SourceLayoutChecks,
    SourceReadChecks,
)


class GroupRunChecked(
    GroupFailureChecks,
    SourceLayoutChecks,
    SourceReadChecks,
    DomainChecks,
    LegacyStoreCheck,
    SourceChecks,
    GroupRunMachine,
):
    """The group machine with the worker-failure, source-layout, source-read, domain,
    source-identity and awkward-value rules."""


def sqlite_store(config: SimConfig) -> StateStore:
    return SqliteStore(":memory:")


class GroupRunOnSqlite(GroupRunChecked):
    store_factory = sqlite_store


def budget() -> settings:
    """Half the loaded profile's examples, 15 steps each: every example runs real threads
    and rewrites files, so it costs ten schedule steps (half, not a quarter, since the
    failure, layout, read and domain rules joined: each rule keeps its share of steps)."""
    current = settings.default
    assert current is not None
    return settings(
        current, max_examples=max(10, current.max_examples // 2), stateful_step_count=15
    )


def test_group_machine_on_memory() -> None:
    run_state_machine_as_test(GroupRunChecked, settings=budget())


def test_group_machine_on_sqlite() -> None:
    run_state_machine_as_test(GroupRunOnSqlite, settings=budget())
