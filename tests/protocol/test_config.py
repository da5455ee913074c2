"""Configuration files and the ``remora explore`` command."""

from __future__ import annotations

import json
from pathlib import Path

from remora.protocol.config import NAMED_CONFIGS, load_config


def test_named_configs_match_the_issue() -> None:
    k = NAMED_CONFIGS["faults-1w"]
    assert k.FaultServices == frozenset({"Coordination", "Durable", "Target"})
    assert (k.MaxAttempts, k.MaxProgress, k.MaxCoordLosses, k.MaxPartitions) == (2, 2, 1, 1)
    assert NAMED_CONFIGS["crash"].Workers == ("w1", "w2")
    assert NAMED_CONFIGS["credentials"].MaxCredentialIntents == 2
    assert NAMED_CONFIGS["two-jobs"].Jobs == ("j1", "j2")
    for k in NAMED_CONFIGS.values():
        assert (k.LeaseLimit, k.ReservationLimit, k.LocalLimit, k.GlobalLimit) == (1, 1, 1, 1)


def test_toml_and_json_files(tmp_path: Path) -> None:
    t = tmp_path / "r.toml"
    t.write_text(
        'Jobs = ["j1"]\nWorkers = ["w1"]\nInitialWorkers = ["w1"]\n'
        "MaxAttempts = 2\nMaxProgress = 2\n"
    )
    name, k = load_config(str(t))
    assert name == "r" and k == NAMED_CONFIGS["retry"]
    j = tmp_path / "c.json"
    j.write_text(
        json.dumps(
            {
                "name": "creds",
                "Jobs": ["j1"],
                "Workers": ["w1"],
                "InitialWorkers": ["w1"],
                "MaxAttempts": 1,
                "MaxProgress": 1,
                "MaxCredentialIntents": 2,
            }
        )
    )
    name, k = load_config(str(j))
    assert name == "creds" and k == NAMED_CONFIGS["credentials"]
