"""The group machine's source rules (:mod:`tests.stateful.group_checks`) shown catching
planted bugs: each patch breaks one production function only inside the test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import remora.domain.amendment
import remora.worker.source_identity as identity
from remora.store import StateStore
from remora.testing.group_machine import GroupRunMachine
from tests.stateful import group_checks
from tests.stateful.group_checks import SHORT

CATCH = settings(SHORT, max_examples=300, stateful_step_count=20)
"""For the planted bugs: they stop at the first failure, so a larger budget costs only
when a bug is hard to reach.  The group's runs are real threads, so how far a run gets
before a stop varies with the machine's load, and with it how often a frontier moves
between two identity rules (what ``_record_nothing`` needs to show); with 80 examples a
full-suite CI run under load once missed it."""


class GroupRunChecked(group_checks.SourceChecks, GroupRunMachine):
    """The group machine with the rules under test here only (the suite's machine has
    more rules, each run less often: see ``test_group_failure_checks.py``)."""


def _record_nothing(store: StateStore, log: Any, partitions: Any = None) -> None:
    """record_source that forgets to move the last mark."""


def _accept_everything(store: StateStore, log: Any, **kwargs: Any) -> None:
    """check_source that never refuses a changed source (always as if ``accept``)."""
    kwargs["accept"] = True
    identity.check_source(store, log, **kwargs)


def _never_unstorable(doc: Any) -> bool:
    """The fold's unstorable-text walk that finds nothing (NUL reaches the store)."""
    return False


PLANTED: list[tuple[str, Callable[..., Any]]] = [
    ("tests.stateful.group_checks.record_source", _record_nothing),
    ("tests.stateful.group_checks.check_source", _accept_everything),
    ("remora.domain.amendment.unstorable_in", _never_unstorable),
]


@pytest.mark.parametrize(("target", "bug"), PLANTED, ids=[t.rsplit(".", 1)[1] for t, _ in PLANTED])
def test_the_group_machine_catches(target: str, bug: Callable[..., Any]) -> None:
    assert group_checks.AWKWARD_KINDS > 0 and remora.domain.amendment is not None
    with mock.patch(target, bug), pytest.raises(AssertionError):
        run_state_machine_as_test(GroupRunChecked, settings=CATCH)


def test_the_group_machine_passes_unpatched() -> None:
    run_state_machine_as_test(GroupRunChecked, settings=SHORT)
