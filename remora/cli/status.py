"""``remora status``: per-partition epoch, frontier, outbox and quarantine counts."""

from __future__ import annotations

import argparse
import json
from typing import Any

from remora.cli.common import EXIT_OK
from remora.cli.run import print_table
from remora.cli.store_args import add_store_arguments, describe, open_store
from remora.store import StateStore

HEADERS = ["partition", "epoch", "frontier", "next_seq", "outbox", "quarantine"]


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="show each partition's epoch, durable frontier, outbox and quarantine counts",
        description="Read an existing state store (SQLite --db, default "
        "remora-state.sqlite3, or PostgreSQL --dsn) and print, per claimed partition, the "
        "fencing epoch, the durable frontier, the next outbox seq and the outbox and "
        "quarantine counts.  Never creates or changes anything.",
    )
    add_store_arguments(p)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=status)


def partition_rows(store: StateStore) -> list[dict[str, Any]]:
    summaries = getattr(store.backend, "partition_summaries", None)
    if summaries is not None:  # PostgreSQL counts on the server
        return [{h: getattr(s, h) for h in HEADERS} for s in summaries()]
    snap = store.snapshot()
    return [
        {
            "partition": row.partition,
            "epoch": row.epoch,
            "frontier": row.frontier,
            "next_seq": row.next_seq,
            "outbox": sum(1 for e in snap.outbox if e.partition == row.partition),
            "quarantine": sum(1 for q in snap.quarantine if q.partition == row.partition),
        }
        for row in snap.partitions
    ]


def status(args: argparse.Namespace) -> int:
    store = open_store(args, existing=True)
    try:
        rows = partition_rows(store)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"store": describe(args), "partitions": rows}, indent=2))
    elif rows:
        print(describe(args))
        print_table(rows, HEADERS)
    else:
        print(f"{describe(args)}: no partition has been claimed yet")
    return EXIT_OK
