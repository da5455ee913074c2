"""Peak memory of ``remora run`` and ``remora status`` as the source grows.

Writes a synthetic source directory of N records (``partition-<P>.jsonl`` files, written
line by line), runs ``python -m remora run SRC --db DB --json`` and then
``python -m remora status --db DB --json`` in child processes on a fresh SQLite store, and
reports each child's peak resident set size (``wait4``'s ``ru_maxrss``) and wall time::

    python benchmarks/run_memory.py                      # 10k and 1M records, 4 partitions
    python benchmarks/run_memory.py --records 10000 100000 --partitions 2
    python benchmarks/run_memory.py --json results.json  # also write the table as JSON

With a streaming source the run's peak RSS stays flat as N grows (the records are read from
the files as they are fetched, and ``status``/the run summary count rows in the store instead
of loading them); a source loaded whole grows with N.  Memory and speed are measured here,
never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def write_source(path: Path, records: int, partitions: int) -> None:
    """``records`` records spread over ``partitions`` files: mostly valid amendments, with
    offset gaps, invisible records and an occasional malformed value (quarantined)."""
    path.mkdir(parents=True, exist_ok=True)
    files = [(path / f"partition-{p}.jsonl").open("w", encoding="utf-8") for p in range(partitions)]
    try:
        offsets = [0] * partitions
        revisions: list[dict[str, int]] = [{} for _ in range(partitions)]
        for i in range(records):
            p = i % partitions
            n = i // partitions
            subject = f"s{p}-{n % 500}"
            visible = n % 23 != 7
            if n % 97 == 13:
                value: Any = '{"subject": "x'  # malformed: quarantined (blocks nothing)
            else:
                rev = revisions[p].get(subject, 0)
                op = "submit" if rev == 0 else "correct"
                value = {"subject": subject, "op": op, "revision": rev + 1, "body": {"n": n}}
                if visible:
                    revisions[p][subject] = rev + 1
            line = {"offset": offsets[p], "visible": visible, "key": subject, "value": value}
            files[p].write(json.dumps(line, separators=(",", ":")) + "\n")
            offsets[p] += 2 if n % 11 == 5 else 1
    finally:
        for f in files:
            f.close()


def measure(argv: list[str]) -> tuple[float, float, str]:
    """Run ``argv``; returns (peak RSS MiB, seconds, stdout).  Fails on a non-zero exit."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=REPO)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - started
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.strip()}")
    return usage.ru_maxrss / 1024, seconds, text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, nargs="+", default=[10_000, 1_000_000])
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--json", metavar="PATH", default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="remora-run-memory-", dir=args.dir) as tmp:
        for n in args.records:
            src, db = Path(tmp) / f"src-{n}", Path(tmp) / f"state-{n}.sqlite3"
            write_source(src, n, args.partitions)
            mib = sum(f.stat().st_size for f in src.iterdir()) / 2**20
            remora = [sys.executable, "-m", "remora"]
            run = [*remora, "run", str(src), "--db", str(db), "--json"]
            run_rss, run_s, text = measure([*run, "--workers", str(args.workers)])
            processed = json.loads(text)["processed"]
            status_rss, status_s, _ = measure([*remora, "status", "--db", str(db), "--json"])
            row = {
                "records": n,
                "source_mib": round(mib, 1),
                "processed": processed,
                "run_peak_rss_mib": round(run_rss, 1),
                "run_seconds": round(run_s, 1),
                "status_peak_rss_mib": round(status_rss, 1),
                "status_seconds": round(status_s, 2),
            }
            rows.append(row)
            print(
                f"{n:>9} records ({mib:7.1f} MiB source, {processed} processed): "
                f"run peak RSS {run_rss:7.1f} MiB in {run_s:7.1f} s; "
                f"status peak RSS {status_rss:6.1f} MiB in {status_s:5.2f} s",
                flush=True,
            )
            db.unlink()
            for f in src.iterdir():
                f.unlink()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
