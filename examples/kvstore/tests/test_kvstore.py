"""The project's store under Remora's parallel machines: 2-3 threads share one ``KvBackend``
and send it claims, reads and writes (with lost replies and aborts) under a PCT schedule;
every run must be linearizable — explained by some one-at-a-time order of the calls — and
end with the outputs Remora's oracle expects.  The planted ``HastyKvBackend`` must be
caught, and its exported example replays with ``remora sim-worker --replay``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from kvstore.backend import HastyKvBackend, KvBackend

from remora.testing.parallel import ParallelFailure, ParallelMachine


class KvInParallel(ParallelMachine):
    backend = KvBackend  # called with nothing: one object the threads share
    partitions = 2


TestKvInParallel = KvInParallel.TestCase


class HastyKvInParallel(KvInParallel):
    backend = HastyKvBackend


def test_the_parallel_machine_finds_the_hasty_backend() -> None:
    with pytest.raises(ParallelFailure) as caught:
        HastyKvInParallel.run(
            settings(
                max_examples=600,
                derandomize=True,
                database=None,
                deadline=None,  # an example runs threads: its time depends on the load
                phases=(Phase.explicit, Phase.generate, Phase.shrink),
                report_multiple_bugs=False,
                suppress_health_check=[HealthCheck.too_slow],
            )
        )
    found = caught.value
    assert found.failure.startswith("ERROR ")
    assert found.reproduced == found.runs  # one shared object: every schedule is forced
    Path("found.json").write_text(
        json.dumps({"failure": found.failure, "example": found.path}), encoding="utf-8"
    )
