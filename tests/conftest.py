"""The suite's configuration.  Its store fixtures are the pytest plugin's
(:mod:`remora.testing.plugin`: ``remora_store_factory``, ``remora_sqlite_store``,
``remora_scratch_database`` …), the ones a user's project gets: here the PostgreSQL server
they use defaults to the local one the suite runs against (``REMORA_PG_DSN`` or
``--remora-dsn`` still choose another)."""

from __future__ import annotations

import os

from tests.common.services import DEFAULT_PG_DSN

os.environ.setdefault("REMORA_PG_DSN", DEFAULT_PG_DSN)
