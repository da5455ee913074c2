"""The seeded schedule generator for the ``valid`` and ``conflict`` classes.

It uses only :meth:`random.Random.random` (the Mersenne Twister's raw output, which Python
keeps stable across versions), never ``choice``/``randrange``/``shuffle`` whose algorithms
may change, so a seed names the same trace on every Python and library version.  Replay never
calls the generator: a saved trace carries its source and steps explicitly.

* ``valid`` sources hold only amendments that apply: submits, corrections and withdrawals in
  revision order, plus invisible records and offset gaps.
* ``conflict`` sources additionally hold conflicts (wrong revision), rejections (an op the
  subject's state does not allow) and malformed values, which quarantine and block subjects.

Schedules mix starts, assigns, seeks, processing, revokes and stops over several lifetimes,
with fault selectors (every operation and allowed outcome, delays) and interleaves (before or
after the effect, stop, replacement).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any, TypeVar

from remora.domain import SourceRecord
from remora.errors import InvalidInput
from remora.faults import OUTCOMES_FOR, At, Operation
from remora.limits import MAX_ID, MAX_STEPS, MAX_TRACE_PARTITIONS
from remora.sim.trace import (
    OPERATIONS_OF,
    Actor,
    FaultSelector,
    Interleave,
    SimConfig,
    Step,
    Trace,
    current_toolchain,
)

T = TypeVar("T")

DEFAULT_STEPS = 64
GENERATED_CLASSES = ("valid", "conflict")


class _Rng:
    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def below(self, n: int) -> int:
        return min(int(self._r.random() * n), n - 1)

    def chance(self, p: float) -> bool:
        return self._r.random() < p

    def pick(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]


def _value(subject: str, op: str, revision: int, body: dict[str, Any]) -> bytes:
    return json.dumps(
        {"subject": subject, "op": op, "revision": revision, "body": body}, sort_keys=True
    ).encode()


def _bad_value(rng: _Rng, subject: str, revision: int, state: str) -> bytes:
    kind = rng.below(4)
    if kind == 0:  # conflict: an allowed op with the wrong revision
        op = "submit" if state == "absent" else "correct"
        wrong = revision + 2 + rng.below(3) if rng.chance(0.5) else max(revision - 1, 2)
        return _value(subject, op, wrong, {"n": rng.below(100)})
    if kind == 1:  # rejected: an op the state does not allow
        op = {"absent": "correct", "live": "submit", "withdrawn": "correct"}[state]
        return _value(subject, op, revision + 1, {"n": rng.below(100)})
    if kind == 2:  # malformed with a readable subject
        return json.dumps({"subject": subject, "op": "submit"}).encode()
    return rng.pick([b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe"])


def generate_source(rng: _Rng, trace_class: str, partitions: int) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    for p in range(partitions):
        subjects = [f"p{p}-s{i}" for i in range(2 + rng.below(3))]
        revision = dict.fromkeys(subjects, 0)
        state = dict.fromkeys(subjects, "absent")
        offset = 0
        for _ in range(6 + rng.below(9)):
            subject = rng.pick(subjects)
            if rng.chance(0.15):  # invisible: an aborted write, never processed
                value = _value(subject, "correct", revision[subject] + 7, {"aborted": True})
                records.append(SourceRecord(p, offset, False, subject, value))
            elif trace_class == "conflict" and rng.chance(0.25):
                value = _bad_value(rng, subject, revision[subject], state[subject])
                records.append(SourceRecord(p, offset, True, subject, value))
            else:
                if state[subject] == "withdrawn":
                    subject = f"p{p}-s{len(subjects)}"
                    subjects.append(subject)
                    revision[subject], state[subject] = 0, "absent"
                if state[subject] == "absent":
                    op = "submit"
                elif rng.chance(0.2):
                    op = "withdraw"
                else:
                    op = "correct"
                revision[subject] += 1
                state[subject] = "withdrawn" if op == "withdraw" else "live"
                body = {"n": rng.below(1000)} if op != "withdraw" else {}
                records.append(
                    SourceRecord(
                        p, offset, True, subject, _value(subject, op, revision[subject], body)
                    )
                )
            offset += 1 + (1 + rng.below(3) if rng.chance(0.2) else 0)
    return records


def _selectors(rng: _Rng, actor: str, next_id: list[int]) -> tuple[FaultSelector, ...]:
    operations = sorted(OPERATIONS_OF[actor], key=lambda o: o.value)
    out: list[FaultSelector] = []
    used: set[tuple[Operation, int]] = set()
    for _ in range(1 + (1 if rng.chance(0.3) else 0)):
        operation = rng.pick(operations)
        call = 1 if rng.chance(0.7) else 2 + rng.below(2)
        if (operation, call) in used:
            continue
        used.add((operation, call))
        outcome = rng.pick(sorted(OUTCOMES_FOR[operation], key=lambda o: o.value))
        delay = rng.pick([5, 20, 50]) if rng.chance(0.2) else 0
        interleave = None
        if rng.chance(0.3):
            stop = rng.chance(0.4)
            replacement = None
            if not stop or rng.chance(0.5):
                replacement = next_id[0]
                next_id[0] += 1
            interleave = Interleave(rng.pick([At.BEFORE, At.AFTER]), stop, replacement)
        out.append(FaultSelector(operation, call, outcome, delay, interleave))
    return tuple(out)


_PRIMARY = {
    "assign": {Operation.VALIDATE, Operation.CLAIM},
    "seek": {Operation.OBSERVE},
    "process": {Operation.PROCESS},
}


def generate_steps(rng: _Rng, partitions: int, budget: int) -> list[Step]:
    """A schedule that mostly makes sense (assign, then seek, then process) for the lifetimes
    it believes live, with occasional callbacks to stopped, retired or unstarted ones."""
    next_id = [1]
    steps: list[Step] = [Step("start", 0)]
    assigned: dict[int, set[int]] = {0: set()}  # believed-live lifetimes
    seeked: dict[int, set[int]] = {0: set()}
    everyone = [0]
    while len(steps) < budget:
        if not assigned or rng.chance(0.05):
            lifetime = next_id[0]
            next_id[0] += 1
            assigned[lifetime], seeked[lifetime] = set(), set()
            everyone.append(lifetime)
            steps.append(Step("start", lifetime))
            continue
        roll = rng.below(100)
        if roll < 88:
            worker = rng.pick(sorted(assigned))
        elif roll < 96:
            worker = rng.pick(everyone)
        else:
            worker = rng.below(next_id[0] + 1)
        p = rng.below(partitions)
        mine, ready = assigned.get(worker, set()), seeked.get(worker, set())
        roll = rng.below(100)
        actor: Actor
        if roll < 4:
            actor = "revoke"
        elif roll < 7:
            actor = "stop"
        elif p not in mine:
            actor = "assign" if roll < 80 else rng.pick(["seek", "process"])
        elif p not in ready:
            actor = "seek" if roll < 80 else rng.pick(["assign", "process"])
        else:
            actor = "process" if roll < 88 else rng.pick(["assign", "seek"])
        if actor in ("revoke", "stop"):
            steps.append(Step(actor, worker))
            if worker in assigned:
                if actor == "stop":
                    del assigned[worker], seeked[worker]
                else:
                    assigned[worker], seeked[worker] = set(), set()
            continue
        faults = _selectors(rng, actor, next_id) if rng.chance(0.3) else ()
        steps.append(Step(actor, worker, p, faults))
        if worker in assigned:
            if actor == "assign":
                mine.add(p)
                ready.discard(p)
            elif actor == "seek":
                ready.add(p)
        for f in faults:  # a replacement owns p once it runs; first calls are likely to run
            il = f.interleave
            if il is None or il.replacement is None:
                continue
            everyone.append(il.replacement)
            if f.call == 1 and f.operation in _PRIMARY[actor]:
                assigned[il.replacement], seeked[il.replacement] = {p}, {p}
        if any(f.interleave is not None and f.interleave.stop for f in faults):
            assigned.pop(worker, None)
            seeked.pop(worker, None)
    return steps[:budget]


def generate(
    seed: int,
    trace_class: str = "valid",
    steps: int = DEFAULT_STEPS,
    partitions: int | None = None,
    drain: bool = True,
) -> Trace:
    """The trace a seed names (see the module docstring)."""
    if trace_class not in GENERATED_CLASSES:
        raise InvalidInput(f"class {trace_class!r} is not one of {', '.join(GENERATED_CLASSES)}")
    if not 3 <= steps <= MAX_STEPS:
        raise InvalidInput(f"a generated schedule needs 3..{MAX_STEPS} steps (the trace bound)")
    if partitions is not None and not 1 <= partitions <= MAX_TRACE_PARTITIONS:
        raise InvalidInput(f"partitions must be in 1..{MAX_TRACE_PARTITIONS}")
    if not 0 <= seed <= MAX_ID:
        raise InvalidInput(f"the seed must be in 0..{MAX_ID}")
    rng = _Rng(seed)
    n_partitions = partitions if partitions is not None else 1 + rng.below(3)
    source = generate_source(rng, trace_class, n_partitions)
    schedule = generate_steps(rng, n_partitions, steps)
    config = SimConfig(partitions=n_partitions, trace_class=trace_class, steps=steps)
    return Trace(
        current_toolchain("remora.sim.generate"),
        seed,
        config,
        tuple(source),
        tuple(schedule),
        drain,
    )


__all__ = [
    "DEFAULT_STEPS",
    "GENERATED_CLASSES",
    "generate_source",
    "generate_steps",
    "generate",
]
