"""The named guard mutations: planted bugs a newcomer (and the campaign) can run against.

Each mutation breaks one guard of the lifecycle (or the store's fence) — a
:class:`~remora.worker.Lifecycle` subclass used as the lifecycle factory, or a patch applied
only for the duration of a run — never through a production flag.  ``remora sim-worker
--mutation NAME`` runs a schedule against one; the stateful suite's campaign
(``tox -e campaign``) must kill every one under the ``ci`` profile.

A trace run against a mutation records its name (``config.mutation``), so replaying or
reducing it runs the same planted bug, never silently the real lifecycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any
from unittest import mock

import attrs

import remora.store.memory
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import InvalidInput, UnknownResult
from remora.store import Token
from remora.worker import Lifecycle

# -- the broken lifecycles ----------------------------------------------------------------


class KeepsTokensOnRetire(Lifecycle):
    """Retirement forgets to clear the saved tokens."""

    def _retire(self, error: Any) -> None:
        if self._retired is None:
            self._retired = error


class RevokeForgets(Lifecycle):
    """Revoke keeps the eager assignment."""

    def revoke(self) -> None:
        with self._mutex:
            pass


class AdoptsReadEpoch(Lifecycle):
    """After an unknown claim, adopts the epoch it reads instead of claiming afresh."""

    def _claim(self, ctx: Context, partition: int) -> Token:
        try:
            return self.store.claim(partition, ctx)
        except UnknownResult:
            return self._recovery_read(ctx, partition)


class FrontierBeforeResolution(Lifecycle):
    """Treats an unknown process result as done without re-reading."""

    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        try:
            return self.store.process(partition, saved, record, ctx)
        except UnknownResult:
            return Token(saved.epoch, record.offset + 1)


class RetriesUnknownBlindly(Lifecycle):
    """Retries the same record after an unknown result without re-reading."""

    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        for call in range(1, self.retry.max_calls + 1):
            self._before_call(ctx, call)
            try:
                return self.store.process(partition, saved, record, ctx)
            except UnknownResult:
                continue
        raise UnknownResult("gave up")


class SeekIgnoresStop(Lifecycle):
    """Admits seek callbacks on a stopped or retired lifetime."""

    def _admit(self, operation: str) -> None:
        if operation != "seek":
            super()._admit(operation)


class SkipsCancelAfterWakeup(Lifecycle):
    """Makes the retry call without re-checking cancellation after the wait."""

    def _before_call(self, ctx: Context, call: int) -> None:
        if call > 1:
            ctx.sleep(self.retry.wait_before(call))
        else:
            ctx.check()


def _skip_fence() -> AbstractContextManager[object]:
    """The memory store's atomic write no longer checks epoch and frontier."""
    return mock.patch.object(remora.store.memory, "check_fence", lambda *args: None)


# -- the catalogue ------------------------------------------------------------------------


@attrs.frozen
class Mutation:
    """One named planted bug: a lifecycle class and/or a patch active while it runs."""

    name: str
    guard: str
    lifecycle: type[Lifecycle] = Lifecycle
    patch: Callable[[], AbstractContextManager[object]] | None = None

    @contextmanager
    def applied(self) -> Iterator[type[Lifecycle]]:
        """Apply the patch (if any) for the block; yields the lifecycle class to run."""
        with self.patch() if self.patch is not None else nullcontext():
            yield self.lifecycle


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "skip-fence-check",
        "process checks epoch and frontier inside the atomic write",
        patch=_skip_fence,
    ),
    Mutation(
        "frontier-before-resolution",
        "an unknown commit is resolved before the local frontier moves",
        FrontierBeforeResolution,
    ),
    Mutation(
        "retry-unknown-without-reobserve",
        "after an unknown result, re-read before any retry",
        RetriesUnknownBlindly,
    ),
    Mutation(
        "stopped-lifetime-seeks",
        "a stopped or retired lifetime rejects seek without I/O",
        SeekIgnoresStop,
    ),
    Mutation(
        "skip-cancel-check-after-wakeup",
        "cancellation is checked after a retry wakeup, before the next call",
        SkipsCancelAfterWakeup,
    ),
    Mutation(
        "revoke-keeps-assignment",
        "revoke clears the whole eager assignment",
        RevokeForgets,
    ),
    Mutation(
        "adopt-epoch-after-failed-claim",
        "after an unknown claim the read epoch is never adopted; claim afresh",
        AdoptsReadEpoch,
    ),
    Mutation(
        "retire-keeps-tokens",
        "retirement clears every saved token before the mutex is released",
        KeepsTokensOnRetire,
    ),
)

NAMES = tuple(m.name for m in MUTATIONS)


def mutation(name: str) -> Mutation:
    """The mutation called ``name`` (:class:`~remora.errors.InvalidInput` if none is)."""
    for m in MUTATIONS:
        if m.name == name:
            return m
    raise InvalidInput(f"unknown mutation {name!r} (one of {', '.join(NAMES)})")


__all__ = [
    "KeepsTokensOnRetire",
    "RevokeForgets",
    "AdoptsReadEpoch",
    "FrontierBeforeResolution",
    "RetriesUnknownBlindly",
    "SeekIgnoresStop",
    "SkipsCancelAfterWakeup",
    "Mutation",
    "MUTATIONS",
    "NAMES",
    "mutation",
]
