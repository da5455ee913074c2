"""Seeded random schedules over the simulated runtime: every step is a spec step."""

from __future__ import annotations

import pytest

from tests.jobs.walk import drain, walk


@pytest.mark.parametrize("seed", range(40))
def test_random_walk_refines_the_spec(seed: int) -> None:
    chk = walk(seed, steps=150)
    drain(chk)
