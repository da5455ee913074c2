"""Shared test helpers: fixture loading and a controlled-I/O lifecycle harness."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remora.clock import LogicalClock
from remora.domain import SourceRecord
from remora.faults import FaultDecision, Operation, Outcome
from remora.source import MemorySourceLog, parse_source_line
from remora.store import MemoryStore, StateStore
from remora.testing.faults import ScriptedFaults
from remora.worker import Lifecycle

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def load_fixture(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def fixture_records(doc: dict[str, Any]) -> list[SourceRecord]:
    partition = int(doc["partition"])
    return [
        parse_source_line(partition, json.dumps(line), f"{doc['name']}[{i}]")
        for i, line in enumerate(doc["records"])
    ]


def records(partition: int, *values: dict[str, Any] | str, start: int = 0) -> list[SourceRecord]:
    """Visible records at consecutive offsets from ``start``."""
    out = []
    for i, value in enumerate(values):
        raw = value if isinstance(value, str) else json.dumps(value)
        out.append(SourceRecord(partition, start + i, True, None, raw.encode()))
    return out


def amendment(subject: str, op: str, revision: int, **body: Any) -> dict[str, Any]:
    return {"subject": subject, "op": op, "revision": revision, "body": body}


def decision(outcome: str, delay_ms: int = 0) -> FaultDecision:
    return FaultDecision(Outcome(outcome), delay_ms, selected=True)


class RecordingClock(LogicalClock):
    """A logical clock that records every wait through it (in seconds) and then calls
    ``on_wait``, if set."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.on_wait: Callable[[float], None] | None = None

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        full = super().sleep(seconds, wake)
        self.waits.append(seconds)
        if self.on_wait is not None:
            self.on_wait(seconds)
        return full


class Harness:
    """A lifecycle over a memory store and source that share one scripted fault hook, and a
    logical clock that records every wait."""

    def __init__(
        self,
        source: list[SourceRecord] | None = None,
        partitions: tuple[int, ...] = (0,),
        store: StateStore | None = None,
        budget: float = 20.0,
    ) -> None:
        self.clock = RecordingClock()
        self.hook = ScriptedFaults(clock=self.clock)
        self.store = store if store is not None else MemoryStore()
        self.store.hook = self.hook
        self.log = MemorySourceLog(source or [], partitions, hook=self.hook)
        self.waits = self.clock.waits
        self.budget = budget
        self.lifecycle = self.new_lifecycle("w0")

    def new_lifecycle(self, name: str) -> Lifecycle:
        return Lifecycle(self.store, self.log, clock=self.clock, budget=self.budget, name=name)

    def script(self, operation: str, n: int, outcome: str, delay_ms: int = 0) -> None:
        self.hook.script[(Operation(operation), n)] = decision(outcome, delay_ms)

    def calls(self) -> list[tuple[str, str, bool | None, str]]:
        """(operation, requested outcome, effect applied, observation) per call so far."""
        return [(op, outcome, applied, obs) for op, _n, outcome, applied, obs in self.hook.log]

    def clear(self) -> None:
        self.hook.log.clear()
        self.hook.reset()
        self.waits.clear()
