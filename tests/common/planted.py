"""Test-only broken variants of production code and the small traces that expose them.

Nothing here is reachable from production: each bug is a subclass or a monkeypatch applied
inside a test."""

from __future__ import annotations

import json
from typing import Any

from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import UnknownResult
from remora.faults import At, Operation, Outcome
from remora.sim.mutations import (  # the named mutations' lifecycles live in the package
    AdoptsReadEpoch,
    FrontierBeforeResolution,
    KeepsTokensOnRetire,
    RetriesUnknownBlindly,
    RevokeForgets,
    SeekIgnoresStop,
    SkipsCancelAfterWakeup,
)
from remora.sim.trace import FaultSelector, Interleave, SimConfig, Step, Toolchain, Trace
from remora.store import Token
from remora.worker import Lifecycle

__all__ = [
    "AdoptsReadEpoch",
    "Crashes",
    "FrontierBeforeResolution",
    "KeepsTokensOnRetire",
    "NeverAssignsTwice",
    "NeverRetires",
    "ProcessesNothing",
    "RetriesUnknownBlindly",
    "RevokeForgets",
    "SeekIgnoresStop",
    "SkipsCancelAfterWakeup",
]


def am(subject: str, op: str, rev: int, **body: Any) -> bytes:
    return json.dumps({"subject": subject, "op": op, "revision": rev, "body": body}).encode()


SOURCE = (
    SourceRecord(0, 0, True, None, am("s", "submit", 1, v=1)),
    SourceRecord(0, 1, True, None, am("s", "correct", 2, v=2)),
    SourceRecord(0, 2, True, None, am("t", "submit", 1, v=3)),
)
OWN = (Step("start", 0), Step("assign", 0, 0), Step("seek", 0, 0))


def sel(op: str, outcome: str, call: int = 1, **interleave: Any) -> FaultSelector:
    il = None
    if interleave:
        il = Interleave(
            At(interleave.pop("at")), interleave.get("stop", False), interleave.get("replacement")
        )
    return FaultSelector(Operation(op), call, Outcome(outcome), 0, il)


def trace(*steps: Step, drain: bool = True) -> Trace:
    return Trace(
        Toolchain("3.11.7", "0.1.0", None, "planted"),
        None,
        SimConfig(1, "custom", max(1, len(steps))),
        SOURCE,
        tuple(steps),
        drain,
    )


# -- broken lifecycles -----------------------------------------------------------------


class NeverRetires(Lifecycle):
    """A stopped lifetime still accepts callbacks and starts I/O (both guards dropped: the
    lifetime check and the cancellation check before a call)."""

    @property
    def live(self) -> bool:
        return True

    def _before_call(self, ctx: Context, call: int) -> None:
        if call > 1:
            ctx.sleep(self.retry.wait_before(call))


class ProcessesNothing(Lifecycle):
    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        return saved


class Crashes(Lifecycle):
    def _process(self, ctx: Context, partition: int, saved: Token, record: SourceRecord) -> Token:
        raise KeyError("planted")


class NeverAssignsTwice(Lifecycle):
    """Refuses every assignment after the first lifetime's (recovery cannot take over)."""

    assigned_once = False

    def _claim(self, ctx: Context, partition: int) -> Token:
        if NeverAssignsTwice.assigned_once and self.name != "lifetime 0":
            raise UnknownResult("planted: claims after the first lifetime never resolve")
        NeverAssignsTwice.assigned_once = True
        return super()._claim(ctx, partition)
