"""Hypothesis walks of the Remora.tla port on constants too large to explore exhaustively.

Constants: Jobs = {j1, j2, j3}, Workers = {w1, w2, w3}, InitialWorkers = {w1, w2} (so that
``StartIncarnation`` has work), MaxAttempts = 3, MaxProgress = 3, FaultsEnabled with all three
FaultServices, MaxCoordLosses = 2, MaxPartitions = 3 (enough for a coordination wipe to meet
a link drop and a re-partition of a recovered link), MaxCredentialIntents = 2; every limit
not named is 1, as in the issue's named configurations.

One rule per action family (the TLA+ action name): its precondition is that some instance of
the action is enabled, and the rule draws its parameters from the enabled instances only.
Every step checks every invariant on the new state and every action property on the step;
teardown runs the fault-free fair drain, which must reach ``SystemQuiescent`` (checking the
invariants on the way).  A failing walk notes its action sequence as a
``remora-protocol-trace-v1`` JSON document, the explorer's counterexample format.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from remora.protocol.liveness import DrainError, fair_drain
from remora.protocol.spec import (
    ACTION_PROPERTIES,
    INVARIANTS,
    Constants,
    Remora,
    State,
    Step,
)
from remora.protocol.trace import ACTION_PARAMS, trace_document

WALK_CONSTANTS = Constants(
    Jobs=("j1", "j2", "j3"),
    Workers=("w1", "w2", "w3"),
    InitialWorkers=frozenset({"w1", "w2"}),
    MaxAttempts=3,
    MaxProgress=3,
    FaultsEnabled=True,
    FaultServices=frozenset({"Coordination", "Durable", "Target"}),
    MaxCoordLosses=2,
    MaxPartitions=3,
    MaxCredentialIntents=2,
)

DRAIN_BOUND = 2000


class WalkFailure(AssertionError):
    """A walk broke an invariant, an action property or the drain (message = trace JSON)."""


class ProtocolWalk(RuleBasedStateMachine):
    """Random walks of ``Next``; subclasses may swap :attr:`MODEL` for a mutated spec."""

    MODEL: ClassVar[type[Remora]] = Remora
    CONSTANTS: ClassVar[Constants] = WALK_CONSTANTS

    def __init__(self) -> None:
        super().__init__()
        self.model = self.MODEL(self.CONSTANTS)
        self.states: list[State] = [self.model.Init()[0]]
        self.steps: list[Step] = []
        self._enabled: dict[str, list[tuple[Step, State]]] | None = None
        self._by_name: dict[str, list[Step]] = {}
        for step in self.model.NextSteps():
            self._by_name.setdefault(step.name, []).append(step)

    # -- helpers ---------------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self.states[-1]

    def enabled(self, name: str) -> list[tuple[Step, State]]:
        if self._enabled is None:
            self._enabled = {}
        got = self._enabled.get(name)
        if got is None:
            got = []
            for step in self._by_name.get(name, []):
                t = self.model.apply(self.state, step)
                if t is not None:
                    got.append((step, t))
            self._enabled[name] = got
        return got

    def fail(self, kind: str, name: str, detail: str) -> None:
        doc = trace_document(
            self.model,
            "hypothesis-walk",
            self.states,
            self.steps,
            {"kind": kind, "name": name, "detail": detail},
        )
        text = json.dumps(doc)
        note(text)
        raise WalkFailure(f"{kind} {name} violated; trace JSON:\n{text}")

    def take(self, step: Step, t: State) -> None:
        s = self.state
        for prop in ACTION_PROPERTIES:
            if not getattr(self.model, prop)(s, t):
                self.states.append(t)
                self.steps.append(step)
                self.fail("action-property", prop, f"{step.name} violates {prop}")
        self.states.append(t)
        self.steps.append(step)
        self._enabled = None
        self.check_state()

    def check_state(self) -> None:
        for inv in INVARIANTS:
            if not getattr(self.model, inv)(self.state):
                self.fail("invariant", inv, f"{inv} is FALSE")

    @invariant()
    def invariants_hold(self) -> None:
        self.check_state()

    def teardown(self) -> None:
        try:
            states, steps = fair_drain(self.model, self.state, DRAIN_BOUND)
        except DrainError as exc:
            self.states += exc.states[1:]
            self.steps += exc.steps
            self.fail("drain", "SystemQuiescent", str(exc))
            return
        for st_, t in zip(steps, states[1:], strict=True):
            self.take(st_, t)


def _make_rule(name: str) -> Any:
    @precondition(lambda self: bool(self.enabled(name)))
    @rule(data=st.data())
    def step(self: ProtocolWalk, data: st.DataObject) -> None:
        choices = self.enabled(name)
        step_, t = data.draw(st.sampled_from(choices), label=name)
        self.take(step_, t)

    step.__name__ = name
    step.__qualname__ = f"ProtocolWalk.{name}"
    return step


for _name in ACTION_PARAMS:
    setattr(ProtocolWalk, _name, _make_rule(_name))

WALK_SETTINGS = settings(
    stateful_step_count=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

TestProtocolWalk = ProtocolWalk.TestCase
TestProtocolWalk.settings = WALK_SETTINGS


# -- the walk can fail ------------------------------------------------------------------------


class _CrashCorruptsProgress(Remora):
    """Planted bug (wrong update): a crash writes an out-of-range progress for the crashed
    worker's attempts."""

    def CrashWorker(self, s: State, w: int) -> State | None:
        t = super().CrashWorker(s, w)
        if t is None:
            return None
        return t._replace(
            attemptProgress=tuple(
                self.MaxProgress + 1 if t.attemptWorker[a] == w else p
                for a, p in enumerate(t.attemptProgress)
            )
        )


class _MutantWalk(ProtocolWalk):
    MODEL = _CrashCorruptsProgress


def test_walk_reports_a_planted_bug_as_trace_json() -> None:
    with pytest.raises(WalkFailure) as exc:
        run_state_machine_as_test(
            _MutantWalk,
            settings=settings(
                max_examples=300,
                stateful_step_count=60,
                database=None,
                derandomize=True,
                phases=(Phase.generate,),  # the first failing walk is enough here
                suppress_health_check=list(HealthCheck),
            ),
        )
    text = str(exc.value)
    doc = json.loads(text.split("trace JSON:\n", 1)[1])
    assert doc["format"] == "remora-protocol-trace-v1"
    assert doc["violation"]["name"] == "TypeOK"
    assert any(s["action"] == "CrashWorker" for s in doc["steps"])
