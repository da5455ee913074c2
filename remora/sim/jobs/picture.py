"""A recorded job run as a :class:`~remora.sim.timeline.Timeline`: ``remora show DIR`` of a
``remora jobs … --record DIR`` directory.

Each ``*.jsonl`` file holds one process's :class:`~remora.jobs.io.StepRecord` lines (a torn
last line — a process killed mid-write — is left out, as trace validation does).  The
picture:

* **lanes** — one per actor: each worker incarnation, its reconciler, each client;
* **marks** — one per recorded step, in wall-clock order (a display order only: the checker
  searches every interleaving the stores' orders allow), coloured by what the spec action
  does (a commit, a fence or expiry, cancellation, a fault, any other step);
* **bars** — each attempt on the lane of the incarnation that ran it, from its first to its
  last recorded step (reserve → authorize → activate → outcome → accept or reap);
* **series** — each job's fencing token and checkpoint over the steps;
* **verdict** — the refinement checker's, when the run's stores are given
  (:func:`verdict_of`): the recorded run is a behaviour of ``Remora.tla``, or the first
  rejection in words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from remora.errors import InvalidInput
from remora.jobs.io import StepRecord
from remora.jobs.model import JobsConfig
from remora.sim.timeline import (
    Band,
    Bar,
    Lane,
    Mark,
    Series,
    Timeline,
    Violation,
    abbreviations,
    legend,
    protocol_kind,
)

_MEANINGS = {
    "commit": "a durable commit (accept, checkpoint, credential)",
    "fenced": "a fence or an expiry (reject, expire, reap, invalidate)",
    "canceled": "cancellation",
    "abort": "a fault (a kill, a dropped link, a wipe, a declared-down incarnation)",
    "step": "any other spec step",
    "callback": "a durable write the spec does not see (a submission)",
}


@attrs.frozen
class Verdict:
    """What the refinement checker said of a recorded run."""

    accepted: bool
    message: str
    steps: int = 0


def read_records(directory: Path) -> list[StepRecord]:
    """Every record of a ``--record`` directory (a torn last line of a file is skipped)."""
    if not directory.is_dir():
        raise InvalidInput(f"{directory}: not a directory of recorded runs")
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise InvalidInput(f"{directory}: no *.jsonl records (remora jobs … --record DIR)")
    out: list[StepRecord] = []
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{path}: cannot read ({exc})") from None
        for i, line in enumerate(lines):
            try:
                doc = json.loads(line)
                out.append(StepRecord(**doc))
            except (json.JSONDecodeError, TypeError) as exc:
                if i == len(lines) - 1 and isinstance(exc, json.JSONDecodeError):
                    continue  # torn by a kill; its step, if it landed, is in the stores' logs
                raise InvalidInput(f"{path}:{i + 1}: not a step record ({exc})") from None
    return out


def _attempt(params: dict[str, Any]) -> tuple[str, int] | None:
    a = params.get("a")
    if isinstance(a, str) and "#" in a:
        job, _, token = a.rpartition("#")
        if token.isdigit():
            return job, int(token)
    return None


def from_recording(
    directory: Path, records: Sequence[StepRecord], verdict: Verdict | None
) -> Timeline:
    """The timeline of a recorded run (see the module docstring)."""
    ordered = sorted(records, key=lambda r: (r.wall, r.actor, r.seq))
    lanes: dict[str, Lane] = {}
    marks: list[Mark] = []
    spans: dict[tuple[str, int], list[int]] = {}
    runner: dict[tuple[str, int], str] = {}
    tokens: dict[str, int] = {}
    checkpoints: dict[str, int] = {}
    points: dict[str, list[tuple[int, int, int]]] = {}
    wipes = kills = 0
    for slot, r in enumerate(ordered):
        note = (
            "reconciler"
            if ".reconciler" in r.actor
            else ("client" if r.actor.startswith("client") else "worker incarnation")
        )
        lanes.setdefault(r.actor, Lane(r.actor, r.actor, note))
        action = r.action or ("Submit" if r.store == "durable" else "Write")
        kind = protocol_kind(r.action) if r.action else "callback"
        shown = ", ".join(f"{k}={v}" for k, v in sorted(r.params.items()))
        details = (
            ("step", f"{slot}: {action}({shown})"),
            ("actor", f"{r.actor} #{r.seq}"),
            ("store", r.store + (f" {r.key} v{r.version}" if r.key else "")),
        )
        marks.append(Mark(slot, r.actor, kind, action, False, details))
        wipes += r.action == "LoseCoordinationState"
        kills += r.action == "CrashWorker"
        attempt = _attempt(r.params)
        if attempt is not None:
            spans.setdefault(attempt, []).append(slot)
            if note == "worker incarnation":
                runner.setdefault(attempt, r.actor)
            job, token = attempt
            if token > tokens.get(job, 0):
                tokens[job] = token
            if r.action == "PersistCheckpoint" and isinstance(r.params.get("amount"), int):
                checkpoints[job] = int(r.params["amount"])
        job_of = attempt[0] if attempt else r.params.get("j")
        if isinstance(job_of, str):
            points.setdefault(job_of, []).append(
                (slot, tokens.get(job_of, 0), checkpoints.get(job_of, 0))
            )
    bars = tuple(
        Bar(
            runner.get(a, ordered[slots[0]].actor),
            slots[0],
            slots[-1],
            f"{a[0]} attempt {a[1]}",
            "attempt",
        )
        for a, slots in sorted(spans.items(), key=lambda kv: kv[1][0])
    )
    summary = [
        ("recorded", f"{len(ordered)} steps by {len(lanes)} actors in {directory}"),
        ("faults", f"{kills} kills, {wipes} coordination wipes"),
    ]
    violation = None
    if verdict is None:
        status = "RECORDED"
        summary.append(("verdict", "not checked: pass the run's stores (--db, or --dsn/--redis)"))
    elif verdict.accepted:
        status = "REFINES"
        summary.append(("verdict", verdict.message))
    else:
        status = "REJECTED"
        summary.append(("verdict", verdict.message))
        last = len(ordered) - 1
        violation = Violation(
            max(last, 0),
            None,
            "REJECTED by the spec",
            verdict.message,
            (
                ("property", "the recorded run is a behaviour of Remora.tla"),
                ("checker", verdict.message),
            ),
        )
    return Timeline(
        title=f"recorded job run: {status.lower()}",
        source=str(directory),
        status=status,
        summary=tuple(summary),
        slots=len(ordered),
        lanes=tuple(sorted(lanes.values(), key=lambda lane: (lane.note, lane.key))),
        marks=tuple(marks),
        links=(),
        series=tuple(
            Series(f"job {j}", f"job {j}", ("token", "checkpoint"), tuple(pts))
            for j, pts in sorted(points.items())
        ),
        bands=tuple(
            Band(m.slot, m.slot, m.label, "fault")
            for m in marks
            if m.label in ("LoseCoordinationState", "CrashWorker")
        ),
        violation=violation,
        legend=legend(marks, _MEANINGS),
        abbreviations=abbreviations(marks),
        bars=bars,
    )


def verdict_of(
    records: Sequence[StepRecord],
    durable: Any,
    coordination_log: Sequence[Any] = (),
    *,
    staging: Sequence[Any] = (),
    local_limit: int = 2,
) -> Verdict:
    """Validate a recorded run against the spec, with its durable store (and the Redis
    coordination log, when the run used Redis; the target's ``staging``,
    :func:`~remora.sim.jobs.refinement.target_staging`, so that a stage write whose worker
    was killed before recording it is not taken for an invention):
    :func:`~remora.sim.jobs.refinement.validate_run` over the merged records."""
    from remora.sim.jobs.refinement import (
        RefinementViolation,
        constants_of_run,
        merge_records,
        validate_run,
    )

    merged = merge_records(records, durable.log(), coordination_log, staging)
    config = durable.config() or JobsConfig()
    snap = durable.snapshot()
    constants = constants_of_run(
        merged,
        sorted(j.id for j in snap.jobs),
        [w.id for w in snap.workers],
        config,
        local_limit=local_limit,
    )
    try:
        report = validate_run(merged, constants, config)
    except RefinementViolation as exc:
        return Verdict(False, str(exc).splitlines()[0], len(merged))
    return Verdict(
        True,
        f"accepted: {report.steps} steps are a behaviour of Remora.tla "
        f"({report.ticks_inserted} ticks inserted, {report.explored} states explored)",
        report.steps,
    )


__all__ = ["Verdict", "from_recording", "read_records", "verdict_of"]
