"""The service gate: skip with a reason when a server is unreachable, fail instead under
``REMORA_REQUIRE_SERVICES=1``; and the Redis-backed Hypothesis example database of the
``nightly`` profile against the real Redis."""

from __future__ import annotations

import secrets

import pytest

from tests.postgres.services import (
    pg_maintenance_dsn,
    probe_postgres,
    probe_tcp,
    require_redis,
    unavailable,
)


def test_unreachable_service_skips_with_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REMORA_REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL unreachable: refused"):
        unavailable("PostgreSQL", "refused")


def test_unreachable_service_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="REMORA_REQUIRE_SERVICES=1"):
        unavailable("Redis", "refused")


def test_probes_report_an_unreachable_server() -> None:
    problem = probe_postgres("host=127.0.0.1 port=1 user=postgres connect_timeout=2")
    assert problem is not None and "\n" not in problem
    assert probe_tcp("127.0.0.1", 1) is not None


def test_dsn_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_PG_DSN", "host=db.example user=ci dbname=ci")
    assert pg_maintenance_dsn() == "host=db.example user=ci dbname=ci"
    monkeypatch.delenv("REMORA_PG_DSN")
    assert pg_maintenance_dsn().startswith("postgresql://postgres@127.0.0.1:5432/")


@pytest.mark.services
def test_redis_example_database_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    url = require_redis()
    monkeypatch.setenv("REMORA_HYPOTHESIS_REDIS", url)
    from conftest import nightly_database

    db = nightly_database()
    key, value = f"remora-test-{secrets.token_hex(8)}".encode(), b"\x01\x02example"
    try:
        db.save(key, value)
        assert list(db.fetch(key)) == [value]
    finally:
        db.delete(key, value)
    assert list(db.fetch(key)) == []
