"""Fixtures the job tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jobs.job_services import ServiceBackends, service_backends


@pytest.fixture
def services(
    remora_scratch_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServiceBackends]:
    """The stores over PostgreSQL (the plugin's scratch database) and Redis; a failing
    machine's trace goes to the test's own directory."""
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))
    with service_backends(remora_scratch_database) as backends:
        yield backends
