"""Checks apart from stepping: one :class:`Checker` for everything a run is judged by.

It holds the independent oracle (:class:`remora.oracle.Oracle`) and its history
:class:`~remora.oracle.Monitor`, the ownership model, the view check and the status rules;
and it is the *single* place where durable store state is translated into the oracle's plain
data (:func:`raw_records` for the source, :func:`observed` for a partition's state).  A
mistake in that translation would blind every check at once — the production side and its
checker would share it — so there is exactly one, tested on its own.

Users: the scheduler (:mod:`remora.sim.scheduler`) asks it at every check point of a
simulated run; the Hypothesis state machines judge their runs through the same scheduler;
the evidence tests (PostgreSQL, concurrent threads, ``remora run`` processes) check live
stores and snapshots with :meth:`Checker.check_store`, :meth:`Checker.check_snapshot` and
:meth:`Checker.final_problems`.

Violations are :class:`remora.oracle.Violation` values; each ``kind`` is stable:

* the monitor's kinds (``frontier-invalid``, ``outbox-mismatch``, ...; see
  :class:`~remora.oracle.Monitor`);
* ``view-mismatch`` — the view delivered from the outbox differs from the oracle's;
* ``ownership-retained``, ``ownership-unassigned``, ``duplicate-owner``,
  ``local-frontier-mismatch`` — a lifetime holds what the ownership model forbids;
* ``io-after-stop``, ``repeated-decision``, ``stale-token-commit``, ``callback-after-stop``
  — what a lifetime did at one I/O call or callback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from remora.delivery import MemoryView, Relay
from remora.domain import SourceRecord
from remora.oracle import (
    AMENDMENT_RULES,
    Model,
    Monitor,
    Observed,
    ObservedTail,
    Oracle,
    RawRecord,
    Violation,
)
from remora.store import Backend, PartitionState, PartitionTail, StoreSnapshot, Token

_REJECTED = {
    "assign": ("retired",),
    "seek": ("retired",),
    "process": ("retired", "unseeked", "idle"),
}
"""The results a callback to a stopped or retired lifetime may end in."""

STATUSES = ("PASS", "PASS_WITH_EXCLUSIONS", "INCOMPLETE", "BLOCKED", "ERROR")
"""Boundary statuses, lowest precedence first."""


def raw_records(source: Iterable[SourceRecord]) -> list[RawRecord]:
    """The source as the oracle reads it."""
    return [RawRecord(r.partition, r.offset, r.visible, r.key, r.value) for r in source]


def observed(state: PartitionState) -> Observed:
    """One partition's durable state as the oracle's monitor reads it (bodies stay JSON
    text: the monitor parses them itself)."""
    return Observed(
        state.row.partition,
        state.row.epoch,
        state.row.frontier,
        [(e.seq, e.subject, e.version, e.op, e.body, e.offset) for e in state.outbox],
        [(q.offset, q.subject, q.reason) for q in state.quarantine],
        [(i.subject, i.version, i.body) for i in state.intents],
    )


def observed_tail(tail: PartitionTail) -> ObservedTail:
    """What a partition appended since a mark, as the monitor reads it (the same row shapes
    as :func:`observed`)."""
    return ObservedTail(
        tail.row.partition,
        tail.row.epoch,
        tail.row.frontier,
        tail.since,
        [(e.seq, e.subject, e.version, e.op, e.body, e.offset) for e in tail.outbox],
        [(q.offset, q.subject, q.reason) for q in tail.quarantine],
        [(i.subject, i.version, i.body) for i in tail.intents],
        tail.counts,
    )


@attrs.frozen
class Holding:
    """What one worker lifetime holds, as the ownership model sees it."""

    lifetime: int
    owned: Mapping[int, Token]  # saved tokens by partition
    state: str  # "live" | "stopped" | "retired"
    assigned: frozenset[int]


class Checker:
    """Judges durable state, ownership, the view and the final status of one source
    (module docstring)."""

    def __init__(
        self,
        source: Iterable[SourceRecord],
        partitions: Iterable[int] = (),
        model: Model = AMENDMENT_RULES,
    ) -> None:
        self.oracle = Oracle(raw_records(source), partitions, model)
        self.monitor = Monitor(self.oracle)
        self._seen: dict[int, object] = {}  # per partition: change count or state last checked

    @property
    def partitions(self) -> tuple[int, ...]:
        return self.oracle.partitions

    # -- durable state against the oracle ---------------------------------------------
    def check(self, state: PartitionState) -> list[Violation]:
        """One partition's state against the oracle and the history seen so far."""
        return self.monitor.check(observed(state))

    def check_store(
        self, backend: Backend, partitions: Iterable[int] | None = None
    ) -> list[Violation]:
        """The live state of ``partitions`` (default: the oracle's).  A partition that has
        not changed since it was last checked here is not checked again: a backend that
        counts its writes says so cheaply; for the others the state itself is compared."""
        found: list[Violation] = []
        for p in self.partitions if partitions is None else partitions:
            count = backend.change_count(p)
            if count is not None:
                if self._seen.get(p) == count:
                    continue
                self._seen[p] = count
                state = backend.partition_state(p)
            else:
                state = backend.partition_state(p)
                if self._seen.get(p) == state:
                    continue
                self._seen[p] = state
            found += self.check(state)
        return found

    def follow_store(
        self, backend: Backend, partitions: Iterable[int] | None = None
    ) -> list[Violation]:
        """:meth:`check_store`, reading and checking only what each partition appended
        since its last passing look (:meth:`Backend.partition_tail`, :meth:`Monitor.check_tail`):
        a run that looks after every call stays linear in its records.  Reports what
        :meth:`check_store` would, at the same look, for a store that only appends; a row
        changed in place below the mark is found by the monitor's periodic whole re-check
        and by :meth:`verify_store` at the end of a run."""
        found: list[Violation] = []
        for p in self.partitions if partitions is None else partitions:
            since = self.monitor.mark(p)
            if since is None:
                found += self.check_store(backend, (p,))
                continue
            count = backend.change_count(p)
            if count is not None and self._seen.get(p) == count:
                continue
            tail = observed_tail(backend.partition_tail(p, since))
            found += self.monitor.check_tail(tail, _whole(backend, p))
            if count is None:
                self._seen.pop(p, None)
            else:
                self._seen[p] = count
        return found

    def verify_store(
        self, backend: Backend, partitions: Iterable[int] | None = None
    ) -> list[Violation]:
        """A whole look at every partition, changed or not (the end of a run)."""
        found: list[Violation] = []
        for p in self.partitions if partitions is None else partitions:
            count = backend.change_count(p)
            state = backend.partition_state(p)
            self._seen[p] = state if count is None else count
            found += self.check(state)
        return found

    def check_snapshot(self, snapshot: StoreSnapshot) -> list[Violation]:
        """Every partition of ``snapshot`` (and of the source) at its own frontier."""
        partitions = sorted(set(self.partitions) | {r.partition for r in snapshot.partitions})
        return [v for p in partitions for v in self.check(snapshot.partition_state(p))]

    def problems(self, snapshot: StoreSnapshot) -> list[str]:
        """:meth:`check_snapshot`, one line per violation (empty when safe)."""
        return [f"{v.kind}: {v.message}" for v in self.check_snapshot(snapshot)]

    # -- the view ---------------------------------------------------------------------
    def check_view(
        self, view: MemoryView, frontiers: Mapping[int, int] | None = None
    ) -> list[Violation]:
        """The delivered view against the oracle's view at ``frontiers`` (default: every
        partition complete).  Without a model there is no expected view: nothing to check."""
        if not self.oracle.checks_outputs:
            return []
        got = [
            (r.partition, r.subject, r.version, r.status, self.monitor._body(r.body))
            for r in view.rows()
        ]
        want = [tuple(r) for r in self.oracle.view(None if frontiers is None else dict(frontiers))]
        if got != want:
            return [Violation("view-mismatch", None, f"view {got} != expected {want}")]
        return []

    # -- the ownership model ----------------------------------------------------------
    def check_ownership(
        self, holdings: Iterable[Holding], installed: Callable[[int], Token]
    ) -> list[Violation]:
        """Lifecycle state against what each lifetime may hold: nothing once stopped or
        retired, only assigned partitions, never an epoch another lifetime holds, and the
        durable frontier under the installed epoch."""
        found: list[Violation] = []
        holders: dict[tuple[int, int], int] = {}
        tokens: dict[int, Token] = {}  # installed per partition, read once per check
        for h in holdings:
            if not h.owned:
                continue
            if h.state != "live":
                found.append(
                    Violation(
                        "ownership-retained",
                        min(h.owned),
                        f"lifetime {h.lifetime} is {h.state} but holds {sorted(h.owned)}",
                    )
                )
            extra = set(h.owned) - h.assigned
            if extra:
                found.append(
                    Violation(
                        "ownership-unassigned",
                        min(extra),
                        f"lifetime {h.lifetime} holds {sorted(extra)} it is not assigned",
                    )
                )
            for p, token in h.owned.items():
                other = holders.setdefault((p, token.epoch), h.lifetime)
                if other != h.lifetime:
                    found.append(
                        Violation(
                            "duplicate-owner",
                            p,
                            f"lifetimes {other} and {h.lifetime} both hold epoch {token.epoch}",
                        )
                    )
                if p not in tokens:
                    tokens[p] = installed(p)
                now = tokens[p]
                if token.epoch == now.epoch and token.frontier != now.frontier:
                    found.append(
                        Violation(
                            "local-frontier-mismatch",
                            p,
                            f"lifetime {h.lifetime} holds frontier {token.frontier}, durable "
                            f"is {now.frontier}",
                        )
                    )
        return found

    # -- one call or callback of a lifetime ---------------------------------------------
    def check_caller(
        self, lifetime: int, state: str, operation: str, partition: int
    ) -> list[Violation]:
        """A lifetime issuing I/O must be live."""
        if state == "live":
            return []
        message = f"lifetime {lifetime} ({state}) issued a {operation} call"
        return [Violation("io-after-stop", partition, message)]

    def check_submission(
        self, lifetime: int, partition: int, held: Token, offset: int, installed: Token
    ) -> list[Violation]:
        """The current owner never resubmits a record below the durable frontier (a decision
        already committed)."""
        if held.epoch == installed.epoch and offset < installed.frontier:
            message = (
                f"lifetime {lifetime}, the current owner, resubmitted offset {offset} below "
                f"the durable frontier {installed.frontier}"
            )
            return [Violation("repeated-decision", partition, message)]
        return []

    def check_commit(
        self, lifetime: int, partition: int, held: Token | None, at_effect: Token | None
    ) -> list[Violation]:
        """A process that committed held the token installed when its effect ran."""
        if held is None or held != at_effect:
            message = f"lifetime {lifetime} committed with {held} while {at_effect} was installed"
            return [Violation("stale-token-commit", partition, message)]
        return []

    def check_rejected(
        self, lifetime: int, actor: str, partition: int | None, result: str
    ) -> list[Violation]:
        """A callback to a stopped or retired lifetime ends rejected (or finds nothing)."""
        allowed = _REJECTED.get(actor)
        if allowed and result not in allowed:
            message = (
                f"lifetime {lifetime} was stopped or retired, yet its {actor} ended "
                f"{result!r} instead of being rejected"
            )
            return [Violation("callback-after-stop", partition, message)]
        return []

    # -- status rules -----------------------------------------------------------------
    def summary(
        self, backend: Backend, view: MemoryView, partitions: Sequence[int], violated: bool
    ) -> dict[str, Any]:
        """Status, per-partition boundary and diagnostics of the current state."""
        boundary = []
        diagnostics = []
        for p in partitions:
            state = backend.partition_state(p)
            frontier = state.row.frontier
            visible = self.oracle.visible_count(p)
            processed = self.oracle.processed_count(p, frontier)
            delivered = view.delivered(p)
            reasons: dict[str, int] = {}
            for q in state.quarantine:
                reasons[q.reason] = reasons.get(q.reason, 0) + 1
            complete = processed == visible and delivered == len(state.outbox)
            boundary.append(
                {
                    "partition": p,
                    "epoch": state.row.epoch,
                    "frontier": frontier,
                    "end": self.oracle.end_frontier(p),
                    "visible": visible,
                    "processed": processed,
                    "outbox": len(state.outbox),
                    "delivered": delivered,
                    "quarantine": dict(sorted(reasons.items())),
                    "complete": complete,
                }
            )
            if processed < visible:
                diagnostics.append(
                    f"partition {p}: {visible - processed} visible records unprocessed "
                    f"from frontier {frontier}"
                )
            if delivered < len(state.outbox):
                diagnostics.append(
                    f"partition {p}: {len(state.outbox) - delivered} outbox entries undelivered"
                )
        return {
            "status": status(boundary, violated),
            "boundary": boundary,
            "diagnostics": diagnostics,
        }

    # -- the end of a run, for evidence tests -----------------------------------------
    def final_problems(self, snapshot: StoreSnapshot) -> list[str]:
        """Safety violations of ``snapshot``, plus what keeps it from being the finished
        run: a partition short of the source's end, or a view (delivered from its outbox
        through the real relay) that differs from the oracle's.  Empty when done right."""
        found = self.problems(snapshot)
        for p in self.partitions:
            frontier = snapshot.partition(p).frontier
            if frontier != self.oracle.end_frontier(p):
                found.append(
                    f"partition {p}: frontier {frontier}, source ends at "
                    f"{self.oracle.end_frontier(p)}"
                )
        view = MemoryView()
        Relay(snapshot, view).deliver(self.partitions)
        found += [f"{v.kind}: {v.message}" for v in self.check_view(view)]
        return found


def _whole(backend: Backend, partition: int) -> Callable[[], Observed]:
    """A whole read of ``partition``, for when a tail does not suffice."""
    return lambda: observed(backend.partition_state(partition))


def status(boundary: Sequence[Mapping[str, Any]], violated: bool) -> str:
    """The boundary status, highest precedence first: ERROR > BLOCKED > INCOMPLETE >
    PASS_WITH_EXCLUSIONS > PASS."""
    if violated:
        return "ERROR"
    if any(b["quarantine"].get("blocked") for b in boundary):
        return "BLOCKED"
    if not all(b["complete"] for b in boundary):
        return "INCOMPLETE"
    if any(b["quarantine"] for b in boundary):
        return "PASS_WITH_EXCLUSIONS"
    return "PASS"


def failure(status: str, first_violation: str | None) -> str | None:
    """The stable failure string of a non-PASS status (what the reducer preserves)."""
    if status == "PASS":
        return None
    if status == "ERROR":
        return f"ERROR {first_violation}"
    return status


__all__ = [
    "STATUSES",
    "raw_records",
    "observed",
    "observed_tail",
    "Holding",
    "Checker",
    "status",
    "failure",
]
