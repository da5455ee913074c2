"""Planted bugs of the fused transaction — ``SendOutcome`` and ``ProcessOutcome`` of the
sending worker in one durable commit (:meth:`remora.jobs.worker.Worker.complete`,
:meth:`remora.jobs.transactions.Transactions.transact_steps`) — each killed by the job
machines (memory coordination + SQLite, refinement-checked step by step, refusals judged).

Each bug is planted by monkeypatching inside its test (never through a production flag),
on a subclass of the machine of its own (its reach is not the suite machine's): the steps
applied in the wrong order, the fused accept skipping its token compare, and a completer
that drops the accept when the COMMIT reply was lost and the log shows it committed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs.guards import Change
from remora.jobs.sql import Locked
from remora.jobs.transactions import Decide, Transactions
from remora.testing.job_machines import JobMachineBase, JobScheduleFailure
from tests.jobs.job_machines import RaceJobs, SpecSizedJobs
from tests.jobs.job_services import HUNT


@pytest.fixture(autouse=True)
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))


def hunted(base: type[JobMachineBase], examples: int = 60) -> str:
    """The failure ``base`` (on a subclass of its own) reports within the hunt's budget."""
    machine = type(f"{base.__name__}Planted", (base,), {})
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(machine, settings=settings(HUNT, max_examples=examples))
    return info.value.failure


def test_the_fused_steps_applied_in_the_wrong_order_are_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ProcessOutcome`` decided before ``SendOutcome`` in the fused transaction: with no
    outcome in flight yet it is refused, so the whole step is — where the spec enables
    ``SendOutcome``: the judgement of refusals kills it."""
    real = Transactions.transact_steps

    def wrong_order(
        self: Transactions, actor: Any, job_id: str, decides: Sequence[Decide], **kw: Any
    ) -> list[Change]:
        return real(self, actor, job_id, list(reversed(decides)), **kw)[::-1]

    monkeypatch.setattr(Transactions, "transact_steps", wrong_order)
    failure = hunted(SpecSizedJobs)
    assert failure.startswith("ERROR refused: complete"), failure


def test_a_fused_accept_that_skips_its_token_compare_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fused ``ProcessOutcome`` decided as if the sender still held the authority (its
    token compare skipped): a zombie's outcome, sent after its attempt was reaped and a
    replacement authorized, is accepted — a step the spec forbids (the race machine's
    stale outcome, completed in one transaction)."""
    real = Transactions.transact_steps

    def blind(decide: Decide) -> Decide:
        def decided(lk: Locked) -> Change:
            pending = [r.token for r in lk.attempts.values() if r.pending is not None]
            if not pending:
                return decide(lk)
            job = attrs.evolve(lk.job, authority=pending[0], current_token=pending[0])
            change = decide(attrs.evolve(lk, job=job))
            if change.job is None:
                return change
            return attrs.evolve(
                change, job=attrs.evolve(change.job, current_token=lk.job.current_token)
            )

        return decided

    def skipping(
        self: Transactions, actor: Any, job_id: str, decides: Sequence[Decide], **kw: Any
    ) -> list[Change]:
        return real(self, actor, job_id, [*decides[:-1], blind(decides[-1])], **kw)

    monkeypatch.setattr(Transactions, "transact_steps", skipping)
    failure = hunted(RaceJobs, 400)
    assert failure.startswith("ERROR refinement"), failure


def test_a_completer_that_drops_the_accept_on_a_lost_commit_reply_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lost COMMIT reply resolved from the log, but only the first step kept: the worker
    records ``SendOutcome`` alone and believes its outcome was not processed, while the
    durable store accepted it — alpha after the step is not the spec's successor of what
    was recorded."""
    real = Transactions.resolve_steps

    def dropping(
        self: Transactions, actor: Any, job_id: str, seqs: Sequence[int]
    ) -> list[tuple[Change, int]]:
        done = real(self, actor, job_id, seqs)
        return [done[0], *((Change("", {}), version) for _, version in done[1:])]

    monkeypatch.setattr(Transactions, "resolve_steps", dropping)
    failure = hunted(SpecSizedJobs, 400)
    assert failure.startswith("ERROR refinement"), failure
