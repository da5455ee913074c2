"""The loop machine kills the planted bugs of the production worker loop
(``tests/jobs/loop_planted.py``) — a heartbeat counted as renewed though its write failed,
a finished attempt's slot never freed, a reconcile schedule that gives up after one failed
pass — each within the budget the suite runs it under
(:func:`tests.jobs.job_machines.budget_of`), and each survives that budget when the loop
rules are switched off: no other rule reaches the loop's code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.testing.job_machines import JobLoopMachine, JobScheduleFailure
from remora.testing.profiles import full_budget
from tests.jobs.job_machines import LoopJobs, budget_of
from tests.jobs.loop_planted import PLANTED

KILLED_BY = {
    "eager-heartbeat": "ERROR loop: the heartbeat of ",
    "sticky-slots": r"ERROR loop: the loop of \w+ waits for a handler ",
    "schedule-gives-up": "ERROR loop: a scheduled reconcile pass of ",
    "keeps-stopped-leases": "ERROR loop: the lease of ",
    "misses-lost-leases": "ERROR loop: a clean turn of the loop of ",
    "quits-on-blips": r"ERROR loop: the loop of \w+ ended: ",
    "declares-early": r"ERROR loop: \w+ was declared down by ",
    "deaf-heartbeat": r"ERROR loop: the loop of \w+ took a clean turn .* after \w+ was declared",
    "keeps-refused-reservations": r"ERROR loop: a clean turn of the loop of \w+ reserved ",
    "forgets-refused-activations": r"ERROR loop: a clean turn of the loop of \w+ with a slot free",
    "forgets-outages": r"ERROR loop: the loop of \w+ runs on .* past its outage budget",
    # its waiting turns also skip the heartbeat: the beat's promise may see it first
    "waits-out-grace": r"ERROR loop: (the loop of \w+, asked to stop .* though drained|the "
    r"heartbeat of \w+ is \S+ old after a clean turn)",
    "takes-work-while-stopping": r"ERROR loop: the loop of \w+ (started|reserved) .* after it was "
    "asked to stop",
    "retries-permanent-failures": r"ERROR loop: the loop of \w+ sent WantsRetryableFailure for "
    r"\S+, whose handler asked for WantsPermanentFailure",
    "settles-nothing-for-dead-children": r"ERROR loop: the handler of \S+ in the loop of \w+ "
    r"asked for WantsRetryableFailure, and its settlement ended without sending it",
    "caches-cancelled": r"ERROR loop: the handler of \S+ was told its attempt goes on after its "
    r"loop noticed it must stop",
    "restages-on-retry": r"ERROR loop: the loop of \w+ sent WantsRetryableFailure for \S+, whose "
    r"handler asked for WantsSuccess",
    "never-times-out": r"ERROR loop: a clean turn of the loop of \w+ left \S+ running .*its "
    r"timeout",
    "times-out-from-first-start": r"ERROR loop: the loop of \w+ sent WantsRetryableFailure for "
    r"\S+, whose handler",
    "keeps-timed-out-leases": r"ERROR loop: the lease of \S+ is still held after its loop ended it",
    "job-timeout-overrides-handler": r"ERROR loop: a clean turn of the loop of \w+ left \S+ "
    r"running .*its timeout",
    "renews-ended-handlers": r"ERROR loop: the loop of \w+ renewed the lease of \S+, whose "
    r"handler had ended",
    "ends-one-step-per-turn": r"ERROR loop: the loop of \w+ tried to end \S+ in a clean turn",
    "tends-every-other-tick": r"ERROR loop: the first clean turn of the loop of \w+ in its "
    r"tick left the lease of ",
    "gives-up-waiting-for-a-stop": r"ERROR loop: (the lease of \S+ is still held after its "
    r"settlement|\w+ holds \S+ executing, but its loop runs no handler for it)",
}
"""The failure each planted bug is killed with (the loop's promise it breaks): a pattern
its message starts with."""


@pytest.fixture(autouse=True)
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path))


SCALE = {
    "keeps-stopped-leases": 3,
    "keeps-refused-reservations": 3,
    "forgets-outages": 3,
    "takes-work-while-stopping": 3,
    "forgets-refused-activations": 2,
    "restages-on-retry": 4,
}
"""Bugs hunted with a multiple of the suite's budget: (d) needs a cancel to land while a
handler runs; since the batched loops and ``loop_stall`` joined the rules it was not killed
within the suite's budget, and was at three times it (measured at the merge, stop 30).  (i)
needs a turn to reserve a job cancelled while still queued (the authorization refused): not
killed within the suite's budget, killed at three times it (stop 34; random runs of 300 kill
it in seconds).  (k) needs a loop built with an outage budget (one in three) whose durable
link is cut for three ticks or more: killed at three times the budget (stop 35; random runs
of 400 kill it).  (m) needs the run's one stop to come while a job is queued and the
stopping loop has a slot free: not killed within the suite's budget at stop 35.  (j) needs
a ``loop_handoff`` whose replacement's activation is refused: killed within the suite's
budget until stop 37's rules (``loop_settle_faulted``, ``loop_hang``) shifted the draws,
then at twice it (random runs kill it within 100 to 200 examples).  (q) needs a completion's
transaction to fail after its stage landed: killed within the suite's budget until stop 38's
handlers that give up and handler timeouts shifted the draws, then at four times it (not at
three; random runs of 400 kill it in 8 to 24 s, with Hypothesis's local constants, which
the ci profile pins, in the draws)."""


def hunt(machine: type[JobLoopMachine], name: str = "") -> settings:
    """The suite's budget for ``machine`` (:func:`budget_of`), without the shrink (the
    first failing example is the kill; shrinking it only spends time).  Under a profile
    smaller than ``ci`` (the quick default), ``ci``'s: a kill is claimed at that
    derandomized budget, and a few random examples would make it luck."""
    budget = budget_of(machine, None if full_budget() else settings.get_profile("ci"))
    return settings(
        budget,
        max_examples=budget.max_examples * SCALE.get(name, 1),
        phases=(Phase.explicit, Phase.generate),
    )


def planted(name: str, *, loop_rules: bool = True) -> type[JobLoopMachine]:
    """The loop machine with bug ``name`` planted (and its loop rules, or none)."""
    parts, loop_parts = PLANTED[name]
    body: dict[str, object] = {"parts": parts, "loop_parts": loop_parts}
    if not loop_rules:  # every rule that drives a loop (``loop_*``), whatever it is
        body.update(
            {
                n: None
                for n in dir(LoopJobs)
                if n.startswith("loop_")
                and hasattr(getattr(LoopJobs, n), "hypothesis_stateful_rule")
            }
        )
    return type(f"Planted{name.title().replace('-', '')}", (LoopJobs,), body)


NIGHTLY_HUNTS = {"restages-on-retry", "keeps-refused-reservations"}
"""Hunts run under the nightly profile only, each because a fixed schedule kills its bug
in CI (``tests/jobs/test_sim_loops.py``): (q), at four times the budget the longest hunt
here (about a minute quiet), by the completion that fails once; (i), at three times it
(158 s at stop 47), by the job cancelled while queued."""


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.nightly) if n in NIGHTLY_HUNTS else n
        for n in sorted(PLANTED)
    ],
)
def test_the_loop_machine_kills_a_planted_loop_bug(name: str) -> None:
    machine = planted(name)
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(machine, settings=hunt(machine, name))
    assert re.match(KILLED_BY[name], info.value.failure), info.value.failure


@pytest.mark.control
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_loop_bug_survives_without_the_loop_rules(name: str) -> None:
    """The same budget, the loop rules removed: nothing runs the loop's code, and no
    check of the loop's promises fails (what kills the bug is the loop rules, not the rest
    of the machine).  The rest of the machine may still find what it finds elsewhere in
    the runtime — not this test's subject: only a failure of the loop's checks would say
    the bug was reached without the loop rules."""
    machine = planted(name, loop_rules=False)
    try:
        run_state_machine_as_test(machine, settings=hunt(machine, name))
    except JobScheduleFailure as exc:
        assert not exc.failure.startswith("ERROR loop"), exc.failure
    assert not any(r[0] in ("loop", "loop-action") for r in machine.reach)


def test_a_discarded_handler_process_left_unreaped_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted: the pool's ``discard`` kills a handler process and starts its replacement
    but never waits for it (``Child.reap`` skipped) — a zombie per abandoned or dead
    handler, which a long-running worker piles up until the system has no process ids
    left.  Nothing the spec sees changes; the judgement after the drain that every ended
    handler process was reaped (``SimLoops.unreaped``) kills it."""
    from remora.jobs.processes import ProcessExecutor

    real = ProcessExecutor.discard
    fired: list[int] = []

    def discard(self: ProcessExecutor, child: Any) -> None:
        fired.append(child.pid)
        child.reap = lambda: None  # the planted bug: the wait is forgotten
        real(self, child)

    monkeypatch.setattr(ProcessExecutor, "discard", discard)
    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(LoopJobs, settings=hunt(LoopJobs, "unreaped"))
    assert info.value.failure.startswith("ERROR processes: handler process"), info.value.failure
    assert fired, "the kill did not come from a discarded process"
