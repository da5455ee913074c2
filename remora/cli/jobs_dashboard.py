"""``remora jobs dashboard``: a live, read-only page of a job deployment, served by the
standard library (:mod:`http.server`) — no JavaScript build step, no dependency.

Why it reads only the durable store: like ``status`` and ``history`` it must show the
deployment when the coordination store is down, and every fact on it is durable — jobs by
phase and queue (one aggregate), the jobs in flight with their current attempt, worker,
elapsed time and progress, the worker incarnations with their heartbeat's age, the recent
failures (an index on the log's failures), and each job's attempt history
(:mod:`remora.jobs.history`).  The page reloads itself (``--refresh``); a small inline
script only measures the layout (it marks the body with ``data-overflow``, what does not
fit the window, and ``data-visible``, the sections laid out in it — for the browser test)
and draws nothing.

Paths: ``/`` the overview, ``/job/<id>`` a job's history, ``/health`` ``ok``.
"""

from __future__ import annotations

import html
import http.server
import signal
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from remora.cli.jobs_views import duration
from remora.errors import InvalidInput, RemoraError, UnknownJob
from remora.jobs.actions import Action
from remora.jobs.history import ACCEPTED, Ending, History, JobStatus, history, iso, statuses
from remora.jobs.model import Phase
from remora.jobs.stores import Stores
from remora.jobs.target import check_id

CSS = """
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; padding: 12px 16px; color: #1d2330;
       background: #f6f7f9; }
header { display: flex; flex-wrap: wrap; gap: 4px 16px; align-items: baseline; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 16px; margin: 18px 0 6px; }
.muted { color: #5a6372; }
section { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; padding: 8px 12px;
          margin-top: 12px; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid #eef0f3;
         overflow-wrap: anywhere; vertical-align: top; }
th { font-weight: 600; color: #3b4352; white-space: nowrap; }
td.num, th.num { text-align: right; }
.phase-Running, .phase-Cancelling { color: #0b5fad; font-weight: 600; }
.phase-Failed, .bad { color: #b3261e; font-weight: 600; }
.phase-Succeeded { color: #1e7b34; }
.phase-Queued, .phase-RetryWait { color: #8a5a00; }
.bar { display: inline-block; height: 8px; width: 80px; background: #e3e7ee; border-radius: 4px;
       vertical-align: middle; margin-right: 6px; }
.bar i { display: block; height: 8px; background: #2f7de1; border-radius: 4px; }
a { color: #0b5fad; }
"""

#: Measures the layout (for the browser test): what is wider than the window or clipped.
SCRIPT = """
"use strict";
(function () {
  var overflow = [];
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    overflow.push("the page is wider than the window");
  }
  document.querySelectorAll("section, table, td, th").forEach(function (n) {
    var r = n.getBoundingClientRect();
    if (r.right > window.innerWidth + 1) {
      overflow.push("past the right edge: " + n.textContent.trim().slice(0, 40));
    }
  });
  document.body.setAttribute("data-overflow", overflow.length ? overflow.join(" | ") : "none");
  // the sections a person sees as the page opens (laid out, not hidden, in the window)
  var visible = [];
  document.querySelectorAll("section[id]").forEach(function (n) {
    var r = n.getBoundingClientRect(), st = getComputedStyle(n);
    if (r.width > 0 && r.height > 0 && st.visibility !== "hidden" && r.left >= 0 &&
        r.right <= window.innerWidth + 1) {
      visible.push(n.id);
    }
  });
  document.body.setAttribute("data-visible", visible.join(" "));
  document.body.setAttribute("data-rendered", "true");
})();
"""


#: The failures' steps as the history names them.
FAILURE_NAMES = {action: ending.value for action, ending in ACCEPTED.items()} | {
    Action.REAP_LOST_ATTEMPT: Ending.REAPED.value
}


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    """A table of already-escaped cells (an empty one says so)."""
    if not rows:
        return f'<p class="muted {cls}">none</p>'
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _page(title: str, body: str, refresh: int) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{refresh}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>"
        f'<body data-rendered="false">{body}<script>{SCRIPT}</script></body></html>\n'
    )


def _job_link(job: str) -> str:
    return f'<a href="/job/{urllib.parse.quote(job)}">{_e(job)}</a>'


def _progress(r: JobStatus) -> str:
    j = r.job
    done = r.staged if r.staged is not None else (j.checkpoint if j.checkpoint_valid else 0)
    pct = 100 * done / j.max_progress if j.max_progress else 0
    return f'<span class="bar"><i style="width:{pct:.0f}%"></i></span>{done}/{j.max_progress}'


def overview(stores: Stores, refresh: int, where: str) -> str:
    """The overview page (module docstring)."""
    durable = stores.durable
    now = durable.clock_now()
    counts = durable.counts()
    phases = [p.value for p in Phase]
    queues = sorted({q for _, q in counts}) or ["default"]
    by_queue = [
        [_e(q), *(f"{counts.get((p, q), 0)}" for p in phases), f"{_total(counts, q)}"]
        for q in queues
    ]
    totals = ["<b>all</b>", *(f"{sum(counts.get((p, q), 0) for q in queues)}" for p in phases)]
    totals.append(f"{sum(counts.values())}")
    active = statuses(durable, stores.target, active_only=True)
    running = [r for r in active if r.job.phase in (Phase.RUNNING, Phase.CANCELLING)]
    waiting = [r for r in active if r.job.phase in (Phase.QUEUED, Phase.RETRY_WAIT)]
    run_rows = [
        [
            _job_link(r.job.id),
            _e(r.job.handler),
            _e(r.job.queue),
            f'<span class="phase-{r.job.phase.value}">{_e(r.job.phase.value)}</span>',
            f"{r.job.current_token}/{r.job.max_attempts}",
            _e(r.worker),
            _e(duration(now - r.attempt_started if r.attempt_started else None)),
            _progress(r),
        ]
        for r in running
    ]
    wait_rows = [
        [
            _job_link(r.job.id),
            _e(r.job.handler),
            _e(r.job.queue),
            _e(r.job.priority),
            f'<span class="phase-{r.job.phase.value}">{_e(r.job.phase.value)}</span>',
            _e("" if r.job.due > now else duration(r.waiting)),
            _e(f"in {duration(r.job.due - now)}" if r.job.due > now else ""),
            _e(r.error),
        ]
        for r in waiting[:50]
    ]
    down_after = stores.config.down_after_s
    incarnations = durable.incarnations()
    shown = [w for w in incarnations if w[1]] + [w for w in incarnations if not w[1]][:10]
    worker_rows = []
    for w, up, seen in shown:
        age = now - seen if seen else None
        if not up:
            state = "down"
        elif age is not None and age >= down_after:
            state = '<span class="bad">up, heartbeat late</span>'
        else:
            state = "up"
        worker_rows.append([_e(w), state, _e(duration(age))])
    failures = [
        [
            _e(duration(now - e.at) + " ago" if e.at else ""),
            _job_link(e.key),
            _e(e.params.get("a", "")),
            _e(FAILURE_NAMES.get(e.action, e.action)),
            f'<span class="bad">{_e(e.facts.get("error", "lease lost"))}</span>',
        ]
        for e in durable.recent_failures(10)
    ]
    body = (
        f'<header><h1>Remora jobs</h1><span class="muted">{_e(where)}</span>'
        f'<span class="muted">{_e(iso(now))} (the durable store\'s clock), '
        f"refreshes every {refresh}s</span></header>"
        '<section id="phases"><h2>Jobs by phase and queue</h2>'
        + _table(["queue", *phases, "all"], [*by_queue, totals], "phases")
        + '</section><section id="running"><h2>Running attempts</h2>'
        + _table(
            ["job", "handler", "queue", "phase", "attempt", "worker", "elapsed", "progress"],
            run_rows,
            "running",
        )
        + '</section><section id="failures"><h2>Recent failures</h2>'
        + _table(["when", "job", "attempt", "what", "error"], failures, "failures")
        + '</section><section id="workers"><h2>Workers</h2>'
        + _table(["incarnation", "state", "heartbeat age"], worker_rows, "workers")
        + '</section><section id="waiting"><h2>Waiting jobs</h2>'
        + _table(
            ["job", "handler", "queue", "priority", "phase", "waited", "due", "error"],
            wait_rows,
            "waiting",
        )
        + "</section>"
    )
    return _page("Remora jobs", body, refresh)


def _total(counts: dict[tuple[str, str], int], queue: str) -> int:
    return sum(n for (_, q), n in counts.items() if q == queue)


def job_page(found: History, refresh: int) -> str:
    """A job's attempt history (``remora jobs history`` as a page)."""
    j = found.job
    day = (iso(j.submitted_at) or "")[:10]

    def at(t: float) -> str:
        text = iso(t) or ""
        return text[11:] if text[:10] == day else text.replace("T", " ")

    rows = [
        [
            f"{a.token}" + (f" (resumed {a.resumed_from})" if a.resumed_from else ""),
            _e(a.worker),
            _e(at(a.authorized)),
            _e(at(a.activated)),
            _e(at(a.ended)),
            _e(duration(a.ran)),
            _e(a.outcome),
            _e(a.why),
        ]
        for a in found.attempts
    ]
    facts = [
        ["phase", f'<span class="phase-{j.phase.value}">{_e(j.phase.value)}</span>'],
        ["handler", _e(j.handler)],
        ["queue", f"{_e(j.queue)}, priority {j.priority}"],
        ["submitted", _e(iso(j.submitted_at))],
        ["finished", _e(iso(j.finished_at))],
        ["error", f'<span class="bad">{_e(j.error)}</span>' if j.error else ""],
    ]
    body = (
        f'<header><h1>Job {_e(j.id)}</h1><a href="/">all jobs</a></header>'
        '<section id="job"><h2>Job</h2>'
        + _table(["", ""], facts, "job")
        + '</section><section id="attempts"><h2>Attempts</h2><p class="muted">times UTC'
        + f" on {_e(day)}</p>"
        + _table(
            ["attempt", "worker", "authorized", "activated", "ended", "ran", "outcome", "why"],
            rows,
            "attempts",
        )
        + "</section>"
    )
    return _page(f"Remora job {j.id}", body, refresh)


def handler_for(
    stores: Stores, refresh: int, where: str
) -> type[http.server.BaseHTTPRequestHandler]:
    """The request handler: read-only pages of ``stores``' durable store."""
    lock = threading.Lock()  # one read of the stores at a time

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "remora-dashboard"

        def do_GET(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            try:
                with lock:
                    status, text = self.page(path)
            except (RemoraError, OSError) as exc:
                status, text = 503, _page("store unavailable", f"<p>{_e(exc)}</p>", refresh)
            data = text.encode()
            self.send_response(status)
            kind = "text/plain" if path == "/health" else "text/html"
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def page(self, path: str) -> tuple[int, str]:
            if path == "/":
                return 200, overview(stores, refresh, where)
            if path == "/health":
                return 200, "ok\n"
            if path.startswith("/job/"):
                job = urllib.parse.unquote(path[len("/job/") :])
                try:
                    check_id("job", job)
                    return 200, job_page(history(stores.durable, job), refresh)
                except (UnknownJob, RemoraError):
                    return 404, _page("no such job", f"<p>no such job: {_e(job)}</p>", refresh)
            return 404, _page("not found", "<p>not found</p>", refresh)

        def log_message(self, format: str, *args: Any) -> None:
            return None  # quiet: a page a second is not worth a log line

    return Handler


def serve(stores: Stores, host: str, port: int, refresh: int, say: Callable[[str], None]) -> int:
    """Serve until SIGINT/SIGTERM (exit 0)."""
    where = stores.durable.where
    try:
        server = http.server.ThreadingHTTPServer((host, port), handler_for(stores, refresh, where))
    except OSError as exc:
        raise InvalidInput(
            f"--port {port}: cannot serve on {host}: {exc.strerror or exc}"
        ) from None
    server.daemon_threads = True

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    say(f"remora jobs dashboard: http://{host}:{server.server_port}/ (read-only; Ctrl-C stops)")
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        server.server_close()
    return 0


__all__ = ["handler_for", "job_page", "overview", "serve"]
