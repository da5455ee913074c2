"""A derandomized example is a function of its test alone, not of the modules the process
imported before it (:func:`remora.testing.profiles.pin_local_constants`)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers

from remora.testing.profiles import pin_local_constants


def derandomized_draws() -> list[int]:
    seen: list[int] = []

    @settings(derandomize=True, max_examples=300, database=None, phases=["generate"])
    @given(st.integers(0, 10**6))
    def drawn(x: int) -> None:
        seen.append(x)

    drawn()
    return seen


def import_a_module_with_constants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What another test's import does to the process: a local module with constants."""
    (tmp_path / "remora_probe_constants.py").write_text(
        "".join(f"C{i} = {123457 + 7919 * i}\n" for i in range(50))
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "remora_probe_constants", None)  # removed afterwards
    monkeypatch.delitem(sys.modules, "remora_probe_constants")
    importlib.import_module("remora_probe_constants")


def test_an_import_between_two_runs_changes_no_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_local_constants()
    before = derandomized_draws()
    import_a_module_with_constants(tmp_path, monkeypatch)
    assert derandomized_draws() == before


def test_without_the_pin_an_import_changes_the_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted: Hypothesis's own pool (rescanned on every import) — the same derandomized
    test draws other examples once a module was imported, which is what made a planted
    bug's hunt pass alone and fail in the suite."""
    real = providers.__dict__["_get_local_constants"]
    original = getattr(real, "__wrapped_original__", None)
    if original is None:
        pytest.skip("the pin cannot reach Hypothesis's original pool scan here")
    monkeypatch.setattr(providers, "_get_local_constants", original)
    providers.CONSTANTS_CACHE.cache.clear()
    before = derandomized_draws()
    import_a_module_with_constants(tmp_path, monkeypatch)
    after = derandomized_draws()
    providers.CONSTANTS_CACHE.cache.clear()
    assert after != before
