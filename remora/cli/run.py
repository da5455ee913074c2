"""``remora run SOURCE_DIR``: process a file-backed source into the state store."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from remora.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    Progress,
    add_quiet,
    exit_codes,
    int_at_least,
    int_in,
    print_table,
)
from remora.cli.store_args import DEFAULT_DB, add_store_arguments, describe, open_store
from remora.clock import MonotonicClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import (
    DeadlineExceeded,
    RetriesExhausted,
    SourceError,
    StorageFailed,
    StoreError,
    Unavailable,
    UnresolvedRead,
)
from remora.limits import MAX_WORKERS
from remora.source import SourceLog, open_source_dir
from remora.store import PartitionSummary, StateStore, Token
from remora.worker.group import GroupProgress, PartitionFailure, WorkerGroup
from remora.worker.lifecycle import PRODUCTION_BUDGET, Lifecycle
from remora.worker.outage import DEFAULT_OUTAGE_BUDGET, OutageWatch, outage_policy
from remora.worker.source_identity import ACCEPT_FLAG, check_source, record_source

__all__ = ["DEFAULT_DB", "register", "run", "summarize"]

DEFAULT_REBALANCE_EVERY = 500


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"must be in 0..86400 seconds, got {text}")
    return value


#: The per-call retry within the outage budget (the rule the job worker follows too).
outage_retry = outage_policy


class _Watched:
    """The store as the workers see it (an :class:`OwnershipStore`): says once on stderr
    that it waits for an unavailable store (and once that it resumed: the rule of
    :class:`~remora.worker.outage.OutageWatch`), and remembers each partition's last token
    read or written, for the table when the store is gone."""

    def __init__(self, store: StateStore, where: str, budget: float, say: Callable[[str], None]):
        self.store = store
        self.where = where
        self.budget = budget
        self.watch = OutageWatch(budget, MonotonicClock(), say)
        self.tokens: dict[int, Token] = {}
        self._lock = threading.Lock()

    def _call(self, partition: int, call: Callable[[], Token]) -> Token:
        started = self.watch.now()
        try:
            token = call()
        except Unavailable as exc:
            self.watch.failed("the store", exc, self.where)
            raise
        with self._lock:
            self.tokens[partition] = token
        self.watch.answered("the store", started)
        return token

    def claim(self, partition: int, ctx: Context) -> Token:
        return self._call(partition, lambda: self.store.claim(partition, ctx))

    def observe(self, partition: int, ctx: Context) -> Token:
        return self._call(partition, lambda: self.store.observe(partition, ctx))

    def process(self, partition: int, token: Token, record: SourceRecord, ctx: Context) -> Token:
        return self._call(partition, lambda: self.store.process(partition, token, record, ctx))


_positive = int_at_least(1)
_non_negative = int_at_least(0)
_workers = int_in(1, MAX_WORKERS)


def member(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N): this process is member I of N sharing one store."""
    index, slash, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = -1
    if not slash or n < 1 or not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"expected I/N with 0 <= I < N, got {text!r}")
    return i, n


def share(partitions: tuple[int, ...], which: tuple[int, int] | None) -> tuple[int, ...]:
    """The partitions member I of N takes: those whose number is I modulo N."""
    if which is None:
        return partitions
    i, n = which
    return tuple(p for p in partitions if p % n == i)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="process a directory of partition-<N>.jsonl files into the state store",
        description="Process every visible record of SOURCE_DIR exactly once into the store "
        "(SQLite by default, PostgreSQL with --dsn), resuming from each partition's durable "
        "frontier.  Ctrl-C or SIGTERM stops safely; run again to resume.  Several processes "
        "share one store with --member I/N.",
        epilog=exit_codes(
            "every partition (of this member) complete",
            "interrupted, a partition stopped on an error (named with its offset), or the "
            "store unavailable (e.g. locked or unreachable)",
            "bad usage or a rejected source or database",
        ),
    )
    p.add_argument(
        "source_dir",
        metavar="SOURCE_DIR",
        help="directory of partition-<N>.jsonl files, one JSON record per line",
    )
    add_store_arguments(p)
    p.add_argument(
        "--member",
        type=member,
        metavar="I/N",
        help="run as member I of N processes sharing the store: take only the partitions "
        "whose number is I modulo N (e.g. 0/3, 1/3, 2/3); a killed member resumes when run "
        "again with the same I/N",
    )
    p.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="worker lifetimes in threads (default 1)",
    )
    p.add_argument(
        "--rebalance-every",
        type=_non_negative,
        default=DEFAULT_REBALANCE_EVERY,
        metavar="N",
        help="eager rebalance (revoke all, reassign rotated) every N records processed; "
        f"0 = never (default {DEFAULT_REBALANCE_EVERY})",
    )
    p.add_argument(
        "--outage-budget",
        type=_seconds,
        default=DEFAULT_OUTAGE_BUDGET,
        metavar="SECONDS",
        help="while the store is unavailable (PostgreSQL restarting, failing over or "
        "unreachable; an SQLite lock), retry with backoff for up to SECONDS, saying once "
        "that it waits, then resume; past it, stop with the table of what was committed "
        f"(default {DEFAULT_OUTAGE_BUDGET:g})",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        ACCEPT_FLAG,
        action="store_true",
        help="continue although SOURCE_DIR is not the source the store's frontiers were made "
        "from (records below those frontiers are then never processed); without it such a run "
        "is refused (exit 2)",
    )
    add_quiet(p)
    p.set_defaults(func=run)


HEADERS = ["partition", "epoch", "frontier", "outbox", "quarantine", "complete"]


def summarize(
    store: StateStore, log: SourceLog, partitions: tuple[int, ...] | None = None
) -> list[dict[str, Any]]:
    """Per-partition frontier, outbox and quarantine counts (counted by the store, not
    loaded), and whether the partition is complete (``partitions``: default all)."""
    counted = {s.partition: s for s in store.backend.partition_summaries()}
    rows = []
    for partition in log.partitions if partitions is None else partitions:
        s = counted.get(partition) or PartitionSummary(partition, 0, 0, 1, 0, 0)
        rows.append(
            {
                "partition": partition,
                "epoch": s.epoch,
                "frontier": s.frontier,
                "outbox": s.outbox,
                "quarantine": s.quarantine,
                "complete": _complete(log, partition, s.frontier),
            }
        )
    return rows


@contextmanager
def stop_on_signals(stop: Callable[[], None]) -> Iterator[list[int]]:
    """While active, SIGINT/SIGTERM call ``stop`` (once) instead of killing the process; a
    second signal gets the default behaviour.  Yields the list of signals received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received  # signal handlers can only be installed from the main thread
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) == 1:
            stop()
        else:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run(args: argparse.Namespace) -> int:
    with open_source_dir(args.source_dir) as log:  # validated whole, then streamed
        return _run(args, log)


def _run(args: argparse.Namespace, log: SourceLog) -> int:
    store = open_store(args)
    where = describe(args)
    mine = share(log.partitions, args.member)
    progress = Progress(quiet=args.quiet)
    started = time.monotonic()
    ends = {p: _end(log, p) for p in mine}
    failures: list[PartitionFailure] = []
    said = threading.Lock()

    def failed(failure: PartitionFailure) -> None:
        # Called from the worker threads: one whole line at a time (print() writes the text
        # and the newline separately, so two threads' lines could interleave).
        note = "" if failure.lost else "; the other partitions go on"
        with said:
            failures.append(failure)
            progress.done()
            sys.stderr.write(f"remora run: {failure.describe()}{note}\n")
            sys.stderr.flush()

    def say(line: str) -> None:
        with said:
            progress.done()
            sys.stderr.write(f"remora run: {line}\n")
            sys.stderr.flush()

    try:
        check_source(
            store,
            log,
            accept=args.accept_source_change,
            say=lambda line: print(f"remora run: {line}", file=sys.stderr),
            partitions=mine,
        )
    except BaseException:
        store.close()
        raise
    late: StoreError | None = None
    try:
        first = _frontiers(store, mine)
        rows_before = _committed(store)
        total = sum(max(ends[p] - first[p], 0) for p in mine)
        watched = _Watched(store, where, args.outage_budget, say)
        retry = outage_retry(args.outage_budget)
        group = WorkerGroup(
            store,
            log,
            args.workers,
            rebalance_every=args.rebalance_every,
            partitions=mine,
            on_failure=failed,
            lifecycle=lambda i: Lifecycle(
                watched,
                log,
                name=f"worker-{i}",
                retry=retry,
                budget=args.outage_budget + PRODUCTION_BUDGET,
            ),
            # A store that stays away, or whose storage fails, strikes every partition:
            # one line for the run, not one per partition.
            store_wide=(StorageFailed, RetriesExhausted, UnresolvedRead, DeadlineExceeded),
        )

        def show(p: GroupProgress) -> None:
            if not progress.due():
                return
            try:
                now = _frontiers(store, mine)
            except StoreError:  # the store is away: the workers retry; no progress line
                return
            done = sum(min(now[q], ends[q]) - first[q] for q in mine if now[q] > first[q])
            progress.update(
                f"run: {p.processed} records; source offsets",
                done=done,
                total=total,
            )

        with stop_on_signals(group.stop) as signals:
            stats = group.run(progress=show)
        progress.done()
        try:
            rows = summarize(store, log, mine)
        except StoreError:  # the store went away for good: what this run saw committed
            rows = _last_seen(watched, log, mine, first)
        # What this run committed, counted by the store: a record's commit that a stop
        # cut short of its reply is counted too (the workers' own count misses it).
        lost_now = {f.partition for f in stats.lost}
        processed = sum(
            r["outbox"] + r["quarantine"] - rows_before.get(r["partition"], 0)
            if isinstance(r["outbox"], int)
            else 0
            for r in rows
            if r["partition"] not in lost_now
        )
        if any(not isinstance(r["outbox"], int) for r in rows):
            processed = stats.processed  # the store cannot count: the workers' count
    finally:
        try:
            record_source(store, log, mine)  # however the run ended: what is processed, is
        except StoreError as exc:
            # Only the marks are not moved up (the next run checks the older ones, which
            # still hold); said below, unless the run already failed on the same store.
            late = exc
        finally:
            store.close()
    elapsed = time.monotonic() - started
    lost = {f.partition for f in stats.lost}
    if args.json:
        doc = {
            "processed": processed,
            "workers": args.workers,
            "member": None if args.member is None else "{}/{}".format(*args.member),
            "rebalances": stats.rebalances,
            "seconds": round(elapsed, 3),
            "interrupted": stats.stopped,
            "partitions": rows,
            "stopped": [_failure_json(f) for f in stats.failures],
            "lost": sorted(lost),
        }
        print(json.dumps(doc, indent=2))
    else:
        print(f"processed {processed} records into {where}")
        print_table(rows, HEADERS)
    if lost:
        print(
            f"remora run: partition(s) {', '.join(map(str, sorted(lost)))} taken over by "
            "another worker: a revoke, left to it (not counted here)",
            file=sys.stderr,
        )
    if stats.stopped:
        name = signal.Signals(signals[0]).name if signals else "stop"
        print(
            f"remora run: interrupted ({name}); the durable state is consistent, "
            "run again to resume",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if stats.errors:
        error = stats.errors[0]
        print(f"remora run: {_error_line(error, args.outage_budget)}", file=sys.stderr)
        return EXIT_FAILED
    if late is not None and not stats.failures:
        print(f"remora run: {_error_line(late)}", file=sys.stderr)
        return EXIT_FAILED
    if stats.failures:
        stopped = ", ".join(
            f"partition {f.partition} at "
            + ("assign" if f.offset is None else f"offset {f.offset}")
            for f in stats.failures
        )
        print(
            f"remora run: stopped: {stopped} (the others were processed; fix the cause and "
            "run again to resume)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return (
        EXIT_OK if all(r["complete"] for r in rows if r["partition"] not in lost) else EXIT_FAILED
    )


def _last_seen(
    watched: _Watched, log: SourceLog, mine: tuple[int, ...], first: dict[int, int]
) -> list[dict[str, Any]]:
    """The table when the store cannot be read: each partition's last token this run read
    or wrote (its frontier is durable); the counts are unknown (``?``)."""
    rows = []
    for partition in mine:
        token = watched.tokens.get(partition)
        frontier = first[partition] if token is None else token.frontier
        rows.append(
            {
                "partition": partition,
                "epoch": "?" if token is None else token.epoch,
                "frontier": frontier,
                "outbox": "?",
                "quarantine": "?",
                "complete": _complete(log, partition, frontier),
            }
        )
    return rows


def _error_line(error: BaseException, budget: float | None = None) -> str:
    """A store's storage failure is its own message (the file and the cause, e.g. ``no
    space left on device``) and what to do; a store that stayed away past the outage
    budget says so; any other error is named by its type."""
    outage = (RetriesExhausted, UnresolvedRead, DeadlineExceeded)
    if isinstance(error, outage) and budget is not None:
        return (
            f"the store stayed unavailable past the outage budget ({budget:g} s, "
            f"--outage-budget): {error}; the table shows what was committed: run again to "
            "resume"
        )
    if isinstance(error, StorageFailed):
        return f"{error}; the table shows what was committed: fix the cause and run again to resume"
    return f"{type(error).__name__}: {error}"


def _complete(log: SourceLog, partition: int, frontier: int) -> bool:
    """No visible record at or after ``frontier`` (a line that no longer reads: not)."""
    try:
        return log.next_visible(partition, frontier) is None
    except SourceError:
        return False


def _failure_json(f: PartitionFailure) -> dict[str, Any]:
    return {
        "partition": f.partition,
        "offset": f.offset,
        "error": f"{type(f.error).__name__}: {f.error}",
    }


def _end(log: SourceLog, partition: int) -> int:
    """One past the partition's last offset (0 when the log cannot say)."""
    end = getattr(log, "end", None)
    return int(end(partition)) if callable(end) else 0


def _committed(store: StateStore) -> dict[int, int]:
    """Outbox plus quarantine rows per partition: one per record processed."""
    return {s.partition: s.outbox + s.quarantine for s in store.backend.partition_summaries()}


def _frontiers(store: StateStore, partitions: tuple[int, ...]) -> dict[int, int]:
    return {p: store.backend.partition_row(p).frontier for p in partitions}
