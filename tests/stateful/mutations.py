"""The named guard-mutation catalogue.

Each mutation breaks one guard of the lifecycle (or the store's fence) in a test-only way —
a subclass used as the machines' lifecycle factory, or a monkeypatch — never through a
production flag.  The stateful suite must kill every one under the ``ci`` profile.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

import remora.store.memory
from remora.worker import Lifecycle
from tests.common import planted


@attrs.frozen
class Mutation:
    name: str
    guard: str
    lifecycle: type[Lifecycle] = Lifecycle
    patch: Callable[[pytest.MonkeyPatch], None] | None = None


def _skip_fence(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(remora.store.memory, "check_fence", lambda *args: None)


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "skip-fence-check",
        "process checks epoch and frontier inside the atomic write",
        patch=_skip_fence,
    ),
    Mutation(
        "frontier-before-resolution",
        "an unknown commit is resolved before the local frontier moves",
        planted.FrontierBeforeResolution,
    ),
    Mutation(
        "retry-unknown-without-reobserve",
        "after an unknown result, re-read before any retry",
        planted.RetriesUnknownBlindly,
    ),
    Mutation(
        "stopped-lifetime-seeks",
        "a stopped or retired lifetime rejects seek without I/O",
        planted.SeekIgnoresStop,
    ),
    Mutation(
        "skip-cancel-check-after-wakeup",
        "cancellation is checked after a retry wakeup, before the next call",
        planted.SkipsCancelAfterWakeup,
    ),
    Mutation(
        "revoke-keeps-assignment",
        "revoke clears the whole eager assignment",
        planted.RevokeForgets,
    ),
    Mutation(
        "adopt-epoch-after-failed-claim",
        "after an unknown claim the read epoch is never adopted; claim afresh",
        planted.AdoptsReadEpoch,
    ),
    Mutation(
        "retire-keeps-tokens",
        "retirement clears every saved token before the mutex is released",
        planted.KeepsTokensOnRetire,
    ),
)
