"""Several worker lifetimes in threads, sharing a source through an in-process group.

:class:`WorkerGroup` plays a consumer group with *eager* rebalancing among ``workers``
members, each a :class:`~remora.worker.runner.Runner` over its own
:class:`~remora.worker.Lifecycle` and :class:`GroupClient`:

* every ``rebalance_every`` records (group-wide; 0 = never) a new *generation* starts: each
  member, at its next poll, revokes its whole assignment (``on_revoked`` →
  ``Lifecycle.revoke``), then waits until every live member has revoked (the barrier), and
  only then receives its share of the partitions (``on_assigned`` → ``assign`` + ``seek``).
  Shares rotate with the generation, so partitions keep moving between workers;
* a member whose partitions are exhausted waits for the next generation; when every live
  member is idle in the same generation, the source is done and the group ends;
* a lifecycle error retires that member's lifetime (the lifecycle's rule); the member goes
  on with a *fresh* lifetime and its other partitions, and the partition the error struck
  leaves the group's assignment for the rest of the run.  Two kinds:

  - :class:`~remora.errors.Fenced` — another worker (another process on the same store)
    installed a newer epoch: the partition is *lost*, a normal revoke, logged and not an
    error;
  - anything else — the partition *stopped* at the offset it was processing (a record the
    store cannot take, a store that stays unavailable — unless ``store_wide`` names its
    kind): recorded as a
    :class:`PartitionFailure` naming partition and offset, while every other partition
    keeps making progress.

  Only an error that names no partition stops the whole group — and an error of a kind in
  ``store_wide`` (default :class:`~remora.errors.StorageFailed`: a full disk, a read-only
  filesystem), which would strike every partition in turn.  The durable state is
  consistent whatever stopped, and a new run resumes from the durable frontiers.

The barrier is what makes ownership moves clean in the healthy path (the new owner claims
only after the old one revoked); correctness does not depend on it — the store's fence does
that — but without it a rebalance would retire the old owner as fenced.

:meth:`WorkerGroup.stop` may be called from a signal handler or any thread: it ends the
group and stops every lifetime, which cancels in-flight store I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import attrs

from remora.domain import SourceRecord
from remora.errors import Fenced, RemoraError, StorageFailed
from remora.source.cursor import FetchCursors
from remora.source.log import SourceLog
from remora.store.base import OwnershipStore
from remora.worker.lifecycle import Lifecycle
from remora.worker.runner import AssignCallback, Runner

DEFAULT_BATCH = 32


class Coordinator:
    """Group membership, generations and the revoke barrier (thread-safe)."""

    def __init__(self, partitions: Sequence[int], members: int, rebalance_every: int) -> None:
        self.partitions = sorted(partitions)
        self.rebalance_every = rebalance_every
        self._cond = threading.Condition()
        self._live = set(range(members))
        self.generation = 1
        self._joined: set[int] = set()  # members that revoked and joined this generation
        self._idle: set[int] = set()  # members idle in this generation
        self._since = 0
        self.rebalances = 0
        self.done = False  # every partition exhausted
        self.closed = False  # done, or stopped
        self.excluded: set[int] = set()  # partitions lost or stopped: no longer assigned

    def _assignment(self, member: int) -> list[int]:
        members = sorted(self._live)
        if member not in members:
            return []
        turn = self.generation - 1
        return [
            p
            for i, p in enumerate(self.partitions)
            if members[(i + turn) % len(members)] == member and p not in self.excluded
        ]

    def exclude(self, partition: int) -> None:
        """Take ``partition`` out of every later assignment (the others' shares do not
        move: it is filtered out, not removed from the rotation)."""
        with self._cond:
            self.excluded.add(partition)

    def join(self, member: int, generation: int) -> list[int] | None:
        """Wait until every live member revoked and joined ``generation``; returns this
        member's partitions (None when the group closed, or a newer generation began)."""
        with self._cond:
            if generation != self.generation:
                return None
            self._joined.add(member)
            self._cond.notify_all()
            while not self.closed and generation == self.generation:
                if self._live <= self._joined:
                    return self._assignment(member)
                self._cond.wait()
            return None

    def progress(self, records: int) -> None:
        with self._cond:
            self._since += records
            if self.rebalance_every and self._since >= self.rebalance_every:
                self._next_generation()
                self.rebalances += 1

    def _next_generation(self) -> None:
        self.generation += 1
        self._since = 0
        self._joined.clear()
        self._idle.clear()
        self._cond.notify_all()

    def idle(self, member: int, generation: int) -> None:
        """This member has nothing left in ``generation``: wait for the next generation, or
        end the group when every live member is idle."""
        with self._cond:
            if generation != self.generation or self.closed:
                return  # after close() (a stop, a group-wide error) the source is not done
            self._idle.add(member)
            if self._live <= self._idle:
                self.done = self.closed = True
                self._cond.notify_all()
                return
            while not self.closed and generation == self.generation:
                self._cond.wait()

    def leave(self, member: int) -> None:
        with self._cond:
            self._live.discard(member)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


class GroupClient:
    """A :class:`~remora.worker.runner.SourceClient` for one member of a group."""

    def __init__(self, coordinator: Coordinator, member: int, log: SourceLog) -> None:
        self.coordinator = coordinator
        self.member = member
        self.cursors = FetchCursors(log)
        self.generation = 0
        self.partitions: list[int] = []
        self._on_assigned: AssignCallback | None = None
        self._on_revoked: AssignCallback | None = None

    def subscribe(self, on_assigned: AssignCallback, on_revoked: AssignCallback) -> None:
        self._on_assigned, self._on_revoked = on_assigned, on_revoked

    def seek(self, partition: int, offset: int) -> None:
        self.cursors.seek(partition, offset)

    def _revoke(self) -> None:
        if self.partitions and self._on_revoked is not None:
            self._on_revoked(self.partitions)
        self.partitions = []
        self.cursors.clear()

    def poll(self, max_records: int) -> list[SourceRecord]:
        coordinator = self.coordinator
        while not coordinator.closed:
            generation = coordinator.generation
            if generation != self.generation:
                self._revoke()  # eager: the whole assignment, before the barrier
                parts = coordinator.join(self.member, generation)
                if parts is None:
                    continue  # closed, or yet another generation began
                self.generation = generation
                self.partitions = parts
                if parts and self._on_assigned is not None:
                    self._on_assigned(parts)  # assign + seek through the lifecycle
            out = self.cursors.fetch_round_robin(self.partitions, max_records)
            if out:
                coordinator.progress(len(out))
                return out
            coordinator.idle(self.member, generation)
        return []

    def restart(self) -> None:
        """Forget the assignment (its lifetime is gone): the next poll joins the current
        generation again and hands the member's share to a fresh lifetime."""
        self.generation = 0
        self.partitions = []
        self.cursors.clear()

    def close(self) -> None:
        self._revoke()
        self.coordinator.leave(self.member)


@attrs.frozen
class GroupProgress:
    processed: int
    rebalances: int
    generation: int


@attrs.frozen
class PartitionFailure:
    """A partition that stopped (or was lost) during a run, and where."""

    partition: int
    offset: int | None  # the record being processed (None: while assigning or seeking)
    error: RemoraError

    @property
    def lost(self) -> bool:
        """Taken over by another worker (a newer epoch): a revoke, not a failure."""
        return isinstance(self.error, Fenced)

    def describe(self) -> str:
        where = "while assigning" if self.offset is None else f"at offset {self.offset}"
        if self.lost:
            return f"partition {self.partition}: taken over by another worker ({self.error})"
        return (
            f"partition {self.partition} stopped {where}: {type(self.error).__name__}: {self.error}"
        )


@attrs.define
class GroupStats:
    processed: int = 0
    rebalances: int = 0
    generations: int = 0
    errors: list[RemoraError] = attrs.field(factory=list)  # errors that stopped the group
    stopped: bool = False  # stop() was called (e.g. a signal) before the source was done
    done: bool = False  # every partition was exhausted (or left the run)
    failures: list[PartitionFailure] = attrs.field(factory=list)  # stopped partitions
    lost: list[PartitionFailure] = attrs.field(factory=list)  # taken over by another worker


class WorkerGroup:
    """``workers`` lifetimes in threads over one store and source (module docstring)."""

    def __init__(
        self,
        store: OwnershipStore,
        log: SourceLog,
        workers: int = 1,
        *,
        rebalance_every: int = 0,
        batch: int = DEFAULT_BATCH,
        lifecycle: Callable[[int], Lifecycle] | None = None,
        partitions: Sequence[int] | None = None,
        on_failure: Callable[[PartitionFailure], None] | None = None,
        store_wide: tuple[type[RemoraError], ...] = (StorageFailed,),
    ) -> None:
        if workers < 1:
            raise ValueError("a group needs at least one worker")
        self.log = log
        self.batch = batch
        share = log.partitions if partitions is None else partitions
        self.coordinator = Coordinator(share, workers, rebalance_every)
        self._make = lifecycle or (lambda i: Lifecycle(store, log, name=f"worker-{i}"))
        self.runners = [
            Runner(self._make(i), GroupClient(self.coordinator, i, log)) for i in range(workers)
        ]
        self.on_failure = on_failure
        self.store_wide = store_wide
        self._lock = threading.Lock()
        self._halted = False
        self._interrupted = False
        self._errors: list[RemoraError] = []
        self._failures: list[PartitionFailure] = []
        self._earlier = 0  # records processed by lifetimes that were replaced

    def processed(self) -> int:
        return self._earlier + sum(r.stats.processed for r in self.runners)

    def stop(self) -> None:
        """End the group and stop every lifetime (safe from a signal handler)."""
        self._interrupted = True
        self._halt()

    def _halt(self) -> None:
        with self._lock:
            self._halted = True
        self.coordinator.close()
        for runner in self.runners:
            runner.stop()

    def _member(self, index: int) -> None:
        client = self.runners[index].client
        assert isinstance(client, GroupClient)
        try:
            while True:
                runner = self.runners[index]
                try:
                    stats = runner.run(until_idle=True, max_records=self.batch, close=False)
                    error, partition = stats.error, stats.failed_partition
                except Exception as exc:  # a bug must still end the group, and be reported
                    error = exc if isinstance(exc, RemoraError) else RemoraError(repr(exc))
                    partition = None
                if error is None:
                    return
                with self._lock:
                    # After stop() (or a group-wide failure), errors are its consequences.
                    if self._halted:
                        return
                    if isinstance(error, self.store_wide):
                        partition = None  # the store's (e.g. a full disk): every partition
                    if partition is not None:
                        failure = PartitionFailure(partition, stats.failed_offset, error)
                        self._failures.append(failure)
                        self.coordinator.exclude(partition)
                        # A fresh lifetime goes on with the member's other partitions.
                        self._earlier += runner.stats.processed
                        self.runners[index] = Runner(self._make(index), client)
                        client.restart()
                    else:
                        self._errors.append(error)
                if partition is None:
                    self._halt()
                    return
                if self.on_failure is not None:
                    self.on_failure(failure)
        finally:
            client.close()

    def run(
        self,
        progress: Callable[[GroupProgress], None] | None = None,
        interval: float = 0.2,
    ) -> GroupStats:
        """Run until the source is done, a member fails or :meth:`stop` is called.

        The calling thread only waits (in short slices, so signal handlers run promptly)
        and reports progress."""
        threads = [
            threading.Thread(target=self._member, args=(i,), name=f"remora-worker-{i}")
            for i in range(len(self.runners))
        ]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(interval)
                if progress is not None:
                    progress(
                        GroupProgress(
                            self.processed(),
                            self.coordinator.rebalances,
                            self.coordinator.generation,
                        )
                    )
        return GroupStats(
            processed=self.processed(),
            rebalances=self.coordinator.rebalances,
            generations=self.coordinator.generation,
            errors=list(self._errors),
            stopped=self._interrupted and not self.coordinator.done,
            done=self.coordinator.done,
            failures=[f for f in self._failures if not f.lost],
            lost=[f for f in self._failures if f.lost],
        )


__all__ = [
    "DEFAULT_BATCH",
    "Coordinator",
    "GroupClient",
    "GroupProgress",
    "PartitionFailure",
    "GroupStats",
    "WorkerGroup",
]
