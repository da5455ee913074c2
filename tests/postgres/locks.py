"""Lock-wait helpers for the tests that race connections on the real server: wait until
some sessions queue on a lock, run a call in a thread and keep its outcome, and a planted
backend with no fence check."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from remora.domain import SourceRecord
from remora.store import Token
from remora.store.postgres import PostgresBackend

BOUND = 15.0  # seconds: a hang fails instead of blocking the run


def lock_waiters(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return int(row[0]) if row else 0


def wait_for_waiters(conn: psycopg.Connection[Any], n: int) -> None:
    give_up = time.monotonic() + BOUND
    while lock_waiters(conn) < n:
        if time.monotonic() > give_up:
            raise AssertionError(f"expected {n} lock waiters")
        time.sleep(0.005)


class Outcome:
    def __init__(self) -> None:
        self.value: object = None
        self.error: BaseException | None = None

    def __repr__(self) -> str:
        return f"error {self.error!r}" if self.error is not None else f"success {self.value!r}"


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, Outcome]:
    out = Outcome()

    def run() -> None:
        try:
            out.value = fn()
        except BaseException as exc:  # recorded for the assertions
            out.error = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


class NoFence(PostgresBackend):
    """Planted bug: the fence check is skipped."""

    def _fence(self, partition: int, installed: Token, token: Token, record: SourceRecord) -> None:
        return None
