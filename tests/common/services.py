"""Reaching the real services on 127.0.0.1 (PostgreSQL 5432, Redis 6379).

Without a reachable server a test skips with the reason — unless
``REMORA_REQUIRE_SERVICES=1`` (set by ``.ci/run``), where it fails."""

from __future__ import annotations

import os

import pytest

REDIS_URL = os.environ.get("REMORA_REDIS_URL", "redis://127.0.0.1:6379/0")

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
"""The PostgreSQL maintenance database the suite uses unless ``REMORA_PG_DSN`` names one."""


def unavailable(service: str, reason: str) -> None:
    message = f"{service} is not reachable: {reason}"
    if os.environ.get("REMORA_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (REMORA_REQUIRE_SERVICES=1)")
    pytest.skip(message)


def require_redis() -> str:
    """The Redis URL to use, after checking the server answers PING."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except (redis.RedisError, OSError) as exc:
        unavailable("Redis", f"{REDIS_URL}: {exc}")
    return REDIS_URL
