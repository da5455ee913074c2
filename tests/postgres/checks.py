"""Checking durable state against the independent oracle (``remora.oracle``).

The oracle re-derives the expected outbox, quarantine, intents and view from the raw source
alone; :class:`remora.oracle.Monitor` adds the history checks (contiguous outbox ``seq``,
every visible record below the frontier accounted for exactly once, frontiers and epochs
never going back, intents immutable).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from remora.domain import SourceRecord
from remora.oracle import Monitor, Observed, Oracle, RawRecord, ViewRow
from remora.store import StoreSnapshot


def oracle_for(records: Iterable[SourceRecord], partitions: Iterable[int] = ()) -> Oracle:
    return Oracle(
        (RawRecord(r.partition, r.offset, r.visible, r.key, r.value) for r in records),
        partitions,
    )


def observe(snapshot: StoreSnapshot, partition: int) -> Observed:
    row = snapshot.partition(partition)
    return Observed(
        partition=partition,
        epoch=row.epoch,
        frontier=row.frontier,
        outbox=[
            (e.seq, e.subject, e.version, e.op, e.body, e.offset)
            for e in snapshot.outbox
            if e.partition == partition
        ],
        quarantine=[
            (q.offset, q.subject, q.reason) for q in snapshot.quarantine if q.partition == partition
        ],
        intents=[
            (i.subject, i.version, i.body) for i in snapshot.intents if i.partition == partition
        ],
    )


def materialize(snapshot: StoreSnapshot) -> tuple[ViewRow, ...]:
    """Deliver the outbox in ``seq`` order into a view (subject → version, status, body)."""
    rows: dict[tuple[int, str], ViewRow] = {}
    for e in sorted(snapshot.outbox, key=lambda e: (e.partition, e.seq)):
        body: Any = json.loads(e.body)
        status = "withdrawn" if e.op == "withdraw" else "live"
        rows[(e.partition, e.subject)] = ViewRow(e.partition, e.subject, e.version, status, body)
    return tuple(rows[k] for k in sorted(rows))


def violations(
    snapshot: StoreSnapshot, oracle: Oracle, monitor: Monitor | None = None
) -> list[str]:
    """Safety violations of the durable state at its own frontiers (empty when safe)."""
    monitor = monitor or Monitor(oracle)
    partitions = sorted(set(oracle.partitions) | {r.partition for r in snapshot.partitions})
    found = []
    for p in partitions:
        found += [f"{v.kind}: {v.message}" for v in monitor.check(observe(snapshot, p))]
    return found


def final_problems(snapshot: StoreSnapshot, oracle: Oracle) -> list[str]:
    """Safety violations, plus incompleteness and view differences at the end of a run."""
    found = violations(snapshot, oracle)
    for p in oracle.partitions:
        frontier = snapshot.partition(p).frontier
        if frontier != oracle.end_frontier(p):
            found.append(
                f"partition {p}: frontier {frontier}, source ends at {oracle.end_frontier(p)}"
            )
    if materialize(snapshot) != oracle.view():
        found.append("the materialized view differs from the oracle's")
    return found
