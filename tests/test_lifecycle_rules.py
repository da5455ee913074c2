"""Named tests of the lifecycle's resolution rules: each asserts the exact store call
sequence (operation, requested outcome, effect applied, observation) and the waits."""

from __future__ import annotations

import pytest

from remora.errors import (
    Canceled,
    DeadlineExceeded,
    Fenced,
    InvalidInput,
    LifetimeRetired,
    RetriesExhausted,
    UnresolvedRead,
)
from remora.faults import At, Operation
from remora.store import Token
from tests.common.support import Harness, amendment, records

OK = "commit"


def source() -> list:  # type: ignore[type-arg]
    return records(0, amendment("s", "submit", 1), amendment("s", "correct", 2))


def owned_harness() -> Harness:
    """A harness whose lifetime w0 has assigned and seeked partition 0."""
    h = Harness(source())
    h.lifecycle.assign([0])
    assert h.lifecycle.seek(0) == 0
    h.clear()
    return h


def outbox_len(h: Harness) -> int:
    return len(h.store.snapshot().outbox)


# -- assign ---------------------------------------------------------------------------


def test_assign_validates_then_claims() -> None:
    h = Harness(source())
    assert h.lifecycle.assign([0]) == {0: Token(1, 0)}
    assert h.calls() == [("validate", OK, True, "ok"), ("claim", OK, True, "ok")]
    assert h.lifecycle.owned() == {0: Token(1, 0)}


def test_claim_unknown_committed_reobserves_then_claims_fresh() -> None:
    h = Harness(source())
    h.script("claim", 1, "unknown-committed")
    token = h.lifecycle.assign([0])[0]
    assert h.calls() == [
        ("validate", OK, True, "ok"),
        ("claim", "unknown-committed", True, "unknown"),
        ("observe", OK, True, "ok"),  # reads epoch 1 ...
        ("claim", OK, True, "ok"),  # ... but does not adopt it: a fresh claim installs 2
    ]
    assert h.waits == [0.1]
    assert token == Token(2, 0)


def test_claim_unknown_aborted_reobserves_then_claims_fresh() -> None:
    h = Harness(source())
    h.script("claim", 1, "unknown-aborted")
    token = h.lifecycle.assign([0])[0]
    assert h.calls() == [
        ("validate", OK, True, "ok"),
        ("claim", "unknown-aborted", False, "unknown"),
        ("observe", OK, True, "ok"),  # can read epoch 0 after a failed first claim
        ("claim", OK, True, "ok"),
    ]
    assert h.waits == [0.1]
    assert token == Token(1, 0)


def test_claim_unknown_then_stop_makes_no_fresh_claim() -> None:
    h = Harness(source())
    h.script("claim", 1, "unknown-committed")
    h.clock.on_wait = lambda s: h.lifecycle.stop()
    with pytest.raises(Canceled):
        h.lifecycle.assign([0])
    assert [c[0] for c in h.calls()] == ["validate", "claim", "observe"]
    assert h.lifecycle.owned() == {}


@pytest.mark.parametrize("operation", ["validate", "claim"])
def test_assign_retry_exhaustion_at_exactly_three_calls(operation: str) -> None:
    h = Harness(source())
    for n in (1, 2, 3):
        h.script(operation, n, "abort")
    with pytest.raises(RetriesExhausted) as exc:
        h.lifecycle.assign([0])
    assert exc.value.calls == 3
    failing = [c for c in h.calls() if c[0] == operation]
    assert failing == [(operation, "abort", False, "unavailable")] * 3
    assert h.waits == [0.1, 0.2]
    assert h.clock.ms == 300
    assert h.lifecycle.retired is exc.value


def test_abort_then_success_retries_with_first_wait() -> None:
    h = Harness(source())
    h.script("claim", 1, "abort")
    h.script("claim", 2, "abort")
    assert h.lifecycle.assign([0]) == {0: Token(1, 0)}
    assert [c[3] for c in h.calls()] == ["ok", "unavailable", "unavailable", "ok"]
    assert h.waits == [0.1, 0.2]


def test_stop_interleaved_after_claim_does_not_retain_token() -> None:
    h = Harness(source())
    h.hook.on_boundary(Operation.CLAIM, 1, At.AFTER, lambda ctx: h.lifecycle.stop())
    with pytest.raises(Canceled):
        h.lifecycle.assign([0])
    assert h.calls()[-1] == ("claim", OK, True, "canceled")  # installed, but not retained
    assert h.lifecycle.owned() == {}
    assert h.store.snapshot().partition(0).epoch == 1


def test_claim_returning_an_older_epoch_is_incompatible() -> None:
    h = Harness(source())
    h.lifecycle.assign([0])
    # Simulate a store whose claim goes backwards (a broken backend).
    h.store.claim = lambda p, ctx: Token(1, 0)  # type: ignore[method-assign]
    with pytest.raises(Fenced):
        h.lifecycle.assign([0])
    assert h.lifecycle.retired is not None


# -- seek -----------------------------------------------------------------------------


def test_seek_observes_without_installing_an_epoch() -> None:
    h = Harness(source())
    h.lifecycle.assign([0])
    h.clear()
    assert h.lifecycle.seek(0) == 0
    assert h.calls() == [("observe", OK, True, "ok")]
    assert h.store.snapshot().partition(0).epoch == 1


def test_seek_returns_durable_frontier_written_by_earlier_owner() -> None:
    h = owned_harness()
    h.lifecycle.process(0, source()[0])
    other = h.new_lifecycle("w1")
    other.assign([0])
    assert other.seek(0) == 1
    assert other.owned() == {0: Token(2, 1)}


def test_late_seek_after_revoke_is_fenced_without_io() -> None:
    h = owned_harness()
    h.lifecycle.revoke()
    with pytest.raises(Fenced):
        h.lifecycle.seek(0)
    assert h.calls() == []
    assert h.lifecycle.retired is not None


def test_seek_sees_a_newer_epoch_and_is_fenced() -> None:
    h = owned_harness()
    h.new_lifecycle("w1").assign([0])
    h.clear()
    with pytest.raises(Fenced):
        h.lifecycle.seek(0)
    assert h.calls() == [("observe", OK, True, "ok")]


def test_seek_read_exhaustion_retires() -> None:
    h = Harness(source())
    h.lifecycle.assign([0])
    h.clear()
    for n in (1, 2, 3):
        h.script("observe", n, "abort")
    with pytest.raises(RetriesExhausted):
        h.lifecycle.seek(0)
    assert h.calls() == [("observe", "abort", False, "unavailable")] * 3
    assert h.waits == [0.1, 0.2]


# -- process --------------------------------------------------------------------------


def test_process_commits_and_updates_local_frontier() -> None:
    h = owned_harness()
    assert h.lifecycle.process(0, source()[0]) == Token(1, 1)
    assert h.calls() == [("process", OK, True, "ok")]
    assert h.lifecycle.owned() == {0: Token(1, 1)}


def test_process_unknown_committed_resolves_as_done() -> None:
    h = owned_harness()
    assert h.lifecycle.process(0, source()[0]) == Token(1, 1)  # after resolution
    h.clear()
    h.script("process", 1, "unknown-committed")
    assert h.lifecycle.process(0, source()[1]) == Token(1, 2)
    assert h.calls() == [
        ("process", "unknown-committed", True, "unknown"),
        ("observe", OK, True, "ok"),  # same epoch, frontier advanced: done, no retry
    ]
    assert h.waits == []
    assert outbox_len(h) == 2


def test_process_unknown_aborted_retries_same_record() -> None:
    h = owned_harness()
    h.script("process", 1, "unknown-aborted")
    assert h.lifecycle.process(0, source()[0]) == Token(1, 1)
    assert h.calls() == [
        ("process", "unknown-aborted", False, "unknown"),
        ("observe", OK, True, "ok"),  # same epoch, original frontier: retry
        ("process", OK, True, "ok"),
    ]
    assert h.waits == [0.1]
    assert outbox_len(h) == 1


def test_unknown_committed_then_replacement_fences_original() -> None:
    """Epoch order 1: the decision commits, then a replacement installs a new epoch before
    the original can resolve; the original must retire, not adopt or repeat."""
    h = owned_harness()
    replacement = h.new_lifecycle("w1")

    def replace(ctx: object) -> None:
        replacement.assign([0])
        replacement.seek(0)

    h.script("process", 1, "unknown-committed")
    h.hook.on_boundary(Operation.PROCESS, 1, At.AFTER, replace)
    with pytest.raises(Fenced):
        h.lifecycle.process(0, source()[0])
    # calls are logged as they return: the replacement's I/O returns inside the original's
    assert [c[:2] for c in h.calls()] == [
        ("validate", OK),
        ("claim", OK),
        ("observe", OK),  # the replacement's seek
        ("process", "unknown-committed"),
        ("observe", OK),  # the original's recovery read: epoch 2
    ]
    assert h.lifecycle.retired is not None and h.lifecycle.owned() == {}
    assert outbox_len(h) == 1
    assert replacement.owned() == {0: Token(2, 1)}


def test_replacement_before_process_fences_stale_token() -> None:
    """Epoch order 2: the replacement installs first; the old token fails without effect."""
    h = owned_harness()
    replacement = h.new_lifecycle("w1")
    h.script("process", 1, "unknown-committed")
    h.hook.on_boundary(
        Operation.PROCESS, 1, At.BEFORE, lambda ctx: (replacement.assign([0]), replacement.seek(0))
    )
    with pytest.raises(Fenced):
        h.lifecycle.process(0, source()[0])
    assert h.calls()[-1] == ("process", "unknown-committed", False, "fenced")
    assert outbox_len(h) == 0
    assert replacement.process(0, source()[0]) == Token(2, 1)


def test_unknown_process_with_unexpected_frontier_is_fenced() -> None:
    h = owned_harness()
    # A different record commits behind our back in the same epoch (a broken writer).
    other = source()[0]

    def sneak(ctx: object) -> None:
        h.store.backend.process(0, Token(1, 0), other, h.lifecycle._ctx, True)  # type: ignore[attr-defined]

    h.script("process", 1, "unknown-aborted")
    h.hook.on_boundary(Operation.PROCESS, 1, At.AFTER, sneak)
    far = records(0, amendment("t", "submit", 1), start=5)[0]
    with pytest.raises(Fenced):
        h.lifecycle.process(0, far)


def test_process_retry_exhaustion_at_exactly_three_calls() -> None:
    h = owned_harness()
    for n in (1, 2, 3):
        h.script("process", n, "abort")
    with pytest.raises(RetriesExhausted) as exc:
        h.lifecycle.process(0, source()[0])
    assert h.calls() == [("process", "abort", False, "unavailable")] * 3
    assert h.waits == [0.1, 0.2]
    assert exc.value.calls == 3
    assert h.lifecycle.retired is exc.value


def test_unknown_aborted_three_times_exhausts() -> None:
    h = owned_harness()
    for n in (1, 2, 3):
        h.script("process", n, "unknown-aborted")
    with pytest.raises(RetriesExhausted):
        h.lifecycle.process(0, source()[0])
    assert [c[0] for c in h.calls()] == ["process", "observe"] * 3
    assert outbox_len(h) == 0


def test_cancellation_rechecked_after_retry_wakeup() -> None:
    h = owned_harness()
    h.script("process", 1, "abort")
    h.clock.on_wait = lambda s: h.lifecycle.stop()
    with pytest.raises(Canceled):
        h.lifecycle.process(0, source()[0])
    assert h.calls() == [("process", "abort", False, "unavailable")]  # no second call
    assert h.waits == [0.1]
    assert h.lifecycle.stopped


def test_unresolved_recovery_read_retires() -> None:
    h = owned_harness()
    h.script("process", 1, "unknown-committed")
    for n in (1, 2, 3):
        h.script("observe", n, "abort")
    with pytest.raises(UnresolvedRead):
        h.lifecycle.process(0, source()[0])
    assert h.calls() == [
        ("process", "unknown-committed", True, "unknown"),
        ("observe", "abort", False, "unavailable"),
        ("observe", "abort", False, "unavailable"),
        ("observe", "abort", False, "unavailable"),
    ]
    assert h.waits == [0.1, 0.2]
    assert h.lifecycle.retired is not None and h.lifecycle.owned() == {}
    with pytest.raises(LifetimeRetired):
        h.lifecycle.process(0, source()[1])


def test_recovery_read_canceled_is_unresolved() -> None:
    h = owned_harness()
    h.script("process", 1, "unknown-committed")
    h.hook.on_boundary(Operation.OBSERVE, 1, At.BEFORE, lambda ctx: h.lifecycle.stop())
    with pytest.raises(UnresolvedRead):
        h.lifecycle.process(0, source()[0])
    assert h.calls()[-1] == ("observe", OK, False, "canceled")


def test_process_without_ownership_is_fenced_without_io() -> None:
    h = Harness(source())
    with pytest.raises(Fenced):
        h.lifecycle.process(0, source()[0])
    assert h.calls() == []


def test_record_behind_local_frontier_is_rejected_without_io() -> None:
    h = owned_harness()
    h.lifecycle.process(0, source()[0])
    h.clear()
    with pytest.raises(InvalidInput, match="behind the local frontier"):
        h.lifecycle.process(0, source()[0])  # already processed
    assert h.calls() == []
    assert h.lifecycle.retired is not None


# -- revoke and stop ------------------------------------------------------------------


def test_revoke_clears_whole_eager_assignment_and_lifecycle_is_reusable() -> None:
    h = Harness(source(), partitions=(0, 1))
    h.lifecycle.assign([0, 1])
    h.lifecycle.revoke()
    assert h.lifecycle.owned() == {}
    assert h.lifecycle.live
    assert h.lifecycle.assign([1]) == {1: Token(2, 0)}


def test_stopped_lifecycle_makes_no_io() -> None:
    h = owned_harness()
    h.lifecycle.stop()
    h.lifecycle.revoke()
    for call in (
        lambda: h.lifecycle.assign([0]),
        lambda: h.lifecycle.seek(0),
        lambda: h.lifecycle.process(0, source()[0]),
    ):
        with pytest.raises(LifetimeRetired):
            call()
    assert h.calls() == []
    assert h.lifecycle.owned() == {}


def test_retired_lifecycle_never_resumes() -> None:
    h = owned_harness()
    h.new_lifecycle("w1").assign([0])
    with pytest.raises(Fenced):
        h.lifecycle.process(0, source()[0])
    h.clear()
    with pytest.raises(LifetimeRetired):
        h.lifecycle.assign([0])
    assert h.calls() == []


# -- budget ---------------------------------------------------------------------------


def test_budget_counts_logical_retry_waits() -> None:
    h = Harness(source(), budget=0.25)
    h.lifecycle.assign([0])
    h.lifecycle.seek(0)
    for n in (1, 2, 3):
        h.script("process", n, "abort")
    with pytest.raises(DeadlineExceeded):
        h.lifecycle.process(0, source()[0])
    # 100 ms + 200 ms > 250 ms: the third call is never made
    assert [c[0] for c in h.calls()].count("process") == 2


def test_delay_advances_logical_time() -> None:
    h = owned_harness()
    h.script("process", 1, "commit", delay_ms=40)
    h.lifecycle.process(0, source()[0])
    assert h.clock.ms == 40
