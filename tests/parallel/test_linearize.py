"""The linearizability search (remora.sim.linearize) with the store model, on hand-written
histories: what it must accept, what it must refuse, and unknown outcomes both ways."""

from __future__ import annotations

from collections.abc import Hashable

from remora.sim.linearize import History, Op, linearize
from remora.sim.parallel import StoreModel

CLAIM = ("claim", 0)
READ = ("observe", 0)


def op(
    i: int,
    thread: int,
    command: Hashable,
    result: Hashable | None,
    invoked: int,
    returned: int | None,
    definite: bool = True,
) -> Op:
    return Op(i, thread, command, result, invoked, returned, definite)


def process(epoch: int, frontier: int, offset: int) -> tuple[object, ...]:
    return ("process", 0, epoch, frontier, offset)


def test_sequential_history_is_linearizable() -> None:
    t0 = [
        op(0, 0, CLAIM, ("ok", 1, 0), 0, 1),
        op(1, 0, process(1, 0, 0), ("ok", 1, 1), 2, 3),
        op(2, 0, READ, ("ok", 1, 1), 4, 5),
    ]
    verdict = linearize([t0], StoreModel(1, ((1, 1),)))
    assert verdict.ok and verdict.order == (0, 1, 2)


def test_overlapping_operations_may_go_either_way() -> None:
    # the read overlaps the claim: it may see the epoch before or after it
    writer = [op(0, 0, CLAIM, ("ok", 1, 0), 0, 3)]
    for seen in (("ok", 0, 0), ("ok", 1, 0)):
        reader = [op(1, 1, READ, seen, 1, 2)]
        assert linearize([writer, reader], StoreModel(1, ((1, 0),))).ok


def test_a_read_after_a_finished_write_must_see_it() -> None:
    """Real time: the claim answered (1) before the read was invoked (2), so a read of the
    old epoch is a stale read — the very thing a cache updated at the wrong time gives."""
    writer = [op(0, 0, CLAIM, ("ok", 1, 0), 0, 1)]
    reader = [op(1, 1, READ, ("ok", 0, 0), 2, 3)]
    verdict = linearize([writer, reader], StoreModel(1, ((1, 0),)))
    assert not verdict.ok
    assert "observe" in verdict.message and "-> ok 0 0" in verdict.message
    # the same results overlapping in time are linearizable (read first)
    overlapping = [op(1, 1, READ, ("ok", 0, 0), 0, 3)]
    assert linearize([writer, overlapping], StoreModel(1, ((1, 0),))).ok


def test_two_claims_cannot_both_install_the_same_epoch() -> None:
    a = [op(0, 0, CLAIM, ("ok", 1, 0), 0, 3)]
    b = [op(1, 1, CLAIM, ("ok", 1, 0), 1, 2)]
    assert not linearize([a, b], StoreModel(1, ((1, 0),))).ok


def test_a_stale_commit_is_refused() -> None:
    """The process under epoch 1 committed although a claim of epoch 2 finished first."""
    owner = [op(0, 0, CLAIM, ("ok", 1, 0), 0, 1), op(2, 0, process(1, 0, 0), ("ok", 1, 1), 4, 7)]
    thief = [op(1, 1, CLAIM, ("ok", 2, 0), 2, 3)]
    assert not linearize([owner, thief], StoreModel(1, ((2, 1),))).ok


def test_the_final_state_must_be_reached() -> None:
    t0 = [op(0, 0, CLAIM, ("ok", 1, 0), 0, 1)]
    assert linearize([t0], StoreModel(1, ((1, 0),))).ok
    assert not linearize([t0], StoreModel(1, ((2, 0),))).ok


def test_an_unknown_claim_may_or_may_not_have_taken_effect() -> None:
    lost = [op(0, 0, CLAIM, None, 0, 1, definite=False)]
    for final, read in (((1, 0), ("ok", 1, 0)), ((0, 0), ("ok", 0, 0))):
        reader = [op(1, 1, READ, read, 2, 3)]
        assert linearize([lost, reader], StoreModel(1, (final,))).ok
    # but not both at once: the read saw it, the final state says it never happened
    reader = [op(1, 1, READ, ("ok", 1, 0), 2, 3)]
    assert not linearize([lost, reader], StoreModel(1, ((0, 0),))).ok


def test_a_settled_unknown_effect_cannot_land_after_its_call() -> None:
    """With ``returned`` set the lost effect lands within its call: a read after the call
    that saw nothing fixes it as not applied.  Unsettled (None), it may land later."""
    reader = [op(1, 1, READ, ("ok", 0, 0), 2, 3)]
    settled = [op(0, 0, CLAIM, None, 0, 1, definite=False)]
    assert not linearize([settled, reader], StoreModel(1, ((1, 0),))).ok
    open_ended = [op(0, 0, CLAIM, None, 0, None, definite=False)]
    assert linearize([open_ended, reader], StoreModel(1, ((1, 0),))).ok


def test_unavailable_changes_nothing_and_fits_anywhere() -> None:
    a = [op(0, 0, CLAIM, ("unavailable",), 0, 5), op(1, 0, READ, ("ok", 0, 0), 6, 7)]
    assert linearize([a], StoreModel(1, ((0, 0),))).ok


def test_strict_clients_never_send_a_stale_frontier_of_their_own_epoch() -> None:
    """Lifecycle target: a token of the installed epoch with another frontier is a client
    bug, even though the store's fence refused it (the refusal alone is linearizable)."""
    t0 = [
        op(0, 0, CLAIM, ("ok", 1, 0), 0, 1),
        op(1, 0, process(1, 0, 0), ("ok", 1, 1), 2, 3),
        op(2, 0, process(1, 0, 0), ("fenced",), 4, 5),
    ]
    assert linearize([t0], StoreModel(1, ((1, 1),))).ok
    assert not linearize([t0], StoreModel(1, ((1, 1),), strict=True)).ok


def test_the_search_gives_up_with_no_verdict_rather_than_passing() -> None:
    threads = [[op(10 * t + i, t, READ, ("ok", 0, 0), 0, 100) for i in range(4)] for t in range(4)]
    threads[0].append(op(99, 0, READ, ("ok", 5, 0), 101, 102))  # impossible: forces search
    verdict = linearize(threads, StoreModel(1, ((0, 0),)), limit=20)
    assert not verdict.ok and verdict.exhausted


def test_memoization_keeps_wide_histories_cheap() -> None:
    """Three threads of six interchangeable reads: without memoization the search would
    try 18!/(6!^3) orders before refusing the impossible last read."""
    threads = [[op(10 * t + i, t, READ, ("ok", 0, 0), 0, 50) for i in range(6)] for t in range(3)]
    threads[2].append(op(99, 2, READ, ("ok", 1, 0), 51, 52))
    verdict = linearize(threads, StoreModel(1, ((0, 0),)))
    assert not verdict.ok and not verdict.exhausted
    assert verdict.explored < 2000


def test_history_records_answers_on_one_clock() -> None:
    history = History()
    a = history.invoke(0, CLAIM)
    b = history.invoke(1, READ)
    history.answer(b, ("ok", 0, 0), True, True)
    history.answer(a, None, False, False)
    t0, t1 = history.threads(2)
    assert t0[0].invoked < t1[0].invoked < t1[0].returned  # type: ignore[operator]
    assert not t0[0].definite and t0[0].returned is None and t0[0].result is None
    unanswered = history.invoke(1, READ)
    assert history.op(unanswered).definite is False  # a thread that died: unknown, open
