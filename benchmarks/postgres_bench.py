"""Speed of the fenced stores, against an unfenced baseline.  A benchmark, never a test.

Usage (from the repository root; PostgreSQL via ``REMORA_PG_DSN`` or ``--dsn``, a
maintenance DSN: each measurement runs in a fresh ``remora_bench_<random>`` database)::

    python benchmarks/postgres_bench.py [--partitions 4] [--per-partition 5000] [--json]

It reports:

1. records/s of ``remora run`` (in-process, the real CLI path: source load excluded, store
   open, worker group, summary) on SQLite and PostgreSQL with 1 and 4 worker threads over
   the partitions;
2. the latency of one fenced process transaction (``StateStore.process`` through the
   controlled-I/O seam: row lock, fence, fold, writes, COMMIT) — median and p99;
3. the same for a *baseline* that writes exactly the same rows (outbox or quarantine,
   intent, subject, frontier) with one transaction per record but no lock, no fence read and
   no fold — the physical limit of the store for per-record commits — and a bulk baseline
   (every row in one transaction), and the ratios.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from remora.cli import main as remora_main  # noqa: E402
from remora.clock import MonotonicClock  # noqa: E402
from remora.context import Context  # noqa: E402
from remora.domain import SourceRecord  # noqa: E402
from remora.store import MemoryStore, SqliteStore, StateStore, StoreSnapshot  # noqa: E402
from remora.store.postgres import PostgresStore  # noqa: E402
from tests.common.workload import generate, write_source_dir  # noqa: E402

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextmanager
def fresh_pg(maintenance: str) -> Iterator[str]:
    name = f"remora_bench_{secrets.token_hex(5)}"
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(maintenance, dbname=name)
    finally:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@contextmanager
def fresh_sqlite() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "bench.sqlite3"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(samples) * 1000, 3),
        "p99_ms": round(percentile(samples, 0.99) * 1000, 3),
        "per_s": round(len(samples) / sum(samples), 1),
    }


# -- 1. remora run ------------------------------------------------------------------


def run_cli(src: Path, store_args: list[str], workers: int) -> dict[str, Any]:
    out = StringIO()
    with redirect_stdout(out):
        code = remora_main(["run", str(src), *store_args, "--workers", str(workers), "--json"])
    doc = json.loads(out.getvalue())
    if code != 0:
        raise SystemExit(f"remora run failed ({code}): {doc}")
    return {
        "workers": workers,
        "records": doc["processed"],
        "seconds": doc["seconds"],
        "records_per_s": round(doc["processed"] / doc["seconds"], 1),
        "rebalances": doc["rebalances"],
    }


# -- 2./3. one transaction ----------------------------------------------------------


def fenced_steps(store: StateStore, records: list[SourceRecord]) -> Iterator[float]:
    """One fenced process transaction per step; yields its duration."""
    ctx = Context(MonotonicClock())
    tokens = {p: store.claim(p, ctx) for p in sorted({r.partition for r in records})}
    for record in records:
        start = time.perf_counter()
        tokens[record.partition] = store.process(
            record.partition, tokens[record.partition], record, ctx
        )
        yield time.perf_counter() - start


def rows_of(records: list[SourceRecord]) -> StoreSnapshot:
    """The rows the fenced run writes, computed once in memory (for the baseline)."""
    store = MemoryStore()
    for _ in fenced_steps(store, records):
        pass
    return store.snapshot()


Write = tuple[str, tuple[Any, ...]]


def baseline_writes(snapshot: StoreSnapshot, records: list[SourceRecord]) -> list[list[Write]]:
    """Per record, the statements that write its rows (no reads, no lock, no fold)."""
    outbox = {(e.partition, e.offset): e for e in snapshot.outbox}
    quarantine = {(q.partition, q.offset): q for q in snapshot.quarantine}
    intents = {(i.partition, i.subject, i.version): i for i in snapshot.intents}
    seqs: dict[int, int] = {}
    per_record: list[list[Write]] = []
    for r in records:
        writes: list[Write] = []
        key = (r.partition, r.offset)
        if key in outbox:
            e = outbox[key]
            writes.append(
                (
                    "INSERT INTO remora_outbox (partition, seq, subject, version, op, body, "
                    '"offset") VALUES (%s, %s, %s, %s, %s, %s, %s)',
                    (e.partition, e.seq, e.subject, e.version, e.op, e.body, e.offset),
                )
            )
            seqs[r.partition] = e.seq + 1
            intent = intents.get((e.partition, e.subject, e.version))
            if intent is not None and e.op != "withdraw":
                writes.append(
                    (
                        "INSERT INTO remora_intent (partition, subject, version, body, "
                        '"offset") VALUES (%s, %s, %s, %s, %s)',
                        (intent.partition, intent.subject, intent.version, intent.body, r.offset),
                    )
                )
            subject: str | None = e.subject
        else:
            q = quarantine[key]
            writes.append(
                (
                    'INSERT INTO remora_quarantine (partition, "offset", subject, reason, '
                    "detail) VALUES (%s, %s, %s, %s, %s)",
                    (q.partition, q.offset, q.subject, q.reason, q.detail),
                )
            )
            subject = q.subject
        if subject is not None:
            writes.append(
                (
                    "INSERT INTO remora_subject (partition, subject, revision, status, blocked, "
                    "body) VALUES (%s, %s, 1, 'live', false, '{}') ON CONFLICT (partition, "
                    "subject) DO UPDATE SET revision = remora_subject.revision + 1",
                    (r.partition, subject),
                )
            )
        writes.append(
            (
                "UPDATE remora_partition SET frontier = %s, next_seq = %s WHERE partition = %s",
                (r.offset + 1, seqs.get(r.partition, 1), r.partition),
            )
        )
        per_record.append(writes)
    return per_record


def pg_baseline(dsn: str, writes: list[list[Write]], partitions: list[int]) -> Iterator[float]:
    """One unfenced transaction per step (same rows, same round-trip shape for the writes)."""
    PostgresStore(dsn).close()  # the schema
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        for p in partitions:
            cur.execute("INSERT INTO remora_partition VALUES (%s, 1, 0, 1)", (p,))
        for statements in writes:
            start = time.perf_counter()
            cur.execute("BEGIN")
            with conn.pipeline():
                for text, params in statements:
                    cur.execute(text.encode(), params)
            cur.execute("COMMIT")
            yield time.perf_counter() - start


def pg_bulk(dsn: str, writes: list[list[Write]], partitions: list[int]) -> float:
    PostgresStore(dsn).close()
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        for p in partitions:
            cur.execute("INSERT INTO remora_partition VALUES (%s, 1, 0, 1)", (p,))
        start = time.perf_counter()
        cur.execute("BEGIN")
        with conn.pipeline():
            for statements in writes:
                for text, params in statements:
                    cur.execute(text.encode(), params)
        cur.execute("COMMIT")
        return time.perf_counter() - start


def for_sqlite(text: str, params: tuple[Any, ...]) -> Write:
    """The same write in SQLite's dialect and schema (its intent table has no offset)."""
    if text.startswith("INSERT INTO remora_intent"):
        text = "INSERT INTO remora_intent (partition, subject, version, body) VALUES (?, ?, ?, ?)"
        params = params[:4]
    return text.replace("%s", "?").replace("false", "0"), params


def sqlite_baseline(
    path: Path, writes: list[list[Write]], partitions: list[int]
) -> Iterator[float]:
    SqliteStore(path).close()
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        for p in partitions:
            conn.execute("INSERT INTO remora_partition VALUES (?, 1, 0, 1)", (p,))
        for statements in writes:
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            for text, params in statements:
                conn.execute(*for_sqlite(text, params))
            conn.execute("COMMIT")
            yield time.perf_counter() - start
    finally:
        conn.close()


def sqlite_bulk(path: Path, writes: list[list[Write]], partitions: list[int]) -> float:
    SqliteStore(path).close()
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    for p in partitions:
        conn.execute("INSERT INTO remora_partition VALUES (?, 1, 0, 1)", (p,))
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    for statements in writes:
        for text, params in statements:
            conn.execute(*for_sqlite(text, params))
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


CHUNK = 50


def measure(
    name: str,
    fresh: Callable[[], Any],
    open_store: Callable[[Any], StateStore],
    baseline: Callable[[Any, list[list[Write]], list[int]], Iterator[float]],
    bulk: Callable[[Any, list[list[Write]], list[int]], float],
    records: list[SourceRecord],
    writes: list[list[Write]],
    partitions: list[int],
) -> dict[str, Any]:
    """Fenced and baseline transactions, interleaved in chunks so that both see the same
    machine (a busy neighbour slows both, not one)."""
    fenced: list[float] = []
    plain: list[float] = []
    with fresh() as fenced_db, fresh() as plain_db:
        store = open_store(fenced_db)
        try:
            fenced_it = fenced_steps(store, records)
            plain_it = baseline(plain_db, writes, partitions)
            for _ in range(0, len(records), CHUNK):
                fenced += itertools.islice(fenced_it, CHUNK)
                plain += itertools.islice(plain_it, CHUNK)
        finally:
            store.close()
    with fresh() as where:
        bulk_s = bulk(where, writes, partitions)
    f, b = latency(fenced), latency(plain)
    return {
        "store": name,
        "fenced": f,
        "baseline": b,
        "bulk_per_s": round(len(records) / bulk_s, 1),
        "fenced_vs_baseline_throughput": round(f["per_s"] / b["per_s"], 3),
        "fenced_vs_bulk_throughput": round(f["per_s"] / (len(records) / bulk_s), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-partition", type=int, default=5000)
    parser.add_argument("--latency-records", type=int, default=4000)
    parser.add_argument("--dsn", default=os.environ.get("REMORA_PG_DSN") or DEFAULT_DSN)
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration")
    parser.add_argument(
        "--skip-run", action="store_true", help="only the per-transaction measurements"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    records = generate(2024, args.partitions, args.per_partition)
    visible = [r for r in records if r.visible]
    partitions = list(range(args.partitions))
    report: dict[str, Any] = {
        "source": {
            "partitions": args.partitions,
            "records": len(records),
            "visible": len(visible),
        },
        "run": [],
        "transaction": [],
        "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0]},
    }
    with tempfile.TemporaryDirectory() as tmp:
        src = write_source_dir(Path(tmp) / "src", records, args.partitions)
        configs = [(store, workers) for store in ("sqlite", "postgres") for workers in (1, 4)]
        runs: dict[tuple[str, int], list[dict[str, Any]]] = {c: [] for c in configs}
        for _ in range(0 if args.skip_run else args.repeat):  # rounds over every configuration
            for store, workers in configs:
                if store == "sqlite":
                    with fresh_sqlite() as path:
                        runs[(store, workers)].append(run_cli(src, ["--db", str(path)], workers))
                else:
                    with fresh_pg(args.dsn) as dsn:
                        runs[(store, workers)].append(run_cli(src, ["--dsn", dsn], workers))
        for (store, _workers), found in runs.items():
            if not found:
                continue
            found.sort(key=lambda r: r["records_per_s"])
            report["run"].append(
                {
                    "store": store,
                    **found[len(found) // 2],  # the median run
                    "all_records_per_s": [r["records_per_s"] for r in found],
                }
            )

    sample = visible[: args.latency_records]
    writes = baseline_writes(rows_of(sample), sample)
    report["transaction"].append(
        measure(
            "sqlite",
            fresh_sqlite,
            lambda p: SqliteStore(p),
            sqlite_baseline,
            sqlite_bulk,
            sample,
            writes,
            partitions,
        )
    )
    report["transaction"].append(
        measure(
            "postgres",
            lambda: fresh_pg(args.dsn),
            lambda d: PostgresStore(d),
            pg_baseline,
            pg_bulk,
            sample,
            writes,
            partitions,
        )
    )
    report["machine"]["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    src_info = report["source"]
    print(
        f"source: {src_info['records']} records ({src_info['visible']} visible) over "
        f"{src_info['partitions']} partitions"
    )
    machine = report["machine"]
    print(
        f"machine: {machine['cpus']} CPUs, load average {machine['load_before']:.2f} before, "
        f"{machine['load_after']:.2f} after"
    )
    print(f"\nremora run (median of {args.repeat})")
    print(f"{'store':<10}{'workers':>8}{'records/s':>12}{'seconds':>10}{'rebalances':>12}")
    for r in report["run"]:
        print(
            f"{r['store']:<10}{r['workers']:>8}{r['records_per_s']:>12.0f}{r['seconds']:>10.2f}"
            f"{r['rebalances']:>12}"
        )
    print(f"\none transaction ({len(sample)} records, sequential, one connection)")
    print(f"{'store':<10}{'kind':<10}{'median ms':>11}{'p99 ms':>9}{'per s':>9}")
    for t in report["transaction"]:
        for kind in ("fenced", "baseline"):
            m = t[kind]
            print(
                f"{t['store']:<10}{kind:<10}{m['median_ms']:>11.3f}{m['p99_ms']:>9.3f}"
                f"{m['per_s']:>9.0f}"
            )
        print(f"{t['store']:<10}{'bulk':<10}{'':>11}{'':>9}{t['bulk_per_s']:>9.0f}")
        print(
            f"{t['store']:<10}ratios: fenced/baseline {t['fenced_vs_baseline_throughput']:.2f}, "
            f"fenced/bulk {t['fenced_vs_bulk_throughput']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
