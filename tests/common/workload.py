"""Deterministic synthetic sources for the evidence tests and the benchmarks.

Mostly valid amendment streams (submit, correct, withdraw) with offset gaps, invisible
records, and — when ``faulty`` — conflicts, rejections and malformed values (which block
their subject).  Written as a ``remora run`` source directory by :func:`write_source_dir`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from remora.domain import SourceRecord
from remora.source import MemorySourceLog


def generate(
    seed: int,
    partitions: int,
    per_partition: int,
    *,
    subjects: int = 40,
    faulty: bool = True,
) -> list[SourceRecord]:
    rng = random.Random(seed)
    out: list[SourceRecord] = []
    for p in range(partitions):
        offset = rng.randrange(3)
        revision: dict[str, int] = {}
        withdrawn: set[str] = set()
        for _ in range(per_partition):
            subject = f"s{p}-{rng.randrange(subjects)}"
            visible = rng.random() > 0.05
            rev = revision.get(subject, 0)
            roll = rng.random()
            doc: dict[str, object]
            if faulty and roll < 0.02:
                value = '{"subject": "' + subject + '", "op": '  # malformed, blocks subject
            else:
                if subject in withdrawn or (faulty and roll < 0.04):
                    doc = {"subject": subject, "op": "correct", "revision": rev + 1}  # rejected
                elif rev == 0:
                    doc = {"subject": subject, "op": "submit", "revision": 1}
                elif faulty and roll < 0.06:
                    doc = {"subject": subject, "op": "correct", "revision": rev + 3}  # conflict
                elif roll < 0.12:
                    doc = {"subject": subject, "op": "withdraw", "revision": rev + 1}
                else:
                    doc = {"subject": subject, "op": "correct", "revision": rev + 1}
                doc["body"] = {"n": offset, "note": f"p{p}o{offset}"}
                value = json.dumps(doc)
                if visible and doc["revision"] == rev + 1 and subject not in withdrawn:
                    revision[subject] = rev + 1
                    if doc["op"] == "withdraw":
                        withdrawn.add(subject)
            out.append(SourceRecord(p, offset, visible, subject, value.encode()))
            offset += 1 + (rng.random() < 0.1)
    return out


def log_of(records: Sequence[SourceRecord], partitions: Iterable[int] = ()) -> MemorySourceLog:
    return MemorySourceLog(records, partitions)


def write_source_dir(path: Path, records: Sequence[SourceRecord], partitions: int) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    lines: dict[int, list[str]] = {p: [] for p in range(partitions)}
    for r in records:
        doc = {"offset": r.offset, "visible": r.visible, "key": r.key, "value": r.value.decode()}
        lines[r.partition].append(json.dumps(doc))
    for p, rows in lines.items():
        (path / f"partition-{p}.jsonl").write_text("".join(row + "\n" for row in rows))
    return path
