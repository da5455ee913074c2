"""Continuous safety checks: observed durable state against the oracle, over time."""

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
    """

    def __init__(self, oracle: Oracle) -> None:
        self.oracle = oracle
        self._last: dict[int, tuple[int, int]] = {}
        self._intents: dict[tuple[int, str, int], str] = {}
        self._bodies: dict[str, Any] = {}

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

    def check(self, obs: Observed) -> list[Violation]:
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
        present = {(p, s, v): b for s, v, b in obs.intents}
        for key, body in self._intents.items():
            if key[0] == p and present.get(key) != body:
                bad(
                    "intent-mutated",
                    f"intent {key[1]} v{key[2]} was {body}, now {present.get(key)}",
                )
        for key, body in present.items():
            self._intents.setdefault(key, body)


def _first_difference(got: Sequence[object], want: Sequence[object]) -> str:
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return f"entry {i}: got {g!r}, expected {w!r}"
    return f"got {len(got)} entries, expected {len(want)}"
