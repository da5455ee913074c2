"""The SQL dialects Remora speaks (SQLite, PostgreSQL) and the one schema-migration helper
every SQL store uses.

Why one place: the stream worker's stores (:mod:`remora.store.sqlite`,
:mod:`remora.store.postgres`) and the job runtime's durable store (:mod:`remora.jobs.sql`)
write the same SQL for two engines.  What differs between the engines — the placeholder,
the clause that locks a row, where ``now`` comes from, how to ask whether a column or an
index exists, whether a transition may be folded into fewer statements — is a value of
:class:`Dialect`, not a boolean flag threaded through the code (``postgres=True``).

:func:`migrate` creates or upgrades a schema inside the caller's transaction (the caller
owns ``BEGIN``/``COMMIT`` and, on PostgreSQL, the advisory lock that serializes migrations
across processes): idempotent statements, then the versioned upgrades a database still
lacks, then the columns added to tables after their first release, then the statements
that need them (``late``: indexes on added columns), then the version row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from remora.errors import InvalidInput


@attrs.frozen
class Dialect:
    """One SQL engine's spelling of what Remora's SQL needs."""

    name: str
    #: The parameter placeholder (statements are written with ``?``: :meth:`q`).
    placeholder: str
    #: Appended to a ``SELECT`` of one row to lock it for the transaction.
    lock_clause: str
    #: The server's clock in seconds since the epoch, or None: ``now`` is the caller's
    #: (injected) clock, passed as a parameter (:meth:`now_sql`, :meth:`now_params`).
    clock_sql: str | None
    #: A durable transition may be folded into fewer statements: its locked read as one
    #: JSON-aggregating statement, its writes and log row as one data-modifying ``WITH``,
    #: and single-statement reads without ``BEGIN``/``COMMIT``.
    folds: bool
    #: A query taking ``(table, column)`` that returns a row when the column exists.
    column_sql: str
    #: A query taking ``(index name,)`` that returns ``true`` when the index exists, or None
    #: when ``CREATE INDEX IF NOT EXISTS`` of an existing index costs nothing.
    index_sql: str | None

    def q(self, sql: str) -> str:
        """``sql`` written with ``?`` placeholders, in this dialect's."""
        return sql.replace("?", self.placeholder)

    def now_sql(self) -> str:
        """The SQL of ``now`` (:attr:`clock_sql`, or a placeholder for the caller's)."""
        return self.clock_sql if self.clock_sql is not None else self.placeholder

    def now_params(self, now: float) -> tuple[float, ...]:
        """The parameters :meth:`now_sql` takes (none when the server has the clock)."""
        return () if self.clock_sql is not None else (now,)

    def with_injected_clock(self) -> Dialect:
        """This dialect with ``now`` taken from the caller's clock (a simulation on a
        real server, whose time is logical)."""
        return attrs.evolve(self, clock_sql=None)

    def column_exists(self, cur: Any, table: str, column: str) -> bool:
        return cur.execute(self.column_sql, (table, column)).fetchone() is not None

    def index_exists(self, cur: Any, statement: str) -> bool:
        """Whether ``statement`` is a ``CREATE INDEX IF NOT EXISTS`` of an index that is
        there already (on PostgreSQL it would lock its table even so: a process starting
        beside running workers deadlocked with them)."""
        prefix = "CREATE INDEX IF NOT EXISTS "
        if self.index_sql is None or not statement.startswith(prefix):
            return False
        name = statement[len(prefix) :].split()[0]
        row = cur.execute(self.index_sql, (name,)).fetchone()
        return bool(row and row[0])


SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    lock_clause="",  # BEGIN IMMEDIATE already holds the database's write lock
    clock_sql=None,
    folds=False,
    column_sql="SELECT 1 FROM pragma_table_info(?) WHERE name = ?",
    index_sql=None,
)

POSTGRES = Dialect(
    name="postgresql",
    placeholder="%s",
    lock_clause=" FOR UPDATE",
    clock_sql="extract(epoch from clock_timestamp())",
    folds=True,
    column_sql=(
        "SELECT 1 FROM information_schema.columns WHERE table_name = %s "
        "AND column_name = %s AND table_schema = current_schema()"
    ),
    index_sql="SELECT to_regclass(%s) IS NOT NULL",
)


@attrs.frozen
class AddedColumn:
    """A column added to ``table`` after the table was first released: added on first start
    to a database an older version created (checked first: ``ALTER TABLE`` locks its table
    even when it changes nothing)."""

    table: str
    column: str
    definition: str


@attrs.frozen
class Schema:
    """A versioned schema (see :func:`migrate`)."""

    #: The version this Remora writes; a database holding a newer one is refused.
    version: int
    #: Where the version is kept: ``(table, key column)``; the row's key is
    #: ``'schema_version'`` and its ``value`` column the version.
    version_table: tuple[str, str]
    #: Idempotent statements run first (``CREATE … IF NOT EXISTS``).
    create: tuple[str, ...] = ()
    #: ``upgrades[v]`` takes version ``v`` to ``v + 1`` (never edit a released entry:
    #: append one and bump :attr:`version`).
    upgrades: tuple[tuple[str, ...], ...] = ()
    added: tuple[AddedColumn, ...] = ()
    #: Idempotent statements run after the added columns (e.g. an index on one of them).
    late: tuple[str, ...] = ()
    #: How the refusal names the schema ("schema", "jobs schema").
    label: str = "schema"


def add_missing_columns(cur: Any, dialect: Dialect, added: Sequence[AddedColumn]) -> list[str]:
    """Add the columns of ``added`` the database lacks; returns ``table.column`` of each
    one added."""
    done = []
    for c in added:
        if not dialect.column_exists(cur, c.table, c.column):
            cur.execute(f"ALTER TABLE {c.table} ADD COLUMN {c.column} {c.definition}")
            done.append(f"{c.table}.{c.column}")
    return done


def installed_version(cur: Any, dialect: Dialect, schema: Schema) -> int:
    """The version the database holds (0: none yet); its version table must exist."""
    table, key = schema.version_table
    row = cur.execute(f"SELECT value FROM {table} WHERE {key} = 'schema_version'").fetchone()
    return 0 if row is None else int(row[0])


def migrate(cur: Any, dialect: Dialect, schema: Schema, where: str) -> None:
    """Create or upgrade ``schema`` in the caller's open transaction: the idempotent
    statements (skipping indexes that exist), the upgrades from the installed version, the
    added columns, the late statements, the version row.  A database with a newer version is refused
    (:class:`~remora.errors.InvalidInput`, the caller rolls back)."""
    for statement in schema.create:
        if not dialect.index_exists(cur, statement):
            cur.execute(statement)
    installed = installed_version(cur, dialect, schema)
    if installed > schema.version:
        raise InvalidInput(
            f"{where}: {schema.label} version {installed} is newer than this Remora "
            f"supports ({schema.version})"
        )
    for statements in schema.upgrades[installed : schema.version]:
        for statement in statements:
            cur.execute(statement)
    add_missing_columns(cur, dialect, schema.added)
    for statement in schema.late:
        if not dialect.index_exists(cur, statement):
            cur.execute(statement)
    table, key = schema.version_table
    cur.execute(
        dialect.q(
            f"INSERT INTO {table} ({key}, value) VALUES ('schema_version', ?) "
            f"ON CONFLICT ({key}) DO UPDATE SET value = excluded.value"
        ),
        (str(schema.version),),
    )


__all__ = [
    "POSTGRES",
    "SQLITE",
    "AddedColumn",
    "Dialect",
    "Schema",
    "add_missing_columns",
    "installed_version",
    "migrate",
]
