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
    int_at_least,
    int_in,
    print_table,
)
from remora.cli.store_args import DEFAULT_DB, add_store_arguments, describe, open_store
from remora.limits import MAX_WORKERS
from remora.source import SourceLog, open_source_dir
from remora.store import PartitionSummary, StateStore
from remora.worker.group import GroupProgress, WorkerGroup
from remora.worker.source_identity import ACCEPT_FLAG, check_source, record_source

__all__ = ["DEFAULT_DB", "register", "run", "summarize"]

DEFAULT_REBALANCE_EVERY = 500


_positive = int_at_least(1)
_non_negative = int_at_least(0)
_workers = int_in(1, MAX_WORKERS)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="process a directory of partition-<N>.jsonl files into the state store",
        description="Process every visible record of SOURCE_DIR exactly once into the store "
        "(SQLite by default, PostgreSQL with --dsn), resuming from each partition's durable "
        "frontier.  Ctrl-C or SIGTERM stops safely; run again to resume.",
    )
    p.add_argument("source_dir", metavar="SOURCE_DIR")
    add_store_arguments(p)
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
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        ACCEPT_FLAG,
        action="store_true",
        help="continue although SOURCE_DIR is not the source the store's frontiers were made "
        "from (records below those frontiers are then never processed); without it such a run "
        "is refused (exit 2)",
    )
    p.set_defaults(func=run)


HEADERS = ["partition", "epoch", "frontier", "outbox", "quarantine", "complete"]


def summarize(store: StateStore, log: SourceLog) -> list[dict[str, Any]]:
    """Per-partition frontier, outbox and quarantine counts (counted by the store, not
    loaded), and whether the partition is complete."""
    counted = {s.partition: s for s in store.backend.partition_summaries()}
    rows = []
    for partition in log.partitions:
        s = counted.get(partition) or PartitionSummary(partition, 0, 0, 1, 0, 0)
        rows.append(
            {
                "partition": partition,
                "epoch": s.epoch,
                "frontier": s.frontier,
                "outbox": s.outbox,
                "quarantine": s.quarantine,
                "complete": log.next_visible(partition, s.frontier) is None,
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
    progress = Progress()
    started = time.monotonic()
    try:
        check_source(
            store,
            log,
            accept=args.accept_source_change,
            say=lambda line: print(f"remora run: {line}", file=sys.stderr),
        )
    except BaseException:
        store.close()
        raise
    try:
        group = WorkerGroup(store, log, args.workers, rebalance_every=args.rebalance_every)

        def show(p: GroupProgress) -> None:
            rate = p.processed / max(time.monotonic() - started, 1e-9)
            progress.update(
                f"processed {p.processed} records ({rate:.0f}/s), "
                f"{args.workers} worker(s), {p.rebalances} rebalance(s)"
            )

        with stop_on_signals(group.stop) as signals:
            stats = group.run(progress=show)
        progress.done()
        rows = summarize(store, log)
    finally:
        try:
            record_source(store, log)  # however the run ended: what is processed, is
        finally:
            store.close()
    elapsed = time.monotonic() - started
    if args.json:
        doc = {
            "processed": stats.processed,
            "workers": args.workers,
            "rebalances": stats.rebalances,
            "seconds": round(elapsed, 3),
            "interrupted": stats.stopped,
            "partitions": rows,
        }
        print(json.dumps(doc, indent=2))
    else:
        print(f"processed {stats.processed} records into {where}")
        print_table(rows, HEADERS)
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
        print(f"remora run: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if all(r["complete"] for r in rows) else EXIT_FAILED
