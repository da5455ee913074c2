"""The Hypothesis profiles, and the nightly database on the real Redis."""

from __future__ import annotations

import configparser
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.extra.redis import RedisExampleDatabase

from remora.testing.profiles import (
    CI_EXAMPLES,
    REDIS_ENV,
    nightly_database,
    register_profiles,
    selected_profile,
)
from tests.common.services import require_redis

ROOT = Path(__file__).resolve().parents[2]


def test_ci_and_nightly_profiles() -> None:
    register_profiles()
    ci = settings.get_profile("ci")
    nightly = settings.get_profile("nightly")
    assert ci.derandomize and ci.database is None and ci.print_blob
    assert ci.max_examples == CI_EXAMPLES
    assert nightly.max_examples >= 20 * ci.max_examples
    assert not nightly.derandomize and nightly.database is not None and nightly.print_blob


def test_the_mutants_profile_is_ci_without_shrinking() -> None:
    """The mutation harness's profile generates what ``ci`` generates (same examples, so
    the same mutants die) and stops at the first failure instead of shrinking it."""
    from hypothesis import Phase

    from tests.mutation.__main__ import env_for_tests

    register_profiles()
    ci = settings.get_profile("ci")
    mutants = settings.get_profile("mutants")
    assert Phase.shrink in ci.phases and Phase.shrink not in mutants.phases
    assert Phase.generate in mutants.phases
    for name in ("max_examples", "derandomize", "database", "stateful_step_count"):
        assert getattr(mutants, name) == getattr(ci, name), name
    assert env_for_tests()["REMORA_HYPOTHESIS_PROFILE"] == "mutants"


def test_profile_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REMORA_HYPOTHESIS_PROFILE", raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert selected_profile() == "default"
    monkeypatch.setenv("CI", "true")  # Hypothesis's own ci profile would load here; ours wins
    assert selected_profile() == "ci"
    monkeypatch.setenv("REMORA_HYPOTHESIS_PROFILE", "nightly")
    assert selected_profile() == "nightly"


def test_tox_nightly_selects_the_nightly_profile() -> None:
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    assert "REMORA_HYPOTHESIS_PROFILE = nightly" in tox["testenv:nightly"]["setenv"]
    assert "pytest -n auto" in tox["testenv:nightly"]["commands"]


def test_nightly_database_defaults_to_a_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REDIS_ENV, raising=False)
    assert isinstance(nightly_database(), DirectoryBasedExampleDatabase)


def test_nightly_database_shares_failures_through_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    url = require_redis()
    monkeypatch.setenv(REDIS_ENV, url)
    prefix = f"remora-test-{uuid.uuid4().hex}:".encode()
    db = nightly_database(prefix)
    assert isinstance(db, RedisExampleDatabase)
    try:
        seen: list[int] = []

        @settings(database=db, max_examples=200, derandomize=False, deadline=None)
        @given(st.integers(0, 10**9))
        def machine_a(x: int) -> None:
            seen.append(x)
            assert x < 123_456

        with pytest.raises(AssertionError):
            machine_a()
        assert seen[-1] == 123_456  # shrunk, and saved in Redis
        seen.clear()
        with pytest.raises(AssertionError):
            machine_a()  # "another machine": the saved failure is replayed first
        assert seen[0] == 123_456
    finally:
        client = db.redis
        for key in client.scan_iter(match=prefix + b"*"):
            client.delete(key)
