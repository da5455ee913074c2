"""Faults between the stores (issue 21, item 3): a cross-store step cut between its two
stores' writes — the second write failing, its reply lost, the process killed in between
(a fault selector's ``kill``: :class:`~remora.sim.jobs.trace.JobFault`) — and the finding
it reproduces: ``declare_down`` raised the coordination down mark, its durable declaration
did not commit, and the mark stayed (``ERROR not-quiescent: the down mark of w1 is not
durable``).  Fixed at its cause: a declaration that did not commit lets go of its
declarer's mark (:meth:`~remora.jobs.coordination.MemoryCoordination.unmark_down`, keyed by
declarer on memory and in Redis Lua), and each full pass sweeps the declarer's stale marks
(:meth:`~remora.jobs.reconciler.Reconciler.sweep_marks`), judged after every fault-free
reconcile pass (:func:`~remora.sim.jobs.judgement.stale_marks`).

The planted bugs (``tests/jobs/between_planted.py``) are killed by the machines' own
executor (:class:`~remora.sim.jobs.run.JobRun`) on the schedules that cut the step — and
by the cut machine's own search (``tests/jobs/test_cut_machine_planted.py``)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from remora.clock import LogicalClock
from remora.context import Context
from remora.faults import Outcome as IO
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.io import Actor, JobOperation
from remora.jobs.model import AttemptId, JobsConfig, NotEnabled, Outcome, Service, StageInfo
from remora.jobs.redis_coordination import RedisCoordination
from remora.jobs.target import DirectoryTarget, MemoryTarget
from remora.sim.jobs.judgement import JUDGEMENTS
from remora.sim.jobs.run import JobRun, JobRunFailure
from remora.sim.jobs.trace import JobConfig, JobFault, JobStep
from tests.common.services import require_redis
from tests.jobs.between_planted import PLANTED
from tests.jobs.job_services import service_backends
from tests.jobs.schedules import dispatched
from tests.jobs.statement_kills import StatementKills

S = JobStep
FINDING: tuple[JobStep, ...] = (
    S("start", worker="w1"),
    S("submit", job="j3"),
    S("cancel", job="j3"),
    S("start", worker="w2"),
    S("crash", worker="w1"),
    S("submit", job="j1"),
    S("tick"),
    S("tick"),
    S("submit", job="j2"),
    S("cancel", job="j1"),
    S("tick"),
    S("cancel", job="j2"),
    S("tick"),
    S("tick"),
    S("tick"),
    S("reconcile", faults=(JobFault(JobOperation.DURABLE_WRITE, 1, IO.UNKNOWN_ABORTED),)),
)
"""The machine's 16-step finding (after ``remora reduce``): the reconcile pass declares the
killed w1 down, the declaration's COMMIT reply is lost and it did not commit."""


def drained(run: JobRun) -> None:
    run.drain()
    run.judge()


def test_the_lost_declaration_leaves_no_down_mark() -> None:
    """The finding, as a deterministic example: the drain is quiescent (the mark was let
    go of when the re-read showed the declaration had not committed)."""
    run = JobRun(JobConfig(), {j: (Outcome.SUCCESS,) for j in ("j1", "j2", "j3")})
    for step in FINDING:
        run.execute(step)
    assert run.sim.stores.coordination.snapshot().down == frozenset()
    drained(run)


def test_the_finding_is_the_runtime_before_the_fix() -> None:
    """The same schedule on the runtime before the fix (a declarer that never lets go)."""
    run = JobRun(
        JobConfig(),
        {j: (Outcome.SUCCESS,) for j in ("j1", "j2", "j3")},
        parts=PLANTED["forgetful-declarer"],
    )
    for step in FINDING:
        run.execute(step)
    with pytest.raises(JobRunFailure, match="the down mark of w1 is not durable"):
        drained(run)


def live_declared(cut: JobFault, then: tuple[JobStep, ...] = ()) -> tuple[JobStep, ...]:
    """A live incarnation w1 cut off from the durable store until its heartbeat expired,
    declared down with ``cut`` — then its link back, a beat, a reconcile pass."""
    return (
        S("start", worker="w1"),
        S("start", worker="w2"),
        S("drop-link", worker="w1", service=Service.DURABLE),
        *(S("tick"),) * 7,
        S("declare-down", worker="w1", faults=(cut,)),
        S("submit", job="j1"),
        S("restore-link", worker="w1", service=Service.DURABLE),
        S("tick"),
        S("reconcile"),
        *then,
    )


DURABLE_FAILS = JobFault(JobOperation.DURABLE_WRITE, 1, IO.ABORT)
KILLED_AFTER_MARK = JobFault(JobOperation.COORD_WRITE, 1, IO.COMMIT, kill=True)
KILLED_AFTER_COMMIT = JobFault(JobOperation.DURABLE_WRITE, 1, IO.COMMIT, kill=True)
#: The target's fence failing, after the mark and before the durable declaration: the
#: declarer lets go of its mark (it did not, until stop 45: the judgement of a declaration
#: that did not commit found it, ``ERROR marks: a declaration of w1 that did not commit
#: left its down mark``).
FENCE_FAILS = JobFault(JobOperation.TARGET_WRITE, 1, IO.ABORT)
#: The declarer killed once its fence is up, before the durable declaration: mark and
#: fence stay until the declarer's next full pass sweeps them (stop 47: the fence stayed
#: for good — a live incarnation's every stage write refused).
KILLED_AFTER_FENCE = JobFault(JobOperation.TARGET_WRITE, 1, IO.COMMIT, kill=True)
CASES = {
    # bug → (the cut that kills it, the failure it is killed with)
    # killed at the declaration's own step since stop 45 (before: by the clean pass after it)
    "forgetful-declarer": (DURABLE_FAILS, "ERROR marks: a declaration of w1 that did not commit"),
    "no-sweep": (KILLED_AFTER_MARK, "ERROR marks: the down mark of w1 is not durable"),
    # stop 47: the fence of a declaration that did not commit was never lifted
    "fence-kept": (
        DURABLE_FAILS,
        "ERROR marks: a declaration of w1 that did not commit left its target fence",
    ),
    "fence-not-swept": (
        KILLED_AFTER_FENCE,
        "ERROR marks: the target fence of w1 is not durable after a fault-free",
    ),
    # the fence is raised with the mark, after the commit: the fence judgement sees it at
    # the step (the drain's quiescence judgement, without it, sees the mark missing)
    "commit-before-mark": (
        KILLED_AFTER_COMMIT,
        "ERROR fences: w1 was declared down but its stage writes are not fenced",
    ),
}


def run_cut(cut: JobFault, bug: str | None, backends: Any = None) -> JobRun:
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1", "w2")),
        {"j1": (Outcome.SUCCESS,)},
        parts=None if bug is None else PLANTED[bug],
        backends=backends,
    )
    for step in live_declared(cut):
        run.execute(step)
    drained(run)
    return run


@pytest.mark.parametrize(
    "cut",
    [DURABLE_FAILS, FENCE_FAILS, KILLED_AFTER_MARK, KILLED_AFTER_FENCE, KILLED_AFTER_COMMIT],
)
def test_a_declaration_cut_between_the_stores_leaves_the_stores_agreeing(cut: JobFault) -> None:
    """Unmutated: each cut of ``CrashWorker``'s cross-store step ends consistent — no
    stale mark after the clean pass, quiescent after the drain, every step refined."""
    run = run_cut(cut, None)
    assert run.kills == (["reconciler"] if cut.kill else [])


@pytest.mark.parametrize("bug", sorted(CASES))
def test_a_planted_ordering_bug_is_killed_by_its_cut(bug: str) -> None:
    cut, failure = CASES[bug]
    with pytest.raises(JobRunFailure) as info:
        run_cut(cut, bug)
    assert info.value.failure.startswith(failure), info.value.failure


@pytest.mark.control
def test_no_sweep_survives_without_the_kill_point() -> None:
    """The pass without its sweep is only reachable through a kill point: the same cut
    without the kill (the mark's write commits, the declaration too) leaves nothing
    stale, and a failed declaration's own let-go lifts the mark."""
    for cut in (JobFault(JobOperation.DURABLE_WRITE, 1, IO.UNKNOWN_ABORTED), DURABLE_FAILS):
        run_cut(cut, "no-sweep")


def test_a_kill_selector_round_trips_through_the_trace_format() -> None:
    step = S("declare-down", worker="w1", faults=(KILLED_AFTER_MARK,))
    assert step.label() == "declare-down w1 [coord-write#1=commit+kill]"
    assert KILLED_AFTER_MARK.to_json() == {
        "operation": "coord-write",
        "call": 1,
        "outcome": "commit",
        "kill": True,
    }


# -- the keyed down marks (memory; Redis at the end of this file) -------------------
def marks_contract(make: object) -> None:
    """One declarer's let-go never lifts another's mark, nor one republished from the
    durable store; a mark with no holder left is lifted."""
    coord = make()  # type: ignore[operator]
    ctx = Context(LogicalClock())
    a, b, env = Actor("rec-a", ctx), Actor("rec-b", ctx), Actor("env", ctx)
    coord.mark_down(a, "w1")
    coord.mark_down(b, "w1")
    coord.unmark_down(a, ["w1"])
    assert coord.snapshot().down == {"w1"}
    coord.unmark_down(b, ["w1"])
    assert coord.snapshot().down == frozenset()
    coord.mark_down(a, "w2")
    coord.publish_down(env, ["w2"])
    coord.unmark_down(a, ["w2"])
    assert coord.snapshot().down == {"w2"}
    coord.unmark_down(a, ["w9"])  # nothing held: nothing changes
    assert coord.snapshot().down == {"w2"}


def test_memory_marks_are_keyed_by_declarer() -> None:
    marks_contract(lambda: MemoryCoordination(LogicalClock(), JobsConfig()))


def fences_contract(target: Any) -> None:
    """The target's fences, like the marks: one declarer's let-go never lifts another's
    fence, a fence with no holder left is lifted, ``fenced(holder)`` reads one
    declarer's own — and a fenced incarnation's stage write is refused until then."""
    ctx = Context(LogicalClock())
    a, b = Actor("rec-a", ctx), Actor("rec-b", ctx)
    stage = AttemptId("j1", 1)
    target.fence(a, "w1")
    target.fence(b, "w1")
    target.fence(a, "w2")
    assert target.fenced() == {"w1", "w2"}
    assert target.fenced("rec-a") == {"w1", "w2"}
    assert target.fenced("rec-b") == {"w1"}
    target.unfence(a, ["w1", "w9"])  # w9: nothing held, nothing changes
    assert target.fenced() == {"w1", "w2"}
    with pytest.raises(NotEnabled, match="fenced"):
        target.write(a, stage, 1, b"x", worker="w1")
    target.unfence(b, ["w1"])
    assert target.fenced() == {"w2"}
    target.write(a, stage, 1, b"x", worker="w1")
    assert target.info(None, stage) == StageInfo(1, False)
    target.unfence(a, ["w2"])
    assert target.fenced() == frozenset()


def test_memory_fences_are_keyed_by_declarer() -> None:
    fences_contract(MemoryTarget())


def test_directory_fences_are_keyed_by_declarer(tmp_path: Path) -> None:
    fences_contract(DirectoryTarget(tmp_path / "stage"))


def test_an_earlier_versions_directory_fence_is_still_honoured(tmp_path: Path) -> None:
    """A fence an earlier version wrote (a plain ``.fenced/<worker>`` file, no declarer)
    still refuses the worker's stage writes, and no declarer's let-go lifts it."""
    target = DirectoryTarget(tmp_path / "stage")
    (tmp_path / "stage" / ".fenced").mkdir()
    (tmp_path / "stage" / ".fenced" / "w1").write_bytes(b"")
    actor = Actor("rec-a", Context(LogicalClock()))
    target.fence(actor, "w1")
    target.unfence(actor, ["w1"])
    assert target.fenced() == {"w1"}
    with pytest.raises(NotEnabled, match="fenced"):
        target.write(actor, AttemptId("j1", 1), 1, b"x", worker="w1")


def test_parse_accepts_kill_only_after_a_write() -> None:
    from remora.sim.jobs.trace import TraceError, _parse_fault

    assert _parse_fault(KILLED_AFTER_MARK.to_json(), "f") == KILLED_AFTER_MARK
    assert _parse_fault(KILLED_AFTER_FENCE.to_json(), "f") == KILLED_AFTER_FENCE
    with pytest.raises(TraceError):
        _parse_fault({"operation": "coord-read", "call": 1, "outcome": "abort", "kill": True}, "f")
    with pytest.raises(TraceError):
        _parse_fault({"operation": "coord-write", "call": 1, "outcome": "commit"}, "f")


# -- kill between statements: every multi-statement durable step is all or nothing ----------
STATEMENT_RUN: tuple[JobStep, ...] = (
    S("start", worker="w1"),
    S("start", worker="w2"),
    S("submit", job="j1"),
    S("submit", job="j2"),
    S("submit", job="j3"),
    S("cancel", job="j3"),
    S("crash", worker="w2"),
    *(S("tick"),) * 7,
    S("reconcile"),
)
"""Registrations, submissions, a cancel, a crash declared down; the fair drain then takes
every job to its end (authorize, checkpoint, the fused complete, retries, the reconciler's
duties, a shutdown-free finish)."""


def statement_kills(backends: Any = None, *, split: bool = False) -> StatementKills:
    run = JobRun(
        JobConfig(jobs=("j1", "j2", "j3"), workers=("w1", "w2")),
        {
            "j1": (Outcome.SUCCESS,),
            "j2": (Outcome.RETRYABLE, Outcome.SUCCESS),
            "j3": (Outcome.SUCCESS,),
        },
        backends=backends,
    )
    kills = StatementKills(run.sim.stores.durable.backend, split)
    run.sim.stores.durable.backend = kills
    for step in STATEMENT_RUN:
        run.execute(step)
    drained(run)
    return kills


def test_a_kill_between_statements_of_a_durable_step_leaves_nothing() -> None:
    """SQLite: every committing durable write of the run, killed after each of its
    statements in turn, leaves the store as it was."""
    kills = statement_kills()
    assert kills.multi >= 15, kills.points
    assert {"job transition", "job write"} <= set(kills.points), kills.points


def test_a_durable_step_split_in_two_transactions_is_caught() -> None:
    """The planted bug: a transaction committed after its first statement (a step cut in
    two) — the first kill after it finds the store changed."""
    with pytest.raises(AssertionError, match="kept part of the transaction"):
        statement_kills(split=True)


# -- the same over PostgreSQL + Redis (skipped without the servers; failing under
# REMORA_REQUIRE_SERVICES=1) --------------------------------------------------------


def test_redis_marks_are_keyed_by_declarer() -> None:
    url = require_redis()
    made: list[RedisCoordination] = []

    def make() -> RedisCoordination:
        coord = RedisCoordination(
            url, JobsConfig(), namespace=f"remora-test:{secrets.token_hex(6)}"
        )
        made.append(coord)
        return coord

    try:
        marks_contract(make)
    finally:
        for coord in made:
            for key in coord.client.scan_iter(f"{coord.ns}:*"):
                coord.client.delete(key)
            coord.close()


def test_postgres_fences_are_keyed_by_declarer(remora_scratch_database: str) -> None:
    from remora.jobs.postgres import PostgresTarget

    with service_backends(remora_scratch_database) as backends:
        backends(LogicalClock(), JobsConfig())  # the schema, every table emptied
        target = PostgresTarget(remora_scratch_database)
        try:
            fences_contract(target)
        finally:
            target.close()


def test_an_earlier_versions_postgres_fence_is_still_honoured(remora_scratch_database: str) -> None:
    """A row of ``remora_jobs_stage_fence`` (an earlier version's fence, no declarer)
    still refuses the worker's stage writes, and no declarer's let-go lifts it."""
    import psycopg

    from remora.jobs.postgres import PostgresTarget

    with service_backends(remora_scratch_database) as backends:
        backends(LogicalClock(), JobsConfig())
        with psycopg.connect(remora_scratch_database, autocommit=True) as conn:
            conn.execute("INSERT INTO remora_jobs_stage_fence (worker) VALUES ('w1')")
        target = PostgresTarget(remora_scratch_database)
        try:
            actor = Actor("rec-a", Context(LogicalClock()))
            target.unfence(actor, ["w1"])
            assert target.fenced() == {"w1"}
            with pytest.raises(NotEnabled, match="fenced"):
                target.write(actor, AttemptId("j1", 1), 1, b"x", worker="w1")
        finally:
            target.close()


@pytest.mark.parametrize(
    "cut",
    [DURABLE_FAILS, FENCE_FAILS, KILLED_AFTER_MARK, KILLED_AFTER_FENCE, KILLED_AFTER_COMMIT],
)
def test_a_declaration_cut_on_the_services_leaves_them_agreeing(
    cut: JobFault, remora_scratch_database: str
) -> None:
    with service_backends(remora_scratch_database) as backends:
        run = run_cut(cut, None, backends)
        assert run.kills == (["reconciler"] if cut.kill else [])


def test_a_kill_between_statements_on_postgres_leaves_nothing(
    remora_scratch_database: str,
) -> None:
    with service_backends(remora_scratch_database) as backends:
        kills = statement_kills(backends)
    assert kills.multi >= 15, kills.points


def test_an_incarnation_on_a_stale_down_mark_does_not_stop_itself() -> None:
    """The cut machine's finding (its zombie's next steps, a cooperative stop among them):
    a declarer raised ``w2``'s down mark and was killed before its declaration committed
    (a reply lost, not applied), so ``w2`` is durably up under a stale mark.  ``w2``'s
    cooperative stop took the mark for its declaration and stopped the incarnation,
    recording nothing — its attempt still executing in the spec with nobody to run it
    (``ERROR refinement: alpha(after) is not the spec's successor of a stutter``).  Now the
    stop asks the durable store first: it waits while that store is away, finds nothing
    to stop for while the lease is live, and stops the attempt once its lease is lost (a
    ``CooperativeStop`` the spec enables)."""
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1", "w2"), lease_ticks=1, reservation_ticks=1),
        {"j1": (Outcome.SUCCESS,)},
    )
    killed_before_commit = JobFault(JobOperation.DURABLE_WRITE, 1, IO.UNKNOWN_ABORTED, kill=True)
    for step in (
        S("start", worker="w1"),
        S("start", worker="w2"),
        *dispatched("w2"),
        S("drop-link", worker="w2", service=Service.DURABLE),
        S("tick"),
        S("tick"),
        S("tick"),
        S("declare-down", worker="w2", faults=(killed_before_commit,)),
    ):
        run.execute(step)
    assert "w2" in run.sim.stores.coordination.snapshot().down  # the stale mark
    stop = S("cooperative-stop", worker="w2", job="j1", token=1)
    assert run.execute(stop) == "unavailable"  # it cannot ask the durable store yet
    assert run.sim.workers["w2"].up
    run.execute(S("restore-link", worker="w2", service=Service.DURABLE))
    assert run.execute(stop) == "refused"  # durably up, and no stop condition holds yet
    assert run.sim.workers["w2"].up
    assert run.execute(S("expire-lease", job="j1", token=1)) == "ok"
    assert run.execute(stop) == "ok"  # its lease was lost: a stop the spec enables


# -- a declaration that did not commit lifts its target fence (stop 47) ---------------
def live_after_a_failed_declaration() -> tuple[JobStep, ...]:
    """w1 cut off from the durable store until its heartbeat expired; a declaration of
    it fails at the durable commit (after the mark and the fence); w1's link back, its
    loop beats — it is durably up — and it runs ``j1`` to its first checkpoint."""
    return (
        S("start", worker="w1"),
        S("start", worker="w2"),
        S("drop-link", worker="w1", service=Service.DURABLE),
        *(S("tick"),) * 7,
        S("declare-down", worker="w1", faults=(DURABLE_FAILS,)),
        S("restore-link", worker="w1", service=Service.DURABLE),
        S("loop-turn", worker="w1"),
        *dispatched("w1"),
        S("advance", worker="w1", job="j1", token=1, amount=1),
    )


def checkpoint_after_a_failed_declaration(bug: str | None, judging: frozenset[str]) -> str:
    """The result kind of w1's first checkpoint (the schedule's last step)."""
    run = JobRun(
        JobConfig(jobs=("j1",), workers=("w1", "w2")),
        {"j1": (Outcome.SUCCESS,)},
        parts=None if bug is None else PLANTED[bug],
        judging=judging,
    )
    kind = ""
    for step in live_after_a_failed_declaration():
        kind = run.execute(step)
    assert run.sim.stores.durable.worker_up("w1")
    return kind


def test_a_live_incarnation_checkpoints_after_a_declaration_that_failed() -> None:
    """The declaration lets go of its fence with its mark: w1's stage write goes in."""
    assert checkpoint_after_a_failed_declaration(None, JUDGEMENTS) == "ok"


def test_a_fence_left_up_refuses_a_live_incarnations_checkpoint() -> None:
    """The runtime before stop 47 (``fence-kept``): the same checkpoint is refused — an
    excused refusal (the ``fenced`` reason), so only the judgement of the declaration's
    own step (``state``: what it left behind) sees the bug."""
    assert checkpoint_after_a_failed_declaration("fence-kept", JUDGEMENTS - {"state"}) == "refused"
    with pytest.raises(JobRunFailure, match="left its target fence"):
        checkpoint_after_a_failed_declaration("fence-kept", JUDGEMENTS)
