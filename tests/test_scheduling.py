"""The suite's test order for xdist (``tests/scheduling.py``): the long tests are spread
over the workers' first batches, longest first into the lightest batch."""

from __future__ import annotations

from tests.scheduling import EXPECTED_S, spread_the_long_tests

LONG = sorted(EXPECTED_S, key=lambda n: -EXPECTED_S[n])


def order(items: list[str], workers: int) -> list[str]:
    return spread_the_long_tests(items, {id(it): it for it in items}, workers)


def test_the_long_tests_open_the_workers_first_batches_balanced() -> None:
    short = [f"tests/test_x.py::test_{i}" for i in range(400)]
    items = short[:200] + LONG[::-1] + short[200:]  # the long ones collected mid-way, reversed
    out = order(items, 2)
    assert sorted(out) == sorted(items)  # nothing lost, nothing added
    chunk = len(items) // 2 // 4
    first, second = out[:chunk], out[chunk : 2 * chunk]
    assert out[0] == LONG[0] and out[chunk] == LONG[1]  # the two longest, one each
    loads = [sum(EXPECTED_S.get(n, 0) for n in batch) for batch in (first, second)]
    assert set(first + second) >= set(LONG)
    assert abs(loads[0] - loads[1]) <= EXPECTED_S[LONG[0]]  # greedy: within the longest
    rest = [n for n in out if n not in EXPECTED_S]
    assert rest == short  # the others keep their order


def test_one_worker_keeps_the_collection_order() -> None:
    items = ["tests/test_x.py::test_a", LONG[0], "tests/test_x.py::test_b"]
    assert order(items, 1) == items
