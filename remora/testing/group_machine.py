"""A Hypothesis state machine over the *running* worker: runner, group and file source.

:class:`~remora.testing.machines.WorkerScheduleMachine` drives the lifecycle step by step
through the scheduler; this one drives what ``remora run`` runs — a
:class:`~remora.worker.runner.Runner` over a :class:`~remora.worker.group.GroupClient`, a
threaded :class:`~remora.worker.group.WorkerGroup` with rebalancing, stopping midway — over a
source written as ``partition-<N>.jsonl`` files (every encoding the format allows) and read
back through :func:`~remora.source.open_source_dir`, against any store (``store_factory``:
memory by default, SQLite, PostgreSQL).

After every run it checks, independently of how the run went:

* the store against the oracle (:class:`~remora.sim.checker.Checker`), and nothing held by a
  lifetime whose run ended;
* a run that ended without error processed exactly the visible records between the durable
  frontiers it started from and the source's end, and left every frontier at the end;
* group statistics agree with themselves (``generations == rebalances + 1``, no rebalance
  when ``rebalance_every`` is 0, ``done`` unless stopped, no error in a healthy group);
* the files read back to exactly the records written, and a malformed line is rejected
  with its ``file:line``.

Teardown runs one more fault-free group to the end and requires the finished run
(:meth:`~remora.sim.checker.Checker.final_problems`): frontiers at the end, the view
delivered from the outbox equal to the oracle's.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from remora.clock import LogicalClock
from remora.domain import SourceRecord
from remora.errors import InvalidInput
from remora.faults import NO_FAULTS, FaultDecision, Operation, Outcome
from remora.sim.checker import Checker
from remora.sim.scheduler import StoreFactory
from remora.sim.trace import SimConfig
from remora.source.files import load_source_dir, open_source_dir
from remora.store import MemoryStore, StateStore
from remora.testing.faults import ScriptedFaults
from remora.testing.strategies import build_partition, record_drafts, source_histories
from remora.worker import Lifecycle
from remora.worker.group import Coordinator, GroupClient, WorkerGroup
from remora.worker.runner import Runner

_CLAIM_PROCESS = (Operation.CLAIM, Operation.PROCESS)
_FAULTS = st.lists(
    st.tuples(
        st.sampled_from(
            [Operation.VALIDATE, Operation.CLAIM, Operation.OBSERVE, Operation.PROCESS]
        ),
        st.integers(1, 6),
        st.sampled_from(list(Outcome)),
    ),
    max_size=4,
    unique_by=lambda f: (f[0], f[1]),
).map(
    lambda fs: [f for f in fs if f[0] in _CLAIM_PROCESS or f[2] in (Outcome.COMMIT, Outcome.ABORT)]
)

_BAD_LINES = (
    "{not json",
    "[1, 2]",
    '{"visible": true, "value": "x"}',  # no offset
    '{"offset": -1, "value": "x"}',
    '{"offset": true, "value": "x"}',
    '{"offset": 99, "value": "x", "extra": 1}',
    '{"offset": 99, "partition": 77, "value": "x"}',
    '{"offset": 99, "visible": "yes", "value": "x"}',
    '{"offset": 99, "key": 5, "value": "x"}',
    '{"offset": 99}',
    '{"offset": 99, "value": "x", "value_base64": "eA=="}',
    '{"offset": 99, "value_base64": 5}',
    '{"offset": 99, "value_base64": "***"}',
    '{"offset": 0, "value": "x"}',  # not increasing (every file starts at offset >= 0)
)


class _Stopping(Lifecycle):
    """Stops its whole group once the group has processed ``after`` records."""

    group: ClassVar[WorkerGroup | None] = None
    after: ClassVar[int] = 0
    count: ClassVar[list[int]] = [0]

    def process(self, partition: int, record: SourceRecord) -> Any:
        done = super().process(partition, record)
        _Stopping.count[0] += 1
        if _Stopping.count[0] >= _Stopping.after and _Stopping.group is not None:
            _Stopping.group.stop()
        return done


class GroupRunMachine(RuleBasedStateMachine):
    """Runs the runner and the group over a file source (module docstring)."""

    partitions: ClassVar[int] = 2
    store_factory: ClassVar[StoreFactory | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="remora-machine-"))
        self.source: list[SourceRecord] = []
        self.lines: dict[int, list[str]] = {p: [] for p in range(self.partitions)}
        factory = type(self).store_factory
        config = SimConfig(self.partitions, "valid", 0)
        self.store: StateStore = factory(config) if factory is not None else MemoryStore()
        self.checker = Checker((), range(self.partitions))

    # -- the source files ------------------------------------------------------------------
    def _encode(self, record: SourceRecord, style: int) -> tuple[str, SourceRecord]:
        """One JSONL line for ``record`` in one of the format's encodings, and the record
        the reader must return for it."""
        doc: dict[str, Any] = {"offset": record.offset}
        if style & 1 or not record.visible:
            doc["visible"] = record.visible
        if record.key is not None or style & 2:
            doc["key"] = record.key
        if style & 4:
            doc["partition"] = record.partition
        value = record.value
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        parsed: Any = None
        if text is not None and style & 8:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
        if text is None or style & 16:
            doc["value_base64"] = base64.b64encode(value).decode()
        elif isinstance(parsed, dict):
            doc["value"] = parsed
            value = json.dumps(parsed, separators=(",", ":"), sort_keys=True).encode()
        else:
            doc["value"] = text
        line = json.dumps(doc) + ("\r\n" if style & 32 else "\n")
        if style & 64:
            line = "\n" + line  # a blank line before it
        read = SourceRecord(record.partition, record.offset, record.visible, record.key, value)
        return line, read

    def _write(self, records: list[SourceRecord], styles: list[int]) -> None:
        for record, style in zip(records, styles, strict=False):
            line, read = self._encode(record, style)
            self.lines[record.partition].append(line)
            self.source.append(read)
        for p, lines in self.lines.items():
            (self.dir / f"partition-{p}.jsonl").write_text("".join(lines), newline="")
        self.checker = Checker(self.source, range(self.partitions))
        loaded = load_source_dir(self.dir).all_records()
        assert loaded == sorted(self.source, key=lambda r: (r.partition, r.offset)), (
            "the files did not read back to the records written"
        )

    def _end(self, partition: int) -> int:
        offsets = [r.offset for r in self.source if r.partition == partition]
        return max(offsets) + 1 if offsets else 0

    @initialize(data=st.data())
    def setup(self, data: st.DataObject) -> None:
        trace_class = data.draw(st.sampled_from(["valid", "conflict"]), label="class")
        records = data.draw(source_histories(trace_class, self.partitions, 12, 2), label="source")
        styles = data.draw(st.lists(st.integers(0, 127), min_size=len(records)), label="styles")
        self._write(records, styles)

    @rule(
        partition=st.integers(0, 7),
        drafts=st.lists(record_drafts("conflict"), min_size=1, max_size=6),
        gap=st.integers(0, 3),
        styles=st.lists(st.integers(0, 127), max_size=6),
    )
    def append(
        self, partition: int, drafts: list[tuple[int, int, int]], gap: int, styles: list[int]
    ) -> None:
        """More records at the end of a partition file (after a gap in offsets)."""
        p = partition % self.partitions
        shift = self._end(p) + gap
        fresh = [
            SourceRecord(r.partition, r.offset + shift, r.visible, r.key, r.value)
            for r in build_partition(p, drafts)
        ]
        self._write(fresh, styles + [0] * len(fresh))

    @rule(partition=st.integers(0, 7), bad=st.sampled_from(_BAD_LINES), at=st.integers(0, 20))
    def malformed_line(self, partition: int, bad: str, at: int) -> None:
        """A copy of the source with one bad line is rejected, naming its file and line."""
        p = partition % self.partitions
        lines = list(self.lines[p])
        at = min(at, len(lines))
        if bad.startswith('{"offset": 0,') and at == 0:
            at = min(1, len(lines))
            if not lines:
                return
        lines.insert(at, bad + "\n")
        copy = Path(tempfile.mkdtemp(dir=self.dir.parent, prefix="remora-bad-"))
        try:
            for q, ls in self.lines.items():
                (copy / f"partition-{q}.jsonl").write_text(
                    "".join(lines if q == p else ls), newline=""
                )
            number = 1 + sum(line.count("\n") for line in lines[:at])
            for reader in (open_source_dir, load_source_dir):
                try:
                    reader(copy)
                except InvalidInput as exc:
                    where = f"partition-{p}.jsonl:{number}:"
                    assert where in str(exc), f"{bad!r} rejected as {exc}, not at {where}"
                else:
                    raise AssertionError(f"{bad!r} at line {number} was accepted")
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    # -- runs ------------------------------------------------------------------------------
    def _remaining(self) -> int:
        frontiers = {
            p: self.store.backend.partition_row(p).frontier for p in range(self.partitions)
        }
        return sum(1 for r in self.source if r.visible and r.offset >= frontiers[r.partition])

    def _check_store(self) -> None:
        found = self.checker.check_store(self.store.backend)
        assert not found, f"{found[0].kind}: {found[0].message}"

    def _at_end(self) -> None:
        for p in range(self.partitions):
            frontier = self.store.backend.partition_row(p).frontier
            end = self.checker.oracle.end_frontier(p)
            assert frontier == end, f"partition {p}: frontier {frontier}, the source ends at {end}"

    @rule(
        faults=_FAULTS,
        max_records=st.integers(1, 8),
        files=st.booleans(),
    )
    def run_runner(
        self, faults: list[tuple[Operation, int, Outcome]], max_records: int, files: bool
    ) -> None:
        """One runner, one lifetime, in this thread, with scripted store/source faults."""
        script = {(op, n): FaultDecision(outcome, 0, True) for op, n, outcome in faults}
        clock = LogicalClock()
        hook = ScriptedFaults(script, clock=clock)
        log = open_source_dir(self.dir, hook) if files else load_source_dir(self.dir)
        if not files:
            log.hook = hook
        self.store.hook = hook
        remaining = self._remaining()
        lifecycle = Lifecycle(self.store, log, clock=clock, name="runner")
        client = GroupClient(Coordinator(log.partitions, 1, 0), 0, log)
        try:
            stats = Runner(lifecycle, client).run(max_records=max_records)
        finally:
            self.store.hook = NO_FAULTS
            if files:
                log.close()  # type: ignore[union-attr]
        self._check_store()
        assert lifecycle.owned() == {}, f"the runner ended holding {lifecycle.owned()}"
        # a claim that fails inside the first poll (its assignment callback) ends the run
        # before any poll returned: polls counts returned polls
        assert stats.polls >= 1 or stats.error is not None
        if stats.error is None:
            assert stats.processed == remaining, (stats.processed, remaining)
            self._at_end()
        else:
            assert not lifecycle.live, "the runner's lifetime failed but stays live"

    @rule(workers=st.integers(1, 3), rebalance_every=st.integers(0, 5), batch=st.integers(1, 8))
    def run_group(self, workers: int, rebalance_every: int, batch: int) -> None:
        """A threaded group with eager rebalancing, fault-free: it must finish cleanly."""
        remaining = self._remaining()
        with open_source_dir(self.dir) as log:
            group = WorkerGroup(
                self.store, log, workers, rebalance_every=rebalance_every, batch=batch
            )
            stats = group.run(interval=0.01)
        self._check_store()
        assert stats.errors == [], f"a healthy group failed: {stats.errors}"
        assert stats.done and not stats.stopped
        assert stats.processed == remaining, (stats.processed, remaining)
        assert stats.generations == stats.rebalances + 1
        if rebalance_every == 0:
            assert stats.rebalances == 0
        elif stats.processed >= rebalance_every + batch * workers:
            assert stats.rebalances >= 1, "records enough for a rebalance, none happened"
        for runner in group.runners:
            assert runner.lifecycle.owned() == {}
        self._at_end()

    @rule(workers=st.integers(1, 3), after=st.integers(1, 6))
    def stop_group(self, workers: int, after: int) -> None:
        """A group stopped (as by a signal) after some records: safe, and resumable."""
        with open_source_dir(self.dir) as log:
            group = WorkerGroup(
                self.store,
                log,
                workers,
                rebalance_every=2,
                batch=2,
                lifecycle=lambda i: _Stopping(self.store, log, name=f"worker-{i}"),
            )
            _Stopping.group, _Stopping.after, _Stopping.count = group, after, [0]
            try:
                stats = group.run(interval=0.01)
            finally:
                _Stopping.group = None
        self._check_store()
        assert stats.errors == [], f"errors after stop(): {stats.errors}"
        assert stats.stopped != stats.done
        for runner in group.runners:
            assert runner.lifecycle.owned() == {}
            assert runner.lifecycle.stopped or stats.done

    def teardown(self) -> None:
        try:
            if self.source:
                self.run_group(1, 0, 32)
                problems = self.checker.final_problems(self.store.backend.snapshot())
                assert not problems, problems
        finally:
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)


__all__ = [
    "GroupRunMachine",
]
