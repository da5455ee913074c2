"""Controls and second hunts (``@pytest.mark.control``, ``@pytest.mark.nightly``) run under
the nightly profile or with ``REMORA_CONTROLS=1``, and only then (``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from remora.testing.profiles import PROFILE_ENV
from tests.conftest import CONTROLS_ENV, controls_run


@pytest.mark.parametrize(
    ("profile", "controls", "runs"),
    [("ci", None, False), ("ci", "1", True), ("nightly", None, True), ("default", "0", False)],
)
def test_controls_run_only_nightly_or_when_asked(
    monkeypatch: pytest.MonkeyPatch, profile: str, controls: str | None, runs: bool
) -> None:
    monkeypatch.setenv(PROFILE_ENV, profile)
    if controls is None:
        monkeypatch.delenv(CONTROLS_ENV, raising=False)
    else:
        monkeypatch.setenv(CONTROLS_ENV, controls)
    assert controls_run() is runs
