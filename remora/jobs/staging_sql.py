"""The target staging's statements, shared by the targets that live in a database
(:class:`~remora.jobs.postgres.PostgresTarget`; a SQL target of another engine would take
them through its dialect).

Written with ``?`` placeholders (a dialect's :meth:`~remora.store.dialect.Dialect.q` turns
them into its own).  The tables are :data:`~remora.jobs.sql.EXTRA_TABLES`'
``remora_jobs_stage``, ``remora_jobs_stage_fences`` (a fence per declarer) and the earlier
``remora_jobs_stage_fence`` (one per worker, no declarer: honoured, never written).

Why one statement per stage write: the insert's own condition is the refusal check — the
attempt's staging cleaned, a part at this progress or beyond, the worker fenced — so a
write and its check cannot be parted by a cleanup or a fence that commits between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import attrs

from remora.jobs.model import AttemptId, NotEnabled, StageInfo
from remora.jobs.sql import Locked

#: A stage write: parameters ``(job, token, progress, data, job, token, progress, worker,
#: worker)``; returns a row when the part went in.
INSERT_STAGE = (
    "INSERT INTO remora_jobs_stage (job, token, progress, data) "
    "SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM remora_jobs_stage "
    "WHERE job = ? AND token = ? AND (cleaned = 1 OR progress >= ?)) "
    "AND NOT EXISTS (SELECT 1 FROM remora_jobs_stage_fences WHERE worker = ?) "
    "AND NOT EXISTS (SELECT 1 FROM remora_jobs_stage_fence WHERE worker = ?) "
    "RETURNING 1"
)
#: An attempt's highest progress and cleaned mark: ``(job, token)``.
STAGE_INFO = "SELECT max(progress), max(cleaned) FROM remora_jobs_stage WHERE job = ? AND token = ?"
#: The data of an attempt's highest part at or below a progress: ``(job, token, progress)``.
STAGE_DATA = (
    "SELECT data FROM remora_jobs_stage WHERE job = ? AND token = ? AND "
    "cleaned = 0 AND progress <= ? ORDER BY progress DESC LIMIT 1"
)
#: ``CleanupStage``: every part's data dropped and marked cleaned ``(job, token)``, and
#: a cleaned mark at progress 0 when the attempt staged nothing ``(job, token)``.
CLEAN_STAGE = "UPDATE remora_jobs_stage SET data = NULL, cleaned = 1 WHERE job = ? AND token = ?"
CLEANED_MARK = (
    "INSERT INTO remora_jobs_stage (job, token, progress, data, cleaned) VALUES (?, ?, 0, NULL, 1)"
)
STAGE_SNAPSHOT = (
    "SELECT job, token, max(progress), max(cleaned) FROM remora_jobs_stage GROUP BY job, token"
)
#: A declarer's fence of a worker: ``(worker, holder)``.
FENCE = (
    "INSERT INTO remora_jobs_stage_fences (worker, holder) VALUES (?, ?) "
    "ON CONFLICT (worker, holder) DO NOTHING"
)
#: A declarer's let-go of its fence of one worker: ``(holder, worker)``.
UNFENCE = "DELETE FROM remora_jobs_stage_fences WHERE holder = ? AND worker = ?"
#: Every fenced worker (an earlier version's fences too).
FENCED = (
    "SELECT worker FROM remora_jobs_stage_fences UNION SELECT worker FROM remora_jobs_stage_fence"
)
#: The workers one declarer fenced: ``(holder,)``.
FENCED_BY = "SELECT worker FROM remora_jobs_stage_fences WHERE holder = ?"


class _Reads(Protocol):
    def fenced(self, holder: str | None = None) -> frozenset[str]: ...

    def info(self, actor: Any, a: AttemptId) -> StageInfo | None: ...


def up_to(progress: int | None) -> int:
    """:data:`STAGE_DATA`'s bound: ``progress``, or every part."""
    return progress if progress is not None else 2**31 - 1


def refusal(target: _Reads, a: AttemptId, progress: int, worker: str) -> NoReturn:
    """Why a stage write of ``a`` at ``progress`` by ``worker`` was refused (its insert
    went in nowhere), read after it: both facts it reads — the fences aside — only grow."""
    if worker in target.fenced():
        raise NotEnabled(f"worker {worker} is down: its stage writes are fenced")
    info = target.info(None, a)
    if info is not None and info.cleaned:
        raise NotEnabled(f"staging of {a} was cleaned")
    if info is not None and progress <= info.progress:
        raise NotEnabled(f"{a}: progress {progress} is not ahead")
    raise NotEnabled(f"{a}: the stage write at {progress} was refused")


def staged_in(
    cur: Any, sql: str, a: AttemptId, progress: int, data: bytes, worker: str, locked: Locked
) -> Locked:
    """A fused stage write (``sql``: :data:`INSERT_STAGE` in the dialect's placeholders)
    under the job's lock: refused, it raises :class:`NotEnabled` (the whole transaction
    rolls back); taken, the locked read's ``also`` becomes the stage row as written —
    known without reading it: the insert went in only where no row of the attempt was
    cleaned or at ``progress`` or beyond, so its highest progress is now ``progress``."""
    if cur.execute(sql, insert_params(a, progress, data, worker)).fetchone() is None:
        raise NotEnabled(f"{a}: the stage write at {progress} was refused")
    return attrs.evolve(locked, also=(progress, 0))


def clean(cur: Any, q: Callable[[str], str], a: AttemptId, row: Any) -> bool:
    """``CleanupStage`` of ``a`` given its :data:`STAGE_INFO` row read under the
    attempt's lock: False when it was cleaned already."""
    if row is not None and row[1]:
        return False
    cur.execute(q(CLEAN_STAGE), (a.job, a.token))
    if row is None or row[0] is None:
        cur.execute(q(CLEANED_MARK), (a.job, a.token))
    return True


def insert_params(a: AttemptId, progress: int, data: bytes, worker: str) -> tuple[Any, ...]:
    """:data:`INSERT_STAGE`'s parameters."""
    return (a.job, a.token, progress, data, a.job, a.token, progress, worker, worker)


def stage_info(row: Any) -> StageInfo | None:
    """:data:`STAGE_INFO`'s row as a :class:`StageInfo` (None: nothing staged)."""
    if row is None or row[0] is None:
        return None
    return StageInfo(int(row[0]), bool(row[1]))


def snapshot_of(rows: Any) -> dict[AttemptId, StageInfo]:
    """:data:`STAGE_SNAPSHOT`'s rows, per attempt."""
    return {AttemptId(r[0], int(r[1])): StageInfo(int(r[2]), bool(r[3])) for r in rows}


__all__ = [
    "CLEANED_MARK",
    "CLEAN_STAGE",
    "FENCE",
    "FENCED",
    "FENCED_BY",
    "INSERT_STAGE",
    "STAGE_DATA",
    "STAGE_INFO",
    "STAGE_SNAPSHOT",
    "UNFENCE",
    "clean",
    "insert_params",
    "refusal",
    "snapshot_of",
    "stage_info",
    "staged_in",
    "up_to",
]
