"""A picture of a run: one self-contained HTML page drawn from a report or a counterexample.

:func:`from_report` reads a ``worker-schedule-v1`` report (what ``remora sim-worker`` prints;
``remora show`` runs a trace first to get one), :func:`from_protocol` a
``remora-protocol-trace-v1`` counterexample of the explorer.  Both give a :class:`Timeline`:

* **lanes** — one per worker lifetime (per worker, attempt or job for a counterexample);
* **marks** — one per modeled I/O call (per spec action), at a *slot* of logical time, with
  a ``kind`` that colours it: ``commit``, ``abort``, ``unknown-committed``,
  ``unknown-aborted``, ``fenced``, ``canceled`` (or ``error``, ``step``, ``callback`` for
  what is neither), whether a fault selector chose it, and every detail shown on hover;
* **links** — interleaves where they struck: ``stop`` on the original lifetime and an arrow
  to the ``replacement`` lifetime it started;
* **series** — epoch and frontier of each partition over the slots (fencing token and
  checkpoint of each job for a counterexample);
* **violation** — the first violation, at the slot and lane where it was recorded.

:func:`render` embeds the timeline as JSON in a page whose own script draws it as SVG (no
network, no external file): the page is the same file on every machine.  Malformed input is
an :class:`~remora.errors.InvalidInput` naming the JSON path, never a traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from typing import Any

import attrs

from remora.errors import InvalidInput

IO_KINDS = ("commit", "abort", "unknown-committed", "unknown-aborted", "fenced", "canceled")
"""The colours of an I/O mark, by what happened (see the module docstring)."""

PROTOCOL_FORMAT = "remora-protocol-trace-v1"
REPORT_IMPLEMENTATION = "worker-schedule-v1"


@attrs.frozen
class Lane:
    key: str
    label: str
    note: str = ""


@attrs.frozen
class Mark:
    slot: int
    lane: str
    kind: str
    label: str
    selected: bool = False
    details: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Link:
    """An interleave: what struck (``stop``, ``replacement N``) at ``slot`` of ``lane``,
    with an arrow to ``target`` (the replacement's lane) when it started one."""

    slot: int
    lane: str
    label: str
    stop: bool
    target: str | None = None
    target_slot: int | None = None


@attrs.frozen
class Series:
    """Two step lines over the slots (values after each slot; None before the first)."""

    key: str
    label: str
    names: tuple[str, str]
    points: tuple[tuple[int, int, int], ...]  # (slot, first value, second value)


@attrs.frozen
class Band:
    """A stretch of slots with a meaning (an attempt, the fair recovery, a cycle)."""

    first: int
    last: int  # inclusive
    label: str
    kind: str


@attrs.frozen
class Bar:
    """A stretch of slots on one lane (an attempt on the incarnation that ran it)."""

    lane: str
    first: int
    last: int  # inclusive
    label: str
    kind: str


@attrs.frozen
class StateRow:
    """One state variable at one key over the slots: ``segments`` are ``(first, last,
    value)`` stretches with one value (a counterexample's cause, drawn over time)."""

    label: str
    segments: tuple[tuple[int, int, str], ...]


@attrs.frozen
class Violation:
    """The first violation: where it was recorded, and ``facts`` — what the page's summary
    panel states in words (the property, the step, who was involved, expected against
    observed), visible without hovering."""

    slot: int
    lane: str | None
    label: str
    message: str
    facts: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Timeline:
    title: str
    source: str
    status: str
    summary: tuple[tuple[str, str], ...]
    slots: int
    lanes: tuple[Lane, ...]
    marks: tuple[Mark, ...]
    links: tuple[Link, ...]
    series: tuple[Series, ...]
    bands: tuple[Band, ...]
    violation: Violation | None
    legend: tuple[tuple[str, str], ...] = ()  # (mark kind, its meaning here): only those drawn
    abbreviations: tuple[tuple[str, str], ...] = ()  # (short label on a mark, full name)
    table: tuple[tuple[str, ...], ...] = ()  # a step table under the drawing (header first)
    bars: tuple[Bar, ...] = ()
    state_rows: tuple[StateRow, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


# -- words for the page ----------------------------------------------------------------

_REPORT_MEANINGS = {
    "commit": "the call committed",
    "abort": "the call failed before its effect (unavailable)",
    "unknown-committed": "the reply was lost; the effect landed",
    "unknown-aborted": "the reply was lost; nothing landed",
    "fenced": "the store's fence refused it",
    "canceled": "the caller's context was canceled",
    "error": "a foreign exception (a bug)",
    "callback": "an attempt with no I/O call",
}
_PROTOCOL_MEANINGS = {
    "commit": "a durable commit (accept, checkpoint, credential)",
    "fenced": "a fence or an expiry (reject, expire, reap, invalidate)",
    "canceled": "cancellation",
    "abort": "a fault (crash, dropped link, coordination state lost)",
    "step": "any other spec action",
}


def legend(marks: Sequence[Mark], meanings: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The legend of the kinds actually drawn, in the order of ``meanings``."""
    used = {m.kind for m in marks}
    return tuple((k, v) for k, v in meanings.items() if k in used)


def short_label(name: str, longer: bool = False) -> str:
    """What a mark shows under it: an operation's first three letters (``obs``), a spec
    action's capitals (``AuthorizeAttempt`` → ``AA``; with ``longer``, two letters of each
    word, ``AuAt``, for names whose capitals collide)."""
    words = re.findall(r"[A-Z][a-z0-9]*", name)
    if len(words) < 2:
        return name[:3]
    return "".join(w[:2] for w in words) if longer else "".join(w[0] for w in words)


def abbreviations(marks: Sequence[Mark]) -> tuple[tuple[str, str], ...]:
    """Every short label drawn with the name it stands for, one name per label."""
    names = sorted({m.label for m in marks})
    first: dict[str, list[str]] = {}
    for n in names:
        first.setdefault(short_label(n), []).append(n)
    out: dict[str, str] = {}
    for short, group in first.items():
        for n in group:
            key = short if len(group) == 1 else short_label(n, longer=True)
            out[key if key not in out else n] = n
    return tuple(sorted(out.items()))


_GOT = re.compile(r"(?:entry (\d+): )?got (.+), expected (.+)$")


def _compared(message: str) -> list[tuple[str, str]]:
    """Expected against observed, when the message compares them (an oracle mismatch:
    ``entry 2: got (…), expected (…)``; ``got 1 entries, expected 2: entry 1 missing …``)."""
    text = message.split(": ", 1)[1] if re.match(r"partition \d+: ", message) else message
    m = _GOT.search(text)
    if m is None:
        return []
    out = [("entry", m.group(1))] if m.group(1) else []
    observed, expected = m.group(2), m.group(3)
    if ": entry " in expected:  # a count, then the first missing or unexpected entry
        count, _, which = expected.partition(": ")
        out.append(("entry", which))
        expected = count
    return [*out, ("expected", expected), ("observed", observed)]


# -- reading JSON defensively -----------------------------------------------------------


def _get(doc: Any, path: str, key: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path}: expected an object")
    if key not in doc:
        raise InvalidInput(f"{path}.{key}: required field is missing")
    value = doc[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int,))):
        raise InvalidInput(f"{path}.{key}: unexpected {type(value).__name__}")
    return value


def _opt(doc: dict[str, Any], path: str, key: str, kind: type | tuple[type, ...]) -> Any:
    if doc.get(key) is None:
        return None
    return _get(doc, path, key, kind)


def _items(doc: Any, path: str, key: str) -> list[tuple[str, dict[str, Any]]]:
    values = _get(doc, path, key, list)
    out = []
    for i, item in enumerate(values):
        where = f"{path}.{key}[{i}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where}: expected an object")
        out.append((where, item))
    return out


def kind_of(doc: Any) -> str:
    """``"trace"``, ``"report"`` or ``"protocol"`` — or InvalidInput for anything else."""
    if isinstance(doc, dict):
        if doc.get("format") == PROTOCOL_FORMAT:
            return "protocol"
        if doc.get("implementation") == REPORT_IMPLEMENTATION:
            return "report" if "label" in doc else "trace"
    raise InvalidInput(
        "not a worker-schedule-v1 trace or report, nor a remora-protocol-trace-v1 counterexample"
    )


# -- worker-schedule reports ------------------------------------------------------------

_INTERLEAVE = re.compile(r"^(\w+) call (\d+) (before|after): (.+)$")


def _event_kind(outcome: str, observation: str) -> str:
    if observation in ("fenced", "canceled", "error"):
        return observation
    return outcome


def _lane_key(lifetime: int) -> str:
    return f"lifetime {lifetime}"


def from_report(doc: Any, source: str) -> Timeline:
    """The timeline of a ``worker-schedule-v1`` report (see the module docstring)."""
    path = "report"
    status = _get(doc, path, "status", str)
    failure = _opt(doc, path, "failure", str)
    events = _items(doc, path, "events")
    attempts = _items(doc, path, "attempts")
    lanes: dict[str, Lane] = {}
    notes: dict[str, set[str]] = {}
    marks: list[Mark] = []
    links: list[Link] = []
    bands: list[Band] = []
    points: dict[int, list[tuple[int, int, int]]] = {}
    attempt_slots: dict[int, tuple[int, int]] = {}

    def lane(lifetime: int, note: str | None = None) -> str:
        key = _lane_key(lifetime)
        lanes.setdefault(key, Lane(key, key))
        if note:
            notes.setdefault(key, set()).add(note)
        return key

    slot = 0
    recovery_from: int | None = None
    for where, a in attempts:
        index = _get(a, where, "index", int)
        actor = _get(a, where, "actor", str)
        worker = _get(a, where, "worker", int)
        partition = _opt(a, where, "partition", int)
        result = _get(a, where, "result", str)
        span = _get(a, where, "events", list)
        if not (len(span) == 2 and all(type(x) is int for x in span) and 0 <= span[0] <= span[1]):
            raise InvalidInput(f"{where}.events: expected [first, last)")
        first, last = span
        if last > len(events):
            raise InvalidInput(f"{where}.events: past the end of report.events")
        recovery = bool(a.get("fair_recovery"))
        if recovery and recovery_from is None:
            recovery_from = slot
        home = lane(worker, "fair recovery" if recovery else None)
        start = slot
        head = f"attempt {index}: {actor} by lifetime {worker}"
        if partition is not None:
            head += f" on partition {partition}"
        common = [("attempt", head), ("result", result)]
        if a.get("error"):
            common.append(("error", str(a["error"])))
        if first == last:
            marks.append(Mark(slot, home, "callback", actor, False, (*common, ("I/O", "none"))))
            slot += 1
        event_slot: dict[tuple[int, str, int], int] = {}
        for i in range(first, last):
            ewhere, e = events[i]
            lifetime = _get(e, ewhere, "lifetime", int)
            p = _get(e, ewhere, "partition", int)
            operation = _get(e, ewhere, "operation", str)
            call = _get(e, ewhere, "call", int)
            outcome = _get(e, ewhere, "outcome", str)
            observation = _get(e, ewhere, "observation", str)
            epoch = _get(e, ewhere, "epoch", int)
            frontier = _get(e, ewhere, "frontier", int)
            replacement = bool(e.get("replacement"))
            key = lane(lifetime, "replacement" if replacement else None)
            selected = bool(e.get("selected_fault"))
            details = (
                *common,
                ("call", f"{operation} call {call} of lifetime {lifetime}, partition {p}"),
                ("outcome", outcome + (" (selected fault)" if selected else "")),
                ("caller saw", observation),
                ("effect applied", str(e.get("effect_applied"))),
                ("logical time", f"{e.get('time_ms', 0)} ms"),
                ("after the call", f"epoch {epoch}, frontier {frontier}"),
            )
            kind = _event_kind(outcome, observation)
            marks.append(Mark(slot, key, kind, operation, selected, details))
            event_slot.setdefault((lifetime, operation, call), slot)
            points.setdefault(p, []).append((slot, epoch, frontier))
            slot += 1
        attempt_slots[index] = (start, slot - 1)
        for text in _opt(a, where, "interleaves", list) or ():
            link = _interleave(str(text), worker, start, slot - 1, event_slot, marks)
            if link is not None:
                links.append(link)
                if link.target is not None:
                    lane(int(link.target.split()[-1]), "replacement")
        if _opt(a, where, "waits_ms", list):
            waits = ", ".join(f"{w} ms" for w in a["waits_ms"])
            bands.append(Band(start, slot - 1, f"retry waits {waits}", "wait"))
    if recovery_from is not None:
        bands.append(Band(recovery_from, max(recovery_from, slot - 1), "fair recovery", "drain"))

    violation = None
    recorded = _items(doc, path, "violations")
    if recorded:
        where, v = recorded[0]
        kind = _get(v, where, "kind", str)
        message = _get(v, where, "message", str)
        attempt = _get(v, where, "attempt", int)
        span = attempt_slots.get(attempt, (max(slot - 1, 0), max(slot - 1, 0)))
        at = span[1]
        owner = next((a for _, a in attempts if a.get("index") == attempt), None)
        culprit = re.match(r"lifetime (\d+)", message)
        if culprit is not None:
            vlane: str | None = _lane_key(int(culprit.group(1)))
        elif owner is not None:
            vlane = _lane_key(int(owner["worker"]))
        else:
            vlane = None
        if vlane is not None and vlane not in lanes:
            vlane = None
        involved = sorted({int(n) for n in re.findall(r"lifetime (\d+)", message)})
        if owner is not None and int(owner["worker"]) not in involved:
            involved.append(int(owner["worker"]))
        facts = [("property", kind)]
        if owner is not None:
            step = f"attempt {attempt}: {owner.get('actor')} by lifetime {owner.get('worker')}"
            if owner.get("partition") is not None:
                step += f" on partition {owner['partition']}"
            facts.append(("step", step))
        if involved:
            facts.append(("involved", ", ".join(f"lifetime {n}" for n in involved)))
        partition = re.match(r"partition (\d+)", message)
        if partition is not None:
            facts.append(("partition", partition.group(1)))
        facts += _compared(message)
        facts.append(("message", message))
        violation = Violation(at, vlane, f"ERROR {kind}", message, tuple(facts))

    ordered = sorted(lanes, key=lambda k: int(k.split()[-1]))
    return Timeline(
        title=f"{failure or status}",
        source=source,
        status=status,
        summary=_report_summary(doc, status, failure),
        slots=slot,
        lanes=tuple(
            attrs.evolve(lanes[k], note=", ".join(sorted(notes.get(k, ())))) for k in ordered
        ),
        marks=tuple(marks),
        links=tuple(links),
        series=tuple(
            Series(f"partition {p}", f"partition {p}", ("epoch", "frontier"), tuple(pts))
            for p, pts in sorted(points.items())
        ),
        bands=tuple(bands),
        violation=violation,
        legend=legend(marks, _REPORT_MEANINGS),
        abbreviations=abbreviations(marks),
    )


def _interleave(
    text: str,
    worker: int,
    first: int,
    last: int,
    event_slot: Mapping[tuple[int, str, int], int],
    marks: Sequence[Mark],
) -> Link | None:
    """Where an interleave (``"claim call 1 after: stop, replacement 4"``) struck."""
    m = _INTERLEAVE.match(text)
    if m is None:
        return None  # e.g. "replacement 3 failed: ...": shown on the attempt's marks
    operation, call, at, what = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    parts = [w.strip() for w in what.split(",")]
    stop = "stop" in parts
    target = next((p for p in parts if p.startswith("replacement ")), None)
    slot = event_slot.get((worker, operation, call), last)
    target_lane = target_slot = None
    if target is not None:
        target_lane = _lane_key(int(target.split()[-1]))
        target_slot = next(
            (mk.slot for mk in marks if mk.lane == target_lane and first <= mk.slot <= last),
            None,
        )
    label = f"{at} {operation} call {call}: {what}"
    return Link(slot, _lane_key(worker), label, stop, target_lane, target_slot)


def _report_summary(
    doc: dict[str, Any], status: str, failure: str | None
) -> tuple[tuple[str, str], ...]:
    out = [("status", status)]
    if failure:
        out.append(("failure", failure))
    if doc.get("predicted"):
        out.append(("oracle predicts", str(doc["predicted"])))
    if doc.get("seed") is not None:
        out.append(("seed", str(doc["seed"])))
    toolchain = doc.get("toolchain")
    if isinstance(toolchain, dict):
        out.append(("toolchain", ", ".join(f"{k} {v}" for k, v in sorted(toolchain.items()))))
    counts = doc.get("counts")
    if isinstance(counts, dict):
        out.append(
            (
                "faults",
                f"{counts.get('selected_faults', 0)} selected, "
                f"{counts.get('interleaves', 0)} interleaves",
            )
        )
    return tuple(out)


# -- protocol counterexamples -----------------------------------------------------------

_PROTOCOL_KINDS = {
    "commit": (
        "AcceptSuccess",
        "AcceptPermanentFailure",
        "AcceptRetryableFailureWithBudget",
        "AcceptRetryableFailureExhausted",
        "PersistCheckpoint",
        "RecordCredentialWrite",
        "CommitCredentialVersion",
    ),
    "fenced": (
        "RejectOutcome",
        "ExpireLease",
        "ExpireReservation",
        "ReapLostAttempt",
        "InvalidateCheckpoint",
        "FenceFailedCredentialWrite",
        "AbandonFencedCredentialIntent",
    ),
    "canceled": ("RequestCancel", "FinalizeCancel", "PublishCancelNotice", "CooperativeStop"),
    "abort": ("CrashWorker", "DropLink", "LoseCoordinationState"),
}
_ACTION_KIND = {a: kind for kind, actions in _PROTOCOL_KINDS.items() for a in actions}


def protocol_kind(action: str) -> str:
    """The colour of a spec action's mark (a commit, a fence or expiry, cancellation, a
    fault, any other step)."""
    return _ACTION_KIND.get(action, "step")


def _protocol_lane(params: Mapping[str, Any]) -> tuple[str, str]:
    if "a" in params:
        return f"attempt {params['a']}", "attempt"
    if "c" in params:
        return f"credential intent {params['c']}", "credential intent"
    if "w" in params:
        return f"worker {params['w']}", "worker"
    if "j" in params:
        return f"job {params['j']}", "job"
    return "system", "system"


def from_protocol(doc: Any, source: str) -> Timeline:
    """The timeline of a ``remora-protocol-trace-v1`` counterexample."""
    path = "counterexample"
    steps = _items(doc, path, "steps")
    if not steps:
        raise InvalidInput(f"{path}.steps: empty")
    violation_doc = _get(doc, path, "violation", dict)
    vkind = _get(violation_doc, f"{path}.violation", "kind", str)
    vname = _get(violation_doc, f"{path}.violation", "name", str)
    detail = str(violation_doc.get("detail") or "")
    cycle = doc.get("cycle_start")
    state = dict(_get(steps[0][1], steps[0][0], "state", dict))
    lanes: dict[str, Lane] = {}
    marks: list[Mark] = []
    points: dict[str, list[tuple[int, int, int]]] = {}
    last_lane: str | None = None
    rows: list[tuple[str, ...]] = [("step", "action", "parameters", "changes")]
    history: list[dict[str, Any]] = []
    for slot, (where, step) in enumerate(steps):
        action = _get(step, where, "action", str)
        params = _get(step, where, "params", dict)
        changes = step.get("changes") or {}
        if not isinstance(changes, dict):
            raise InvalidInput(f"{where}.changes: expected an object")
        for var, value in changes.items():
            if isinstance(value, dict) and isinstance(state.get(var), dict):
                state[var] = {**state[var], **value}
            else:
                state[var] = value
        history.append({var: dict(v) if isinstance(v, dict) else v for var, v in state.items()})
        key, kind_label = _protocol_lane(params)
        lanes.setdefault(key, Lane(key, key, kind_label))
        last_lane = key
        shown = ", ".join(f"{k}={v}" for k, v in params.items())
        details = [("step", f"{slot}: {action}({shown})" if shown else f"{slot}: {action}")]
        details += [(var, json.dumps(value, sort_keys=True)) for var, value in changes.items()]
        marks.append(Mark(slot, key, protocol_kind(action), action, False, tuple(details)))
        rows.append(
            (
                str(slot),
                action,
                shown,
                "; ".join(f"{var} = {json.dumps(v, sort_keys=True)}" for var, v in changes.items()),
            )
        )
        tokens, checkpoints = state.get("currentToken"), state.get("checkpoint")
        if isinstance(tokens, dict) and isinstance(checkpoints, dict):
            for job in sorted(tokens):
                t, c = tokens.get(job), checkpoints.get(job)
                if isinstance(t, int) and isinstance(c, int):
                    points.setdefault(job, []).append((slot, t, c))
    slots = len(steps)
    bands: list[Band] = []
    if isinstance(cycle, int) and 0 <= cycle < slots:
        bands.append(Band(cycle, slots - 1, "cycle (repeats forever)", "cycle"))
    label = f"{vkind} {vname}"
    last_action = rows[-1]
    final_changes = steps[-1][1].get("changes") or {}
    facts = [
        ("property", f"{vname} ({vkind})"),
        ("step", f"{last_action[0]}: {last_action[1]}({last_action[2]})"),
    ]
    if last_lane is not None:
        facts.append(("involved", last_lane))
    if detail:
        facts.append(("detail", detail))
    if last_action[3]:
        facts.append(("the step changed", last_action[3]))
    return Timeline(
        title=label,
        source=source,
        status="VIOLATED",
        summary=(
            ("violation", label),
            ("detail", detail),
            ("config", str((_opt(doc, path, "config", dict) or {}).get("name", "?"))),
            ("steps", str(slots - 1)),
        ),
        slots=slots,
        lanes=tuple(sorted(lanes.values(), key=lambda lane: (lane.note != "system", lane.key))),
        marks=tuple(marks),
        links=(),
        series=tuple(
            Series(f"job {job}", f"job {job}", ("token", "checkpoint"), tuple(pts))
            for job, pts in sorted(points.items())
        ),
        bands=tuple(bands),
        violation=Violation(slots - 1, last_lane, label, detail, tuple(facts)),
        legend=legend(marks, _PROTOCOL_MEANINGS),
        abbreviations=abbreviations(marks),
        table=tuple(rows),
        state_rows=_state_rows(history, final_changes),
    )


_CAUSE_VARIABLES = ("leaseState", "reservation", "authority", "currentToken", "phase")
"""Variables drawn over time beside those the violating step changed: who holds what."""
MAX_STATE_ROWS = 14


def _state_rows(
    history: Sequence[dict[str, Any]], final: Mapping[str, Any]
) -> tuple[StateRow, ...]:
    """The state variables that make the property false, over time: every (variable, key)
    the violating step changed, then the leases, reservations, authority, token and phase."""
    if not history:
        return ()
    last = history[-1]
    tracked: list[tuple[str, str | None]] = []
    for var in [*final, *(v for v in _CAUSE_VARIABLES if v not in final)]:
        value = last.get(var)
        keys = sorted(value) if isinstance(value, dict) else [None]
        tracked += [(var, k) for k in keys if (var, k) not in tracked]
    out = []
    for var, k in tracked[:MAX_STATE_ROWS]:
        segments: list[tuple[int, int, str]] = []
        for slot, st in enumerate(history):
            v = st.get(var)
            if k is not None:
                v = v.get(k) if isinstance(v, dict) else None
            text = "" if v is None else (v if isinstance(v, str) else json.dumps(v))
            if segments and segments[-1][2] == text:
                segments[-1] = (segments[-1][0], slot, text)
            else:
                segments.append((slot, slot, text))
        label = var if k is None else f"{var}[{k}]"
        out.append(
            StateRow(
                _short_records(label),
                tuple((a, b, _short_records(text)) for a, b, text in segments),
            )
        )
    return tuple(out)


_ATTEMPT_RECORD = re.compile(r"\[job \|-> ([^,\]]+), token \|-> (\d+)\]")


def _short_records(text: str) -> str:
    """``[job |-> j1, token |-> 2]`` written as ``j1#2`` (the runtime's own spelling)."""
    return _ATTEMPT_RECORD.sub(r"\1#\2", text)


# -- the page ---------------------------------------------------------------------------


def _asset(name: str) -> str:
    return resources.files("remora.sim").joinpath(name).read_text(encoding="utf-8")


def render(timeline: Timeline) -> str:
    """The self-contained HTML page (data, style and script inline)."""
    data = json.dumps(timeline.to_json(), sort_keys=True, ensure_ascii=True)
    data = data.replace("</", "<\\/")  # never closes the script element early
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>remora show: {escape(timeline.title)}</title>\n"
        f"<style>\n{_asset('timeline.css')}</style>\n</head>\n<body>\n"
        "<noscript>This page draws the run with JavaScript.</noscript>\n"
        '<main id="app"></main>\n'
        f'<script type="application/json" id="remora-timeline">{data}</script>\n'
        f"<script>\n{_asset('timeline.js')}</script>\n</body>\n</html>\n"
    )


__all__ = [
    "IO_KINDS",
    "PROTOCOL_FORMAT",
    "REPORT_IMPLEMENTATION",
    "Lane",
    "Mark",
    "Link",
    "Series",
    "Band",
    "Bar",
    "StateRow",
    "Violation",
    "Timeline",
    "kind_of",
    "from_report",
    "from_protocol",
    "render",
    "short_label",
    "legend",
    "abbreviations",
    "protocol_kind",
]
