"""The store, fault-seam and lifecycle contract machine (a node of its own in
``tests/stateful/test_store_machines.py`` and in the mutation harness's ``MACHINE_TESTS``).

:class:`SqliteFileMachine` is the many-partitions machine over an SQLite database *file*
(:func:`~tests.stateful.sqlite_checks.sqlite_file_store`) with the file rules of
:class:`~tests.stateful.sqlite_checks.SqliteFileChecks` (lock waits, reopen, migration,
refused opens, interrupts) and the contract rules of
:class:`~tests.stateful.contract_checks.ContractChecks`."""

from __future__ import annotations

from tests.stateful.contract_checks import ContractChecks
from tests.stateful.machines import ManyPartitionsOnSqlite
from tests.stateful.sqlite_checks import SqliteFileChecks, sqlite_file_store


class SqliteFileMachine(ContractChecks, SqliteFileChecks, ManyPartitionsOnSqlite):
    """Three partitions over an SQLite file, with the file rules and the contract rules
    (:class:`~tests.stateful.contract_checks.ContractChecks`: scratch lifecycles, the fault
    seam, retry policies and the runner driven with inputs a correct schedule never makes)
    between the steps."""

    store_factory = sqlite_file_store
    store_kind = "sqlite"
