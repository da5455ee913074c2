"""The trace's optional named fields (``config.mutation``): round-trip, digests of traces
without them unchanged, and rejection of bad names."""

from __future__ import annotations

import json

import attrs
import pytest

from remora.sim.codec import MAX_NAME
from remora.sim.generate import generate
from remora.sim.trace import TraceError, config_digest, loads


def test_a_name_round_trips_and_is_covered_by_the_digest() -> None:
    trace = generate(17, "valid")
    assert "mutation" not in trace.to_json()["config"]  # earlier traces keep their digest
    named = attrs.evolve(trace, config=attrs.evolve(trace.config, mutation="skip-fence-check"))
    doc = named.to_json()
    assert doc["config"]["mutation"] == "skip-fence-check"
    assert doc["config_digest"] == config_digest(doc["config"]) != trace.config.digest()
    assert loads(named.dumps()) == named


@pytest.mark.parametrize("bad", ["", "x" * (MAX_NAME + 1), "a\nb", 7])
def test_bad_names_are_rejected(bad: object) -> None:
    doc = generate(1, "valid").to_json()
    doc["config"]["mutation"] = bad
    doc["config_digest"] = config_digest(doc["config"])
    with pytest.raises(TraceError, match=r"^trace\.config\.mutation: "):
        loads(json.dumps(doc))
