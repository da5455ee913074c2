"""A recorded step's JSON (``StepRecord.to_json``, spelled out field by field for speed)
is exactly what ``attrs.asdict`` gives, without ``facts`` when there are none, and reads
back into the same record: a field added to :class:`~remora.jobs.io.StepRecord` and
forgotten in ``to_json`` fails here, not in a validation of a recorded run."""

from __future__ import annotations

import json

import attrs
from hypothesis import given
from hypothesis import strategies as st

from remora.jobs.io import StepRecord

scalars = st.one_of(st.integers(), st.text(max_size=5), st.floats(allow_nan=False))
records = st.builds(
    StepRecord,
    actor=st.text(max_size=5),
    seq=st.integers(0, 10**6),
    action=st.text(max_size=10),
    params=st.dictionaries(st.text(max_size=3), scalars, max_size=3),
    store=st.sampled_from(["local", "durable", "coordination"]),
    key=st.text(max_size=4),
    version=st.integers(0, 100),
    order=st.text(max_size=6),
    wall=st.floats(0, 2e9),
    facts=st.dictionaries(st.text(max_size=3), scalars, max_size=2),
)


@given(records)
def test_the_json_of_a_step_is_every_field(record: StepRecord) -> None:
    expected = attrs.asdict(record)
    if not record.facts:
        del expected["facts"]
    assert record.to_json() == expected
    assert StepRecord(**json.loads(json.dumps(record.to_json()))) == record
