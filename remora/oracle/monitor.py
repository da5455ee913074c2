"""Continuous safety checks: observed durable state against the oracle, over time.

A run checks its store after every I/O call, so checking a partition's whole history at each
look would make a run quadratic in its records.  The monitor therefore follows a partition
*incrementally*: once a look at the whole state has passed (:meth:`Monitor.check`), later
looks need only what was appended since (:meth:`Monitor.check_tail`), checked against the
oracle's rows at the same positions.  Anything the incremental rules cannot vouch for — a
count that went down, a regression, a row that differs — sends the look back to the whole
state, so a violation is reported exactly as a whole look would report it, at the same look.
What incremental looks cannot see is a row changed *in place* below the mark; the monitor
therefore re-checks the whole state whenever a partition has doubled since its last whole
check (linear in total), and the run ends with a whole check of every partition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from remora.oracle.model import Oracle, Violation


class Observed(NamedTuple):
    """One partition's durable state as plain data (bodies as JSON text)."""

    partition: int
    epoch: int
    frontier: int
    outbox: Sequence[tuple[int, str, int, str, str, int]]  # seq, subject, version, op, body, offset
    quarantine: Sequence[tuple[int, str | None, str]]  # offset, subject, reason
    intents: Sequence[tuple[str, int, str]]  # subject, version, body


class ObservedTail(NamedTuple):
    """What one partition appended since a mark, as plain data: epoch and frontier, the
    rows at positions ``since`` and after, and the totals (rows shaped as in
    :class:`Observed`)."""

    partition: int
    epoch: int
    frontier: int
    since: tuple[int, int, int]  # positions in (outbox, quarantine, intents)
    outbox: Sequence[tuple[int, str, int, str, str, int]]
    quarantine: Sequence[tuple[int, str | None, str]]
    intents: Sequence[tuple[str, int, str]]
    counts: tuple[int, int, int]  # totals of (outbox, quarantine, intents)


REVERIFY_MIN = 256
"""A partition is re-checked whole when it holds at least this many rows and twice as many
as at its last whole check (so whole checks cost O(rows) in total)."""


class _Verified:
    """What a passing look established about one partition: its first ``counts`` rows are
    right, plus the running state the incremental rules continue from."""

    __slots__ = ("accounted", "counts", "full_at", "versions")

    def __init__(
        self,
        counts: tuple[int, int, int],
        versions: dict[str, int],
        accounted: set[int],
        full_at: int,
    ) -> None:
        self.counts = counts
        self.versions = versions  # a subject's last outbox version (amendment rules)
        self.accounted = accounted  # offsets in outbox or quarantine (no model only)
        self.full_at = full_at  # rows at the last whole check


class Monitor:
    """Checks observed states against an :class:`Oracle` and against earlier observations.

    Properties (each a stable violation ``kind``):

    * ``frontier-invalid`` — a frontier is 0 or one past a visible record's offset;
    * ``frontier-regressed`` / ``epoch-regressed`` — durable progress and fencing epochs
      never go back;
    * ``outbox-seq`` — outbox ``seq`` is contiguous from 1 per partition;
    * ``outbox-version`` — a subject's outbox versions increase by exactly one (the
      amendment rules only);
    * ``progress-disagreement`` — every visible record below the frontier is accounted for
      exactly once (outbox or quarantine) and nothing at or above it is;
    * ``outbox-mismatch`` / ``quarantine-mismatch`` / ``intent-mismatch`` — the outputs equal
      the oracle's for the frontier (with a model: the amendment rules or a user's);
    * ``intent-mutated`` — a committed intent never changes or disappears.

    :meth:`check` looks at a whole state; :meth:`check_tail` at what was appended since
    :meth:`mark` (module docstring).
    """

    def __init__(self, oracle: Oracle) -> None:
        self.oracle = oracle
        self._last: dict[int, tuple[int, int]] = {}
        self._intents: dict[int, dict[tuple[str, int], str]] = {}
        self._bodies: dict[str, Any] = {}
        self._verified: dict[int, _Verified] = {}

    def _body(self, text: str) -> Any:
        try:
            return self._bodies[text]
        except KeyError:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = ("<not JSON>", text)
            self._bodies[text] = parsed
            return parsed

    def mark(self, partition: int) -> tuple[int, int, int] | None:
        """The positions (outbox, quarantine, intents) up to which ``partition`` is verified:
        a :meth:`check_tail` from there suffices.  None: the next look must be whole (never
        looked at, or its last look found a violation)."""
        v = self._verified.get(partition)
        return None if v is None else v.counts

    def check_tail(self, tail: ObservedTail, whole: Callable[[], Observed]) -> list[Violation]:
        """A look at what ``tail`` appended since :meth:`mark`.  When the incremental rules
        cannot vouch for it (or a whole re-check is due), ``whole()`` is read and
        checked whole by :meth:`check` instead — so the violations are exactly a whole look's."""
        v = self._verified.get(tail.partition)
        if (
            v is None
            or tail.since != v.counts
            or sum(tail.counts) >= max(REVERIFY_MIN, 2 * v.full_at)
        ):
            return self.check(whole())
        if not self._tail_holds(v, tail):
            return self.check(whole())
        return []

    def _tail_holds(self, v: _Verified, t: ObservedTail) -> bool:
        """Whether the rows ``t`` appended keep every property, given that the rows before
        it did; commits the running state only when they do."""
        p, oracle = t.partition, self.oracle
        o0, q0, i0 = t.since
        n_out, n_q, n_i = t.counts
        if (len(t.outbox), len(t.quarantine), len(t.intents)) != (n_out - o0, n_q - q0, n_i - i0):
            return False  # rows disappeared, or an inconsistent read
        last_epoch, last_frontier = self._last.get(p, (0, 0))
        if t.epoch < last_epoch or t.frontier < last_frontier:
            return False
        if not oracle.is_valid_frontier(p, t.frontier):
            return False
        if any(e[0] != o0 + k + 1 for k, e in enumerate(t.outbox)):
            return False
        versions: dict[str, int] = {}
        if oracle.amendment_rules:
            for _, subject, version, *_ in t.outbox:
                if version != versions.get(subject, v.versions.get(subject, 0)) + 1:
                    return False
                versions[subject] = version
        fresh: list[int] = []
        if oracle.checks_outputs:
            if oracle.expected_counts(p, t.frontier) != t.counts:
                return False
            want = oracle.expected_between(p, t.since, t.counts)
            for (s, subject, version, op, b, off), e in zip(t.outbox, want.outbox, strict=True):
                got = (s, subject, version, op, self._body(b), off)
                if got != (e.seq, e.subject, e.version, e.op, e.body, e.offset):
                    return False
            for q, w in zip(t.quarantine, want.quarantine, strict=True):
                if tuple(q) != (w.offset, w.subject, w.reason):
                    return False
            for (subject, version, b), i in zip(t.intents, want.intents, strict=True):
                if (subject, version, self._body(b)) != (i.subject, i.version, i.body):
                    return False
        else:
            if n_out + n_q != oracle.processed_count(p, t.frontier):
                return False
            fresh = [e[5] for e in t.outbox] + [q[0] for q in t.quarantine]
            new = set(fresh)
            if len(new) != len(fresh) or not new.isdisjoint(v.accounted):
                return False
            if any(o >= t.frontier or not oracle.is_visible(p, o) for o in fresh):
                return False
        known = self._intents.setdefault(p, {})
        keys = [(subject, version) for subject, version, _ in t.intents]
        if len(set(keys)) != len(keys) or any(k in known for k in keys):
            return False
        # Everything holds: continue from here.
        self._last[p] = (t.epoch, t.frontier)
        for subject, version, b in t.intents:
            known[(subject, version)] = b
        v.versions.update(versions)
        v.accounted.update(fresh)
        v.counts = t.counts
        return True

    def check(self, obs: Observed) -> list[Violation]:
        """A look at one partition's whole state."""
        p = obs.partition
        out: list[Violation] = []

        def bad(kind: str, message: str) -> None:
            out.append(Violation(kind, p, f"partition {p}: {message}"))

        last_epoch, last_frontier = self._last.get(p, (0, 0))
        if obs.epoch < last_epoch:
            bad("epoch-regressed", f"epoch {obs.epoch} after {last_epoch}")
        if obs.frontier < last_frontier:
            bad("frontier-regressed", f"frontier {obs.frontier} after {last_frontier}")
        self._last[p] = (max(obs.epoch, last_epoch), max(obs.frontier, last_frontier))
        if not self.oracle.is_valid_frontier(p, obs.frontier):
            bad("frontier-invalid", f"frontier {obs.frontier} is not 0 or a visible offset + 1")

        seqs = [e[0] for e in obs.outbox]
        if seqs != list(range(1, len(seqs) + 1)):
            bad("outbox-seq", f"outbox seq {seqs} is not contiguous from 1")
        versions: dict[str, int] = {}
        for seq, subject, version, *_ in obs.outbox if self.oracle.amendment_rules else ():
            if version != versions.get(subject, 0) + 1:
                bad(
                    "outbox-version",
                    f"seq {seq}: {subject} version {version} after {versions.get(subject, 0)}",
                )
            versions[subject] = version

        accounted = [e[5] for e in obs.outbox] + [q[0] for q in obs.quarantine]
        processed = self.oracle.processed_count(p, obs.frontier)
        expected = self.oracle.expected(p, obs.frontier)
        want = sorted([e.offset for e in expected.outbox] + [q.offset for q in expected.quarantine])
        if not self.oracle.checks_outputs:  # no model: every visible offset, exactly once
            want = self.oracle.visible_below(p, obs.frontier)
        if sorted(accounted) != want or len(accounted) != processed:
            bad(
                "progress-disagreement",
                f"offsets accounted {sorted(accounted)} but frontier {obs.frontier} covers "
                f"{processed} visible records {want}",
            )

        if self.oracle.checks_outputs:
            self._check_outputs(obs, expected, bad)
        self._check_intents_immutable(p, obs, bad)
        if out:
            self._verified.pop(p, None)
        else:
            counts = (len(obs.outbox), len(obs.quarantine), len(obs.intents))
            self._verified[p] = _Verified(
                counts,
                versions,
                set() if self.oracle.checks_outputs else set(accounted),
                sum(counts),
            )
        return out

    def _check_outputs(self, obs: Observed, expected: Any, bad: Callable[[str, str], None]) -> None:
        """Outbox, quarantine and intents equal the model's (a model is needed)."""
        got_outbox = [(s, subj, v, op, self._body(b), off) for s, subj, v, op, b, off in obs.outbox]
        want_outbox = [
            (e.seq, e.subject, e.version, e.op, e.body, e.offset) for e in expected.outbox
        ]
        if got_outbox != want_outbox:
            bad("outbox-mismatch", _first_difference(got_outbox, want_outbox))
        got_q = [tuple(q) for q in obs.quarantine]
        want_q = [(q.offset, q.subject, q.reason) for q in expected.quarantine]
        if got_q != want_q:
            bad("quarantine-mismatch", _first_difference(got_q, want_q))
        got_i = [(s, v, self._body(b)) for s, v, b in obs.intents]
        want_i = [(i.subject, i.version, i.body) for i in expected.intents]
        if got_i != want_i:
            bad("intent-mismatch", _first_difference(got_i, want_i))

    def _check_intents_immutable(
        self, p: int, obs: Observed, bad: Callable[[str, str], None]
    ) -> None:
        present = {(s, v): b for s, v, b in obs.intents}
        known = self._intents.setdefault(p, {})
        for key, body in known.items():
            if present.get(key) != body:
                bad(
                    "intent-mutated",
                    f"intent {key[0]} v{key[1]} was {body}, now {present.get(key)}",
                )
        for key, body in present.items():
            known.setdefault(key, body)


def _first_difference(got: Sequence[object], want: Sequence[object]) -> str:
    """The first entry where ``got`` and ``want`` differ, with both sides written out (a
    reader of the report or its picture sees the offending entry, not only a count)."""
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return f"entry {i}: got {g!r}, expected {w!r}"
    n = min(len(got), len(want))
    if len(got) < len(want):
        return (
            f"got {len(got)} entries, expected {len(want)}: entry {n} missing, expected {want[n]!r}"
        )
    return f"got {len(got)} entries, expected {len(want)}: entry {n} unexpected, got {got[n]!r}"


__all__ = [
    "Observed",
    "ObservedTail",
    "REVERIFY_MIN",
    "Monitor",
]
