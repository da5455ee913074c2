"""Adapting a source client's callbacks and polled records to a :class:`Lifecycle`.

A source client (a Kafka-style consumer) delivers assignment changes through callbacks
invoked *inside* ``poll`` and returns records from ``poll``.  :class:`Runner` maps them:

* ``on_assigned(partitions)`` → ``Lifecycle.assign`` then ``Lifecycle.seek`` per partition,
  and positions the client at each durable frontier;
* ``on_revoked(partitions)`` → ``Lifecycle.revoke`` (eager: the whole assignment);
* every polled record → ``Lifecycle.process``.

The client is shut down by :meth:`Runner.run` after its loop ends — never from inside a
callback — and :meth:`Runner.stop` only stops the lifecycle and asks the loop to end, so it
is safe to call from a signal handler or another thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from remora.domain import SourceRecord
from remora.errors import RemoraError
from remora.source.files import PartitionSourceError
from remora.worker.lifecycle import Lifecycle

AssignCallback = Callable[[Sequence[int]], None]


class SourceClient(Protocol):
    def subscribe(self, on_assigned: AssignCallback, on_revoked: AssignCallback) -> None: ...

    def seek(self, partition: int, offset: int) -> None: ...

    def poll(self, max_records: int) -> list[SourceRecord]:
        """Records to process; may invoke the subscription callbacks first."""
        ...

    def close(self) -> None: ...


@attrs.define
class RunStats:
    processed: int = 0
    polls: int = 0
    error: RemoraError | None = None
    # Where ``error`` struck: the partition being assigned, sought or processed, and the
    # record's offset when processing (None: during assign/seek, or not attributable).
    failed_partition: int | None = None
    failed_offset: int | None = None


class Runner:
    def __init__(self, lifecycle: Lifecycle, client: SourceClient) -> None:
        self.lifecycle = lifecycle
        self.client = client
        self._stop = threading.Event()
        self.stats = RunStats()
        self._at: tuple[int, int | None] | None = None  # what is being done, for errors

    def _on_assigned(self, partitions: Sequence[int]) -> None:
        # One partition at a time (the same claims, in the same order), so that a failure
        # names the partition it struck.
        for partition in partitions:
            self._at = (partition, None)
            self.lifecycle.assign([partition])
        for partition in partitions:
            self._at = (partition, None)
            self.client.seek(partition, self.lifecycle.seek(partition))
        self._at = None

    def _on_revoked(self, partitions: Sequence[int]) -> None:
        self.lifecycle.revoke()

    def stop(self) -> None:
        """Stop the lifetime and end the loop (callable from any thread)."""
        self._stop.set()
        self.lifecycle.stop()

    def run(
        self,
        *,
        until_idle: bool = True,
        max_records: int = 256,
        progress: Callable[[RunStats], None] | None = None,
        close: bool = True,
    ) -> RunStats:
        """Poll and process until stopped (or, with ``until_idle``, until a poll is empty).

        A lifecycle error ends the loop and is returned in :attr:`RunStats.error`, with the
        partition (and offset) it struck.  ``close=False`` leaves the client open, for a
        fresh lifetime to go on with it (:class:`~remora.worker.group.WorkerGroup`)."""
        self.client.subscribe(self._on_assigned, self._on_revoked)
        try:
            while not self._stop.is_set():
                records = self.client.poll(max_records)
                self.stats.polls += 1
                for record in records:
                    if self._stop.is_set():
                        break
                    self._at = (record.partition, record.offset)
                    self.lifecycle.process(record.partition, record)
                    self._at = None
                    self.stats.processed += 1
                if progress is not None:
                    progress(self.stats)
                if not records and until_idle:
                    break
        except Exception as exc:
            # A record the store cannot take (or a bug) while assigning or processing one
            # partition is that partition's failure; anything else ends the run as before.
            if self._at is None and not isinstance(exc, RemoraError):
                raise
            self.stats.error = exc if isinstance(exc, RemoraError) else RemoraError(repr(exc))
            if self._at is not None:
                self.stats.failed_partition, self.stats.failed_offset = self._at
            elif isinstance(exc, PartitionSourceError):  # a line of one partition, while fetching
                self.stats.failed_partition, self.stats.failed_offset = exc.partition, exc.after
        finally:
            self.lifecycle.revoke()
            if close:
                self.client.close()  # outside any callback
        return self.stats


__all__ = [
    "AssignCallback",
    "SourceClient",
    "RunStats",
    "Runner",
]
