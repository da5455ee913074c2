"""The group's worker-failure path and its assignment schedule, as rules of
:class:`~remora.testing.group_machine.GroupRunMachine` (a mixin).

:meth:`GroupFailureChecks.group_with_failure` runs a threaded
:class:`~remora.worker.group.WorkerGroup` over the machine's files in which one thing goes
wrong, planted in the members' lifetimes (a :class:`~remora.worker.Lifecycle` subclass):

* ``process-error`` / ``process-bug`` — processing one chosen record raises a
  :class:`~remora.errors.RemoraError` (a store that cannot take it) or a plain exception (a
  bug in a handler) *before* the store write; ``after-write`` raises once the write
  committed; ``fenced`` raises :class:`~remora.errors.Fenced` (another worker took the
  partition over);
* ``assign-error`` — claiming the chosen partition raises;
* ``revoke-error`` / ``revoke-bug`` — a lifetime's first revoke raises: an error that names
  no partition.

and checks the group's observable result against what the module docstring of
:mod:`remora.worker.group` promises, computed from the source alone: a partition error
stops only that partition (one :class:`~remora.worker.group.PartitionFailure` naming
partition and offset — or, for ``fenced``, one *lost* partition — reported to
``on_failure`` too), every other partition reaches the source's end, the struck partition's
frontier is exactly the record it stopped at (one past it for ``after-write``), the group is
``done`` without error and the records processed are exactly the others; an error naming no
partition ends the whole group with exactly that error.  In every run the store passes the
oracle and no lifetime ends holding anything.

Every run also records each lifetime's assignments (member, generation, partitions) and
checks the schedule: no lifetime claims a partition another one still holds (the revoke
barrier); within a generation no partition has two owners; a lifetime's
generations strictly increase; every share is the documented rotation (partition ``i`` of
the sorted partitions goes to the ``(i + generation - 1) mod n``-th live member) minus the
partitions that left the run; no rebalance without ``rebalance_every``, never more than
``processed // rebalance_every``; and with one worker and no failure the number of
rebalances is exactly what the poll sizes give (each poll takes ``min(batch, left)``
records, a rebalance starts once ``rebalance_every`` were taken since the last one).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from remora.domain import SourceRecord
from remora.errors import Fenced, RemoraError, SourceError, StoreError
from remora.source.files import open_source_dir
from remora.store.base import Token
from remora.testing.strategies import record_drafts
from remora.worker import Lifecycle
from remora.worker.group import (
    Coordinator,
    GroupClient,
    GroupProgress,
    PartitionFailure,
    WorkerGroup,
)

FAILURE_MODES = (
    "none",
    "process-error",
    "process-bug",
    "after-write",
    "fenced",
    "assign-error",
    "revoke-error",
    "revoke-bug",
)


class _Plan:
    """What goes wrong in one group run, and what the members' lifetimes did (shared by
    every lifetime of the run; thread-safe)."""

    def __init__(self, mode: str, partition: int, offset: int | None) -> None:
        self.mode = mode
        self.partition = partition
        self.offset = offset
        self.lock = threading.Lock()
        self.fired: BaseException | None = None
        self.group: WorkerGroup | None = None
        self.assignments: list[tuple[int, int, int, tuple[int, ...]]] = []  # (lifetime, ...)
        self.lifetimes: list[Lifecycle] = []
        self.overlaps: list[str] = []  # a claim of a partition another lifetime still held

    def fire(self, make: type[BaseException] | None = None) -> None:
        with self.lock:
            if self.fired is not None:
                return
            if make is None:
                make = {
                    "process-error": StoreError,
                    "after-write": StoreError,
                    "assign-error": StoreError,
                    "fenced": Fenced,
                    "revoke-error": SourceError,
                }.get(self.mode, RuntimeError)
            self.fired = make(f"planted {self.mode}")
        raise self.fired


class _Member(Lifecycle):
    """A group member's lifetime that records its assignments and fails as planned."""

    plan: _Plan
    member: int
    serial: int

    def assign(self, partitions: Iterable[int]) -> dict[int, Token]:
        wanted = tuple(partitions)
        plan = self.plan
        assert plan.group is not None
        client = plan.group.runners[self.member].client
        assert isinstance(client, GroupClient)
        with plan.lock:
            plan.assignments.append((self.serial, self.member, client.generation, wanted))
            for other in plan.lifetimes:  # the barrier: the old owner revoked first
                held = set(other.owned()) & set(wanted)
                if other is not self and held:
                    plan.overlaps.append(f"{self.name} claimed {sorted(held)} held by {other.name}")
        if plan.mode == "assign-error" and plan.partition in wanted:
            plan.fire()
        return super().assign(wanted)

    def process(self, partition: int, record: SourceRecord) -> Token:
        plan = self.plan
        struck = (partition, record.offset) == (plan.partition, plan.offset)
        if struck and plan.mode in ("process-error", "process-bug", "fenced"):
            plan.fire()
        done = super().process(partition, record)
        if struck and plan.mode == "after-write":
            plan.fire()
        return done

    def revoke(self) -> None:
        super().revoke()
        if self.plan.mode in ("revoke-error", "revoke-bug"):
            self.plan.fire()


def rotation(partitions: list[int], members: int, generation: int, member: int) -> set[int]:
    """The documented share of ``member`` (of ``members`` live ones) in ``generation``."""
    return {p for i, p in enumerate(sorted(partitions)) if (i + generation - 1) % members == member}


def one_worker_rebalances(left: int, batch: int, every: int) -> int:
    """Rebalances of a healthy one-worker group that polls ``left`` records (docstring)."""
    rebalances = since = 0
    while left > 0:
        took = min(batch, left)
        left -= took
        since += took
        if every and since >= every:
            rebalances += 1
            since = 0
    return rebalances


class GroupFailureChecks:
    """Mixin: list it before :class:`~remora.testing.group_machine.GroupRunMachine`."""

    @rule(
        mode=st.sampled_from(("none", "none", *FAILURE_MODES)),
        partition=st.integers(0, 7),
        nth=st.integers(0, 4),
        workers=st.sampled_from((1, 1, 2, 3)),
        rebalance_every=st.integers(0, 4),
        batch=st.integers(1, 6),
        fresh=st.lists(record_drafts("conflict"), min_size=1, max_size=4),
    )
    def group_with_failure(
        self,
        mode: str,
        partition: int,
        nth: int,
        workers: int,
        rebalance_every: int,
        batch: int,
        fresh: list[tuple[int, int, int]],
    ) -> None:
        machine: Any = self
        store = machine.store
        p = partition % machine.partitions
        frontier_p = store.backend.partition_row(p).frontier
        if not any(
            r.visible and r.offset >= frontier_p for r in machine.source if r.partition == p
        ):
            machine.append(p, fresh, 0, [])  # something left to strike
        start = {q: store.backend.partition_row(q).frontier for q in range(machine.partitions)}
        left = {
            q: sorted(
                (
                    r
                    for r in machine.source
                    if r.partition == q and r.visible and r.offset >= start[q]
                ),
                key=lambda r: r.offset,
            )
            for q in range(machine.partitions)
        }
        target = left[p][nth % len(left[p])] if left[p] else None
        plan = _Plan(mode, p, None if target is None else target.offset)
        reported: list[PartitionFailure] = []

        with open_source_dir(machine.dir) as log:

            def make(i: int) -> Lifecycle:
                lifetime = _Member(store, log, name=f"worker-{i}")
                lifetime.plan, lifetime.member = plan, i
                with plan.lock:
                    lifetime.serial = len(plan.lifetimes)
                    plan.lifetimes.append(lifetime)
                return lifetime

            group = WorkerGroup(
                store,
                log,
                workers,
                rebalance_every=rebalance_every,
                batch=batch,
                lifecycle=make,
                on_failure=reported.append,
            )
            plan.group = group
            reports: list[GroupProgress] = []
            stats = group.run(reports.append, interval=0.01)
            try:
                WorkerGroup(store, log, 0)
            except ValueError as exc:
                assert "at least one worker" in str(exc), exc
            else:
                raise AssertionError("a group of no workers was made")
            # a client nobody subscribed to is never positioned: it polls nothing and ends
            lone = GroupClient(Coordinator(log.partitions, 1, 0), 0, log)
            assert lone.poll(batch) == [] and lone.coordinator.done
            lone.close()

        machine._check_store()
        assert plan.overlaps == [], plan.overlaps
        # progress (reported while a member thread is still alive): never going back,
        # never past the result
        for earlier, later in itertools.pairwise(reports):
            assert earlier.processed <= later.processed, reports
            assert earlier.generation <= later.generation, reports
        for report in reports:
            assert report.processed <= stats.processed, (report, stats)
            assert report.rebalances <= stats.rebalances, (report, stats)
            assert report.generation <= stats.generations, (report, stats)
        for lifetime in plan.lifetimes:
            assert lifetime.owned() == {}, f"{lifetime.name} ended holding {lifetime.owned()}"
        end = {q: machine.checker.oracle.end_frontier(q) for q in range(machine.partitions)}
        frontier = {q: store.backend.partition_row(q).frontier for q in range(machine.partitions)}
        fired = plan.fired
        assert not stats.stopped, "nobody stopped the group"

        if fired is not None and mode in ("revoke-error", "revoke-bug"):
            assert stats.failures == [] and stats.lost == [] and reported == [], stats
            assert len(stats.errors) == 1, f"one error that names no partition: {stats.errors}"
            error = stats.errors[0]
            if isinstance(fired, RemoraError):
                assert error is fired, (error, fired)
            else:
                assert type(error) is RemoraError and "RuntimeError('planted" in str(error), error
            self._check_schedule(plan, stats, workers, rebalance_every, set(), healthy=False)
            return

        assert stats.errors == [], f"a partition's failure stopped the group: {stats.errors}"
        assert stats.done, "the group did not finish its other partitions"
        failed: set[int] = set()
        if fired is None:
            assert stats.failures == [] and stats.lost == [] and reported == [], stats
            assert mode == "none" or mode.startswith("revoke") or target is None, (
                f"{mode} at partition {p} offset {plan.offset} never struck"
            )
        else:
            failed = {p}
            at = None if mode == "assign-error" else plan.offset
            if mode == "fenced":
                assert stats.failures == [], stats.failures
                assert len(stats.lost) == 1, stats.lost
                failure = stats.lost[0]
                assert failure.lost and "taken over by another worker" in failure.describe()
            else:
                assert stats.lost == [], stats.lost
                assert len(stats.failures) == 1, stats.failures
                failure = stats.failures[0]
                assert not failure.lost
                where = "while assigning" if at is None else f"at offset {at}"
                assert f"partition {p} stopped {where}: " in failure.describe(), failure.describe()
            assert (failure.partition, failure.offset) == (p, at), (failure, p, at)
            if isinstance(fired, RemoraError):
                assert failure.error is fired, (failure.error, fired)
            else:
                assert type(failure.error) is RemoraError, failure.error
                assert "RuntimeError('planted" in str(failure.error), failure.error
            assert reported == [failure], (reported, failure)
            if mode == "assign-error":
                want = start[p]
            else:
                assert target is not None
                before = [r.offset for r in left[p] if r.offset < target.offset]
                want = (
                    target.offset + 1
                    if mode == "after-write"
                    else (before[-1] + 1 if before else start[p])
                )
            assert frontier[p] == want, (
                f"{mode}: partition {p} frontier {frontier[p]}, the failure leaves it at {want}"
            )
        for q in range(machine.partitions):
            if q not in failed:
                assert frontier[q] == end[q], f"partition {q}: frontier {frontier[q]}, end {end[q]}"
        skipped = 0
        if failed:
            skipped = (
                len(left[p])
                if mode == "assign-error"
                else sum(1 for r in left[p] if r.offset >= (plan.offset or 0))
            )
        total = sum(len(rs) for rs in left.values())
        assert stats.processed == total - skipped, (stats.processed, total, skipped)
        self._check_schedule(plan, stats, workers, rebalance_every, failed, healthy=not failed)
        if workers == 1 and not failed:
            want = one_worker_rebalances(total, batch, rebalance_every)
            assert stats.rebalances == want, (
                f"one worker, {total} records, batch {batch}, rebalance every "
                f"{rebalance_every}: {stats.rebalances} rebalances, the polls give {want}"
            )

    def _check_schedule(
        self,
        plan: _Plan,
        stats: Any,
        workers: int,
        every: int,
        excluded: set[int],
        *,
        healthy: bool,
    ) -> None:
        partitions = list(range(self.partitions))  # type: ignore[attr-defined]
        assert stats.generations == stats.rebalances + 1, stats
        if every == 0:
            assert stats.rebalances == 0, stats
        elif healthy:
            assert stats.rebalances * every <= stats.processed, (
                f"{stats.rebalances} rebalances every {every} records, {stats.processed} processed"
            )
        owners: dict[tuple[int, int], int] = {}
        last: dict[int, int] = {}
        held: dict[tuple[int, int], set[int]] = {}  # (lifetime, generation) -> partitions
        union: dict[tuple[int, int], set[int]] = {}  # (member, generation) -> partitions
        for serial, member, generation, parts in plan.assignments:
            assert 1 <= generation <= stats.generations, (generation, stats.generations)
            assert generation >= last.get(serial, 0), (
                f"lifetime {serial} (member {member}) assigned in generation {generation} "
                f"after {last.get(serial)}"
            )
            last[serial] = generation
            mine = held.setdefault((serial, generation), set())
            for q in parts:
                assert q not in mine, f"lifetime {serial} assigned {q} twice in {generation}"
                mine.add(q)
                other = owners.setdefault((generation, q), member)
                assert other == member, (
                    f"partition {q} assigned to members {other} and {member} in generation "
                    f"{generation}"
                )
            union.setdefault((member, generation), set()).update(parts)
            share = rotation(partitions, workers, generation, member)
            assert set(parts) <= share, (
                f"member {member} of {workers} in generation {generation}: assigned "
                f"{sorted(parts)}, its share is {sorted(share)}"
            )
        if workers == 1 and (healthy or excluded):
            for generation in range(1, stats.generations + 1):
                want = set(partitions) - excluded
                got = union.get((0, generation), set())
                assert want <= got, (
                    f"the only member got {sorted(got)} in generation {generation}, not "
                    f"every partition left in the run ({sorted(want)})"
                )
