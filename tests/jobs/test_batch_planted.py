"""Planted bugs of the batched transitions — several jobs' spec steps in one durable
transaction (or one coordination call: the dispatcher's batched ``Reserve``), each row
guarded by its own condition
(:meth:`remora.jobs.transactions.Transactions.transact_batch`: the loop's dispatcher
authorizing the jobs it reserved, its :class:`~remora.jobs.settlement.BatchCompleter`
settling finished attempts) — each killed by the loop machine with every incarnation's
loop batching (:class:`AllBatched`: ``LoopParts(batches=(2,))``; the suite's machine
alternates batch 2 and 1), refinement-checked step by step, within 1,000 derandomized
examples.

Each bug is planted by monkeypatching inside its test (never through a production flag),
on a subclass of the machine of its own: a batch whose rows after the first skip their
token compare, a batched reservation whose jobs after the first skip the global-limit
check, and a completer that drops a row's accept when a batched COMMIT's reply was
lost and the log shows it committed.  Each test also checks that its mutant fired (it
changed what a batch decided or resolved): the kill comes from the batched path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs.coordination import MemoryCoordination
from remora.jobs.guards import Change, Guards
from remora.jobs.model import Outcome
from remora.jobs.sql import Locked
from remora.jobs.transactions import Batched, Decide, Refused, Transactions
from remora.sim.jobs.loops import LoopParts
from remora.sim.jobs.run import JobRun, JobRunFailure
from remora.sim.jobs.trace import JobConfig
from remora.testing.job_machines import JobMachineBase, JobScheduleFailure
from tests.jobs.job_machines import LoopJobs
from tests.jobs.job_services import HUNT
from tests.jobs.schedules import crossed_clean


@pytest.fixture(autouse=True)
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))


def hunted(base: type[JobMachineBase], examples: int) -> str:
    """The failure ``base`` (on a subclass of its own) reports within the hunt's budget."""
    machine = type(f"{base.__name__}Planted", (base,), {})
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(machine, settings=settings(HUNT, max_examples=examples))
    return info.value.failure


class AllBatched(LoopJobs):
    """The loop machine with every incarnation's loop batching (batch 2)."""

    loop_parts = LoopParts(batches=(2,))


def blind(decide: Decide, fired: list[str]) -> Decide:
    """``decide`` as if the attempt whose outcome is in flight held the job's authority
    (its token compare skipped); ``fired`` hears of each decision it changed."""

    def decided(lk: Locked) -> Change:
        pending = [r.token for r in lk.attempts.values() if r.pending is not None]
        if not pending:
            return decide(lk)
        job = attrs.evolve(lk.job, authority=pending[0], current_token=pending[0])
        change = decide(attrs.evolve(lk, job=job))
        if change.action != decide(lk).action:
            fired.append(change.action)
        if change.job is None:
            return change
        return attrs.evolve(
            change, job=attrs.evolve(change.job, current_token=lk.job.current_token)
        )

    return decided


def test_a_batch_whose_later_rows_skip_their_token_compare_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every row of a batch after the first decides its accept without the token compare:
    a stalled incarnation's stale attempt, completed in one batch with a current one, is
    accepted although a replacement holds the authority — a step the spec forbids."""
    real = Transactions.transact_batch
    fired: list[str] = []

    def skipping(self: Transactions, actor: Any, items: Sequence[Batched]) -> list[Any]:
        rows = [items[0]] + [
            attrs.evolve(it, decides=(*it.decides[:-1], blind(it.decides[-1], fired)))
            if len(it.decides) > 1
            else it
            for it in items[1:]
        ]
        return real(self, actor, rows)

    monkeypatch.setattr(Transactions, "transact_batch", skipping)
    failure = hunted(AllBatched, 1000)
    assert failure.startswith("ERROR refinement"), failure
    assert fired, "the kill did not come from a batch's skipped compare"


def test_a_completer_that_drops_an_accept_on_a_lost_batched_commit_reply_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch's lost COMMIT reply resolved from the log, but the last committed row keeps
    its first step alone: the worker records ``SendOutcome`` without the accept the
    durable store committed — alpha after the step is not the spec's successor of what was
    recorded."""
    real = Transactions.resolve_batch
    fired: list[str] = []

    def dropping(
        self: Transactions, actor: Any, jobs: str, seqs: dict[int, list[int]]
    ) -> dict[int, list[tuple[Change, int]] | Refused]:
        done = real(self, actor, jobs, seqs)
        committed = [i for i, got in done.items() if isinstance(got, list) and len(got) > 1]
        if committed:
            got = done[committed[-1]]
            assert isinstance(got, list)
            done[committed[-1]] = [got[0], *((Change("", {}), v) for _, v in got[1:])]
            fired.append(jobs)
        return done

    monkeypatch.setattr(Transactions, "resolve_batch", dropping)
    failure = hunted(AllBatched, 1000)
    assert failure.startswith("ERROR refinement"), failure
    assert fired, "the kill did not come from a batch's resolution"


class AllBatchedTight(AllBatched):
    """:class:`AllBatched` with a global limit of two (the suite's loop machine allows
    three, as many as its jobs: a third in flight is then rare)."""

    global_limit = 2


def test_a_batched_reservation_that_skips_the_global_limit_after_its_first_job_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One coordination call reserves up to N jobs (``reserve_batch``); planted: once the
    call has reserved a job, the later jobs' guard skips the global-limit check — a worker
    reserves a job although the jobs in flight are at the limit, a ``Reserve`` the spec
    does not enable."""
    real_batch = MemoryCoordination.reserve_batch
    real_can = Guards.can_reserve
    state = {"in_batch": False, "taken": 0}
    fired: list[str] = []

    def batch(self: MemoryCoordination, *args: Any, **kwargs: Any) -> list[tuple[str, str]]:
        state.update(in_batch=True, taken=0)
        try:
            return real_batch(self, *args, **kwargs)
        finally:
            state["in_batch"] = False

    def can(
        self: Guards, c: Any, job: str, worker: str, executing: int, local: int, limit: int
    ) -> bool:
        if not state["in_batch"]:
            return real_can(self, c, job, worker, executing, local, limit)
        blind = state["taken"] > 0
        ok = real_can(self, c, job, worker, executing, local, 10**9 if blind else limit)
        if ok and blind and not real_can(self, c, job, worker, executing, local, limit):
            fired.append(job)
        state["taken"] += ok
        return ok

    monkeypatch.setattr(MemoryCoordination, "reserve_batch", batch)
    monkeypatch.setattr(Guards, "can_reserve", can)
    failure = hunted(AllBatchedTight, 1000)
    assert failure.startswith("ERROR refinement"), failure
    assert "Reserve" in failure, failure
    assert fired, "the kill did not come from a batched reservation's skipped limit"


def test_a_batched_clean_that_skips_its_dirty_check_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reconcile pass cleans every terminal job it found in one lock transaction and one
    coordination call (``Reconciler.clean_terminal_batch``); planted: the batch does not
    look whether each job's coordination is still dirty — a job another reconciler
    cleaned since this pass read the stores is logged as cleaned again, a
    ``CleanTerminalCoordination`` the spec does not enable.  Only a pass crossed by
    another (``loop-reconcile-crossed``: production's reconcilers run in threads of their
    own) meets it: here the crossing of :func:`tests.jobs.schedules.crossed_clean`,
    the other pass run between this pass's read and its clean."""
    real_batch = MemoryCoordination.clean_terminal_batch
    real_dirty = Guards.coordination_dirty
    state = {"in_batch": False}
    fired: list[str] = []

    def batch(self: MemoryCoordination, *args: Any, **kwargs: Any) -> list[str]:
        state["in_batch"] = True
        try:
            return real_batch(self, *args, **kwargs)
        finally:
            state["in_batch"] = False

    def dirty(self: Guards, c: Any, job: str) -> bool:
        if state["in_batch"] and not real_dirty(self, c, job):
            fired.append(job)
            return True
        return real_dirty(self, c, job)

    monkeypatch.setattr(MemoryCoordination, "clean_terminal_batch", batch)
    monkeypatch.setattr(Guards, "coordination_dirty", dirty)
    run = JobRun(
        JobConfig(jobs=("j1", "j2"), workers=("w1", "w2"), concurrency=1),
        {"j1": (Outcome.SUCCESS,), "j2": (Outcome.SUCCESS,)},
    )
    with pytest.raises(JobRunFailure) as info:
        crossed_clean(run)
    assert info.value.failure.startswith("ERROR refinement: CleanTerminalCoordination(j1)"), (
        info.value.failure
    )
    assert fired, "the kill did not come from the batched clean's skipped check"
