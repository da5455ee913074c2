"""``remora status``: per-partition epoch, frontier, outbox and quarantine counts."""

from __future__ import annotations

import argparse
import json
from typing import Any

import attrs

from remora.cli.common import EXIT_OK, exit_codes, print_table
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
        epilog=exit_codes(
            "the rows were printed",
            "the store is unavailable (e.g. PostgreSQL unreachable)",
            "bad usage, or no Remora database there",
        ),
    )
    add_store_arguments(p)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=status)


def partition_rows(store: StateStore) -> list[dict[str, Any]]:
    """The store's counters (counted by the store, not loaded)."""
    return [attrs.asdict(s) for s in store.backend.partition_summaries()]


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


__all__ = [
    "HEADERS",
    "register",
    "partition_rows",
    "status",
]
