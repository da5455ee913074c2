"""A failure that does not come back (an engine's own nondeterminism) is still reported as
the parallel machine's failure — with its exported example and "reproduced in 0 of 5" —
never as Hypothesis's flaky-test error, which would hide the example."""

from __future__ import annotations

from pathlib import Path

import pytest

from remora.testing.parallel import ParallelFailure, ParallelMachine
from tests.parallel import flaky_backends
from tests.parallel.hunt import artifacts_in, hunt_settings


class FlakyStore(ParallelMachine):
    backend = flaky_backends.WrongOnce


def test_a_failure_that_does_not_come_back_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(flaky_backends.ONCE, "left", 1)
    with artifacts_in(tmp_path), pytest.raises(ParallelFailure) as caught:
        FlakyStore.run(hunt_settings(20))
    found = caught.value
    assert found.failure == "ERROR not-linearizable"
    assert (found.reproduced, found.runs) == (0, FlakyStore.reproduce)
    assert "reproduced in 0 of 5 runs" in str(found)
    assert Path(found.path).exists()
