"""The runtime's action vocabulary (:mod:`remora.jobs.actions`) against the spec port, and
the names the runtime records — in Python and in the Redis Lua scripts — against it.

The runtime is spec-free (it never imports :mod:`remora.protocol`), so nothing but these
tests ties its spelling of an action to the spec's: a renamed action in one place, or a
typo in a recording site or a script's ``log('…')``, would make trace validation reject
every run that takes the step, far from the cause.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from remora.jobs import redis_coordination
from remora.jobs.actions import PARAMS, Action
from remora.protocol.spec import Remora
from remora.protocol.trace import ACTION_PARAMS

JOBS = Path(__file__).resolve().parents[2] / "remora" / "jobs"
RECORDING_CALLS = {"record", "_op", "_log"}
"""Calls whose string arguments name the action a step records."""
NOT_SPEC = {
    "RaiseFloor",
    "MarkCancel",
    "MarkDown",
    "UnmarkDown",
    "PublishDown",
    "View",
    "Active",
    "ReserveBatch",  # logs a Reserve per job it reserves
    "CleanTerminalBatch",  # logs a CleanTerminalCoordination per job it cleans
}
"""Coordination scripts that are no spec action (mirror writes, reads): recorded with no
action name."""
CAMEL = re.compile(r"^[A-Z][a-z]+(?:[A-Z][a-z]+)+$")
LUA_LOG = re.compile(r"log\('([^']*)'")


def test_the_vocabulary_is_the_spec_ports_actions_with_their_signatures() -> None:
    spec_actions = set(ACTION_PARAMS) - {"Done"}  # Done: the port's terminal stutter
    assert {a.value for a in Action} == spec_actions
    for action in Action:
        assert PARAMS[action] == ACTION_PARAMS[action.value], action
        assert callable(getattr(Remora, action.value, None)), f"no spec action {action}"
    assert Action.RENEW_LEASE == "RenewLease"  # a str on the wire


def recorded_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of every action a recording call is given: a CamelCase string, or an
    ``Action.MEMBER`` (named ``Action.MEMBER``, checked against the enum's members)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in RECORDING_CALLS:
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if (
                isinstance(arg, ast.Attribute)
                and isinstance(arg.value, ast.Name)
                and arg.value.id == "Action"
            ):
                out.append((node.lineno, f"Action.{arg.attr}"))
            elif (
                isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and CAMEL.match(arg.value)
            ):
                out.append((node.lineno, arg.value))
    return out


def unknown_names(source: str) -> list[str]:
    known = {a.value for a in Action} | NOT_SPEC | {f"Action.{a.name}" for a in Action}
    return [f"line {n}: {name}" for n, name in recorded_names(source) if name not in known]


def test_every_recorded_action_name_is_in_the_vocabulary() -> None:
    found = 0
    for path in sorted(JOBS.glob("*.py")):
        source = path.read_text()
        found += len(recorded_names(source))
        assert unknown_names(source) == [], path.name
    assert found >= 20  # the check sees the recording sites


def test_every_lua_scripts_logged_action_is_in_the_vocabulary() -> None:
    scripts = redis_coordination.SCRIPTS
    logged = {name for text in scripts.values() for name in LUA_LOG.findall(text)}
    assert logged, "no log('…') found in the scripts"
    assert logged <= {a.value for a in Action}, logged - {a.value for a in Action}
    assert set(scripts) <= {a.value for a in Action} | NOT_SPEC, set(scripts)


@pytest.mark.parametrize(
    "planted",
    [
        'actor.record(seq, "RenewLeas", {"a": str(a)})\n',
        'self._op(actor, "ExpireLeases", {"a": str(a)}, a.job, body)\n',
        'actor.record(seq, Action.RENEW_LEAS, {"a": str(a)})\n',
    ],
)
def test_planted_a_misspelled_recording_site_is_caught(planted: str) -> None:
    assert unknown_names(planted) != []


def test_planted_a_misspelled_lua_log_is_caught() -> None:
    text = redis_coordination.SCRIPTS["RenewLease"].replace("log('RenewLease'", "log('Renew'")
    assert set(LUA_LOG.findall(text)) - {a.value for a in Action} == {"Renew"}
