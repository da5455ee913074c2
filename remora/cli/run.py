"""``remora run SOURCE_DIR``: process a file-backed source into the state store."""

from __future__ import annotations

import argparse
import json
from typing import Any

from remora.cli.common import EXIT_FAILED, EXIT_OK, Progress
from remora.source import load_source_dir
from remora.source.log import MemorySourceLog
from remora.store import SqliteStore, StateStore
from remora.worker import Lifecycle
from remora.worker.runner import LogClient, Runner, RunStats

DEFAULT_DB = "remora-state.sqlite3"


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="process a directory of partition-<N>.jsonl files into the state store",
        description="Process every visible record of SOURCE_DIR exactly once into the store "
        "(SQLite by default), resuming from each partition's durable frontier.",
    )
    p.add_argument("source_dir", metavar="SOURCE_DIR")
    p.add_argument("--db", default=DEFAULT_DB, help=f"SQLite database file (default {DEFAULT_DB})")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def summarize(store: StateStore, log: MemorySourceLog) -> list[dict[str, Any]]:
    """Per-partition frontier, outbox and quarantine counts, and whether it is complete."""
    snap = store.snapshot()
    rows = []
    for partition in log.partitions:
        row = snap.partition(partition)
        rows.append(
            {
                "partition": partition,
                "epoch": row.epoch,
                "frontier": row.frontier,
                "outbox": sum(1 for e in snap.outbox if e.partition == partition),
                "quarantine": sum(1 for q in snap.quarantine if q.partition == partition),
                "complete": log.next_visible(partition, row.frontier) is None,
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    headers = ["partition", "epoch", "frontier", "outbox", "quarantine", "complete"]
    cells = [
        [str(r[h]).lower() if isinstance(r[h], bool) else str(r[h]) for h in headers] for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())


def run(args: argparse.Namespace) -> int:
    log = load_source_dir(args.source_dir)
    store = SqliteStore(args.db)
    progress = Progress()
    try:
        lifecycle = Lifecycle(store, log, name="run")
        runner = Runner(lifecycle, LogClient(log))

        def show(stats: RunStats) -> None:
            progress.update(f"processed {stats.processed} records")

        stats = runner.run(progress=show)
        progress.done()
        rows = summarize(store, log)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"processed": stats.processed, "partitions": rows}, indent=2))
    else:
        print(f"processed {stats.processed} records into {args.db}")
        print_table(rows)
    if stats.error is not None:
        print(f"error: {type(stats.error).__name__}: {stats.error}")
        return EXIT_FAILED
    return EXIT_OK if all(r["complete"] for r in rows) else EXIT_FAILED
