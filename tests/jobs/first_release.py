"""The durable tables as Remora's first release created them, derived from today's schema.

Every column of :data:`remora.jobs.sql.ADDED_COLUMNS` is taken out of its table's ``CREATE``
statement, so a test of the migration starts from the first release's tables whatever columns
later releases add (a new column needs no edit here, only its :class:`AddedColumn` entry)."""

from __future__ import annotations

import re

from remora.jobs.sql import ADDED_COLUMNS, TABLES


def first_release_tables() -> list[str]:
    """``TABLES`` without any added column."""
    tables = []
    for statement in TABLES:
        for added in ADDED_COLUMNS:
            if f"TABLE IF NOT EXISTS {added.table} (" not in statement:
                continue
            pattern = rf",\s*{re.escape(added.column)} {re.escape(added.definition)}"
            stripped = re.sub(pattern, "", statement, count=1)
            assert stripped != statement, f"{added.table}.{added.column} not found in its table"
            statement = stripped
        tables.append(statement)
    return tables


#: A job the first release accepted (its 17 columns).
FIRST_RELEASE_JOB = (
    "INSERT INTO remora_jobs_job VALUES ('old', 1, 'quick', 'null', 3, 100, 'Queued', 0, 0, 0, "
    "1, 0, 0, 0, 0, 1, '')"
)
