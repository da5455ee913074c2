"""The report's fast JSON writer spells every value exactly as ``json.dumps(indent=2)``."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remora.sim.jsontext import dumps_indented


def _reference(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities included: the report's writer must spell them too
    | st.text()
)
_keys = st.text() | st.integers() | st.floats() | st.booleans() | st.none()
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_keys, inner, max_size=4)
    ),
    max_leaves=30,
)


@given(_values)
def test_same_text_as_the_standard_library(value: Any) -> None:
    assert dumps_indented(value) == _reference(value)


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


def test_subclasses_and_special_floats_are_spelled_like_the_standard_library() -> None:
    value = {
        "enum": Colour.RED,
        "str": Name('x\n"y\u2028'),
        "nan": math.nan,
        "inf": [math.inf, -math.inf, 1e300, -0.0],
        Colour.RED: {"nested": [{"a": []}, {}, [[]], ()]},
        1.5: None,
        True: False,
        None: "null key",
    }
    assert dumps_indented(value) == _reference(value)


def test_what_it_cannot_write_raises_the_standard_librarys_error() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"a": [object()]})
    with pytest.raises(TypeError, match="keys must be"):
        dumps_indented({(1, 2): 1})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(cycle)
