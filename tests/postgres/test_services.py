"""The service gate on the PostgreSQL side: skip with a reason when the server is
unreachable, fail instead under ``REMORA_REQUIRE_SERVICES=1``.  (The Redis side is
exercised by ``tests/stateful/test_profiles.py``.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import services
from tests.postgres.services import pg_maintenance_dsn, probe_postgres


@pytest.fixture
def unreachable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("REMORA_PG_DSN", "host=127.0.0.1 port=1 user=postgres connect_timeout=2")
    services._postgres_problem.cache_clear()
    yield
    services._postgres_problem.cache_clear()


def test_unreachable_server_skips_with_reason(
    unreachable: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REMORA_REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"PostgreSQL is not reachable: .*refused"):
        services.require_postgres()


def test_unreachable_server_fails_when_required(
    unreachable: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMORA_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="REMORA_REQUIRE_SERVICES=1"):
        services.require_postgres()


def test_probe_reports_an_unreachable_server_on_one_line() -> None:
    problem = probe_postgres("host=127.0.0.1 port=1 user=postgres connect_timeout=2")
    assert problem is not None and "\n" not in problem


def test_dsn_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_PG_DSN", "host=db.example user=ci dbname=ci")
    assert pg_maintenance_dsn() == "host=db.example user=ci dbname=ci"
    monkeypatch.delenv("REMORA_PG_DSN")
    assert pg_maintenance_dsn().startswith("postgresql://postgres@127.0.0.1:5432/")
