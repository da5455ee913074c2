"""How ``remora jobs status`` and ``remora jobs history`` print for a person: tables and
blocks that fit in a terminal of 100 columns (the JSON forms are the views' own
``to_json``, :mod:`remora.jobs.history`).

Why a module of its own: fitting columns into a width (shrinking the widest free-text
columns first, ``…`` where a cell was cut) and writing times and durations briefly is
presentation, shared by both commands and kept apart from what they read.
"""

from __future__ import annotations

from collections.abc import Sequence

from remora.jobs.history import History, JobStatus, iso


def clip(text: str, width: int) -> str:
    """``text`` on one line (its line breaks as spaces), at most ``width`` characters
    (``…`` where it was cut)."""
    text = " ".join(text.splitlines())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def duration(seconds: float | None) -> str:
    """A short duration: ``0.42s``, ``12.3s``, ``4m05s``, ``2h03m``, ``3d04h``."""
    if seconds is None:
        return ""
    s = max(seconds, 0.0)
    if s < 10:
        return f"{s:.2f}s"
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def fit(
    rows: Sequence[dict[str, str]],
    headers: Sequence[str],
    width: int,
    shrink: Sequence[tuple[str, int]] = (),
) -> list[str]:
    """``rows`` as left-aligned columns under ``headers``, at most ``width`` characters a
    line (when ``shrink`` allows): while too wide, the columns of ``shrink`` are cut, stage
    by stage — a stage ``(column, n)`` cuts that column down to ``n`` characters — each cut
    cell ending in ``…``; the columns it does not name (phases, times, counts) are never
    cut."""
    cols = list(headers)
    cells = [[" ".join(str(r.get(h, "")).split()) for h in cols] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(cols)]
    over = sum(widths) + 2 * (len(widths) - 1) - width
    for column, least in shrink:
        if over <= 0:
            break
        if column not in cols:
            continue
        i = cols.index(column)
        cut = min(over, max(widths[i] - max(least, len(column)), 0))
        widths[i] -= cut
        over -= cut
    lines = ["  ".join(h.ljust(w) for h, w in zip(cols, widths, strict=True)).rstrip()]
    for c in cells:
        lines.append(
            "  ".join(clip(v, w).ljust(w) for v, w in zip(c, widths, strict=True)).rstrip()
        )
    return lines


#: How ``status`` cuts its columns to fit: the message first, then names, the ids last.
STATUS_CUTS = (
    ("result/error", 24),
    ("worker", 14),
    ("handler", 10),
    ("queue", 10),
    ("id", 16),
    ("result/error", 8),
    ("worker", 8),
    ("handler", 6),
    ("queue", 6),
    ("id", 8),
)
#: How ``history`` cuts its columns (a cut reason is written out below the table).
HISTORY_CUTS = (("why", 24), ("worker", 12), ("why", 12), ("worker", 6))


def _attempt(r: JobStatus) -> str:
    j = r.job
    return f"{j.current_token}/{j.max_attempts}" if j.current_token else f"-/{j.max_attempts}"


def _progress(r: JobStatus) -> str:
    j = r.job
    text = f"{j.checkpoint if j.checkpoint_valid else 0}/{j.max_progress}"
    if r.staged is not None:
        text += f" ({r.staged})"
    return text


def _note(r: JobStatus) -> str:
    if r.error:
        return r.error
    if r.result is not None:
        return r.result
    if r.job.due and r.job.due > r.now and r.job.phase.value == "Queued":
        return f"due {iso(r.job.due)}"
    return ""


def status_table(rows: Sequence[JobStatus], width: int) -> list[str]:
    """Every job, one line each: id, handler, (queue, priority when any job has one other
    than the default), phase, attempt (current/max), worker, elapsed (or how long it has
    waited, when queued), progress (checkpoint/max, the staged progress in parentheses), and
    the result or the current attempt's error."""
    headers = ["id", "handler"]
    if any(r.job.queue != "default" for r in rows):
        headers.append("queue")
    if any(r.job.priority for r in rows):
        headers.append("prio")
    if any(r.job.timeout for r in rows):  # the jobs' own timeouts (submit --timeout)
        headers.append("timeout")
    headers += ["phase", "attempt", "worker", "elapsed", "progress", "result/error"]
    shown = []
    for r in rows:
        elapsed = duration(r.elapsed)
        if r.waiting is not None and not elapsed and r.job.due <= r.now:
            elapsed = f"+{duration(r.waiting)}"  # queued that long
        shown.append(
            {
                "id": r.job.id,
                "handler": r.job.handler,
                "queue": r.job.queue,
                "prio": str(r.job.priority),
                "timeout": f"{r.job.timeout:g}s" if r.job.timeout else "",
                "phase": r.job.phase.value,
                "attempt": _attempt(r),
                "worker": r.worker or "",
                "elapsed": elapsed,
                "progress": _progress(r),
                "result/error": _note(r),
            }
        )
    return fit(shown, headers, width, STATUS_CUTS)


def status_lines(r: JobStatus) -> list[str]:
    """One job in full (``status JOB``)."""
    j = r.job
    cancel = ", cancel requested" if j.cancel_requested else ""
    lines = [f"{j.id}  {j.phase.value}{cancel}  (handler {j.handler})"]

    def field(name: str, value: object) -> None:
        if value not in (None, ""):
            lines.append(f"  {name:<10} {value}")

    field("queue", f"{j.queue}, priority {j.priority}")
    if j.timeout:
        field("timeout", f"{j.timeout:g}s")
    attempt = f"{j.current_token} of {j.max_attempts}" if j.current_token else "none yet"
    if r.worker:
        attempt += f", worker {r.worker}"
    if r.attempt_started:
        attempt += f", authorized {iso(r.attempt_started)}"
    field("attempt", attempt)
    field("submitted", iso(j.submitted_at))
    if j.due:
        field("due", iso(j.due))
    field("started", iso(j.started_at))
    field("finished", iso(j.finished_at))
    field("elapsed", duration(r.elapsed))
    if r.waiting is not None:
        field("waiting", duration(r.waiting))
    field("progress", f"checkpoint {_progress(r)}")
    field("result", r.result)
    field("error", r.error)
    return lines


def history_lines(h: History, width: int) -> list[str]:
    """A job's attempts, one line each: attempt, worker, authorized, activated, ended,
    ran, why it ended (times of day in UTC; the date once, in the heading, and again on a
    time of another day)."""
    j = h.job
    day = (iso(j.submitted_at) or "")[:10]
    head = f"{j.id}  {j.phase.value}  (handler {j.handler}, queue {j.queue})"
    if day:
        head += f"  times UTC on {day}"
    lines = [clip(head, width)]
    if not h.attempts:
        lines.append("  no attempt yet")
        return lines

    def at(t: float) -> str:
        text = iso(t)
        if text is None:
            return ""
        return text[11:23] if text[:10] == day else f"{text[5:10]} {text[11:23]}"

    rows = [
        {
            "attempt": str(a.token) + (f" <{a.resumed_from}" if a.resumed_from else ""),
            "worker": a.worker,
            "authorized": at(a.authorized),
            "activated": at(a.activated),
            "ended": at(a.ended),
            "ran": duration(a.ran),
            "why": a.why,
        }
        for a in h.attempts
    ]
    headers = ["attempt", "worker", "authorized", "activated", "ended", "ran", "why"]
    table = fit(rows, headers, width, HISTORY_CUTS)
    # A why the table had to cut is written out in full below it.
    notes = [
        clip(f"  attempt {a.token}: {a.why}", width)
        for a, line in zip(h.attempts, table[1:], strict=True)
        if line.endswith("…") and a.why
    ]
    return lines + table + notes


__all__ = ["clip", "duration", "fit", "history_lines", "status_lines", "status_table"]
