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


class Runner:
    def __init__(self, lifecycle: Lifecycle, client: SourceClient) -> None:
        self.lifecycle = lifecycle
        self.client = client
        self._stop = threading.Event()
        self.stats = RunStats()

    def _on_assigned(self, partitions: Sequence[int]) -> None:
        self.lifecycle.assign(partitions)
        for partition in partitions:
            self.client.seek(partition, self.lifecycle.seek(partition))

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
    ) -> RunStats:
        """Poll and process until stopped (or, with ``until_idle``, until a poll is empty).

        A lifecycle error ends the loop and is returned in :attr:`RunStats.error`."""
        self.client.subscribe(self._on_assigned, self._on_revoked)
        try:
            while not self._stop.is_set():
                records = self.client.poll(max_records)
                self.stats.polls += 1
                for record in records:
                    if self._stop.is_set():
                        break
                    self.lifecycle.process(record.partition, record)
                    self.stats.processed += 1
                if progress is not None:
                    progress(self.stats)
                if not records and until_idle:
                    break
        except RemoraError as exc:
            self.stats.error = exc
        finally:
            self.lifecycle.revoke()
            self.client.close()  # outside any callback
        return self.stats
