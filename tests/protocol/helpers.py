"""Shared helpers of the protocol tests."""

from __future__ import annotations

import os

import pytest

from remora.protocol.config import NAMED_CONFIGS
from remora.protocol.spec import Constants, Remora

SLOW = pytest.mark.skipif(
    os.environ.get("REMORA_SLOW") != "1", reason="long exploration; set REMORA_SLOW=1"
)

#: Ground truth from TLC 2.15 (tla2tools.jar rev d5b5a7f, -workers 2, SafetySpec + all
#: invariants and action properties, deadlock checking on) on ``shared/spec/Remora.tla``:
#: (distinct states, states generated, depth).
TLC_COUNTS: dict[str, tuple[int, int, int]] = {
    "tiny": (1435, 9164, 16),
    "retry": (103911, 822029, 29),
    "credentials": (116235, 999724, 26),
    "crash": (642180, 6128601, 30),
    "two-jobs": (931381, 9713307, 31),
    "faults-1w": (1454754, 13271164, 31),
    # Not named in the issue; chosen to exercise TLC's branch multiplicity of Tick (two live
    # timers) and of CrashWorker/ReleaseReservation/CleanupStage (several witnesses).
    # retry-g2 is run without the two live-lease invariants (see the permit-limit finding).
    "retry-g2": (32375, 267862, 28),
    "crash3": (2164334, 22893112, 32),
}


def model(name: str, **overrides: object) -> Remora:
    k: Constants = NAMED_CONFIGS[name]._replace(**overrides)
    return Remora(k)
