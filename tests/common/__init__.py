"""Helpers shared by the test packages (nothing here imports psycopg at module level, so
the SQLite-only tests collect without it)."""
