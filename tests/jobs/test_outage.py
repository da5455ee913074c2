"""A worker rides out transient faults (issue 22, item 4): the link to a service cut at every
durable, coordination, target and vault call site of a job's life — its first, second and
last call — and restored a second later; the worker must finish the job in its first
attempt, exactly once, and the recorded run must validate against the spec.  Past the
outage budget the worker gives up (:class:`~remora.errors.OutageExceeded`).

Deterministic: the real loop, turn by turn on the logical clock (``tests/jobs/outage_run.py``).
On the old code the handler's own calls (``advance``, ``checkpoint``, ``put_secret``) were
not retried: a cut there failed the attempt, and the settlement gave up after 2.5 s."""

from __future__ import annotations

import pytest

from remora.errors import OutageExceeded
from remora.jobs.model import Phase
from remora.worker.outage import OutageWatch, backoff, outage_policy
from remora.worker.retry import RetryPolicy
from tests.jobs.outage_run import BUDGET, Cut, Result, Site, run_job, sites

SITES = sites()
CUTS = [Cut(site, n) for site, count in SITES for n in sorted({1, 2, count}) if n <= count]


def rode_out(r: Result) -> list[str]:
    """What is wrong with a run that should have ridden out its cut (empty: nothing)."""
    wrong = []
    if r.failed:
        wrong.append(f"the loop ended with {r.failed[0]!r}")
    if r.phase is not Phase.SUCCEEDED or r.output != b"done":
        wrong.append(f"the job is {r.phase.value} with {r.output!r}")
    if r.accepted != 1:
        wrong.append(f"{r.accepted} AcceptSuccess")
    if r.attempts != 1:
        wrong.append(f"{r.attempts} attempts: the cut cost an attempt")
    return wrong


def test_the_sites_cover_every_kind_of_call_of_a_job_s_life() -> None:
    """The enumeration is not vacuous: it reaches every operation of the seam, the worker's
    dispatch, handler, settlement, heartbeat and shutdown, and the reconciler."""
    ops = {s.operation for s, _ in SITES}
    assert ops == {
        "durable-write", "durable-read", "coord-write", "coord-read",
        "target-write", "target-read", "vault-write", "vault-read",
    }  # fmt: skip
    steps = {s.step for s, _ in SITES}
    for step in (
        "Worker.reserve", "Worker.authorize", "Worker.activate", "Worker.renew",
        "Worker.advance", "Worker.checkpoint", "prepare_credential", "Worker.complete",
        "Worker.release_lease", "Worker.heartbeat",
        "Worker.shutdown", "Stores.enqueue",
    ):  # fmt: skip
        assert step in steps, step
    assert {s.actor for s, _ in SITES} == {"w1", "reconciler"}


@pytest.mark.parametrize("cut", CUTS, ids=lambda c: f"{c.site}#{c.n}")
def test_a_cut_link_is_ridden_out(cut: Cut) -> None:
    r = run_job(cut)
    assert r.hook.cut_at is not None and r.hook.failed >= 1, "the cut never happened"
    assert not rode_out(r), (str(cut.site), cut.n, rode_out(r))
    r.validate()


def test_the_planted_worker_that_does_not_retry_its_steps_is_caught() -> None:
    """Planted: a worker whose steps are not retried (one call each, as the handler's own
    calls were).  It runs a job without faults, and fails the cut test at the handler's
    calls."""
    once = RetryPolicy(max_calls=1, waits=())
    assert not rode_out(run_job(None, retry=once))
    caught = {
        str(c.site): rode_out(r)
        for c in CUTS
        if c.site.step in ("Worker.advance", "Worker.checkpoint", "prepare_credential")
        and (r := run_job(c, retry=once))
        and rode_out(r)
    }
    assert caught, "the planted worker survived every cut"
    assert any("attempts" in " ".join(v) for v in caught.values()), caught


@pytest.mark.parametrize(
    "site",
    [
        Site("w1", "coord-read", "Dispatcher.dispatch"),
        Site("w1", "durable-write", "Worker.authorize"),
        Site("w1", "coord-write", "Worker.renew"),
    ],
    ids=str,
)
def test_past_the_budget_the_worker_gives_up(site: Site) -> None:
    """A cut that outlasts the budget: the loop ends with :class:`OutageExceeded` naming the
    service, a bounded time after the cut (not after ``TURNS`` turns).  (Sites where the
    stepped handler would wait for the durable store: in production the settling thread is
    released when the loop gives up — here the test's own thread would wait.)"""
    assert site in dict(SITES)
    r = run_job(Cut(site, 1), window=1e6, budget=3.0)
    assert r.failed and isinstance(r.failed[0], OutageExceeded), r.failed
    service = "the coordination store" if site.operation.startswith("coord") else "durable"
    assert service in str(r.failed[0]) and "past the outage budget (3 s" in str(r.failed[0])
    assert r.hook.cut_at is not None
    gave_up = r.sim.clock.now() - r.hook.cut_at
    assert 3.0 < gave_up < 3.0 + BUDGET, gave_up


def test_without_the_watch_the_loop_never_gives_up() -> None:
    """Planted: no outage watch (the old loop): the endless cut keeps it turning until the
    test's bound — what the budget check is for."""
    from tests.jobs.outage_run import TURNS

    site = Site("w1", "durable-write", "Worker.authorize")
    r = run_job(Cut(site, 1), window=1e6, budget=None)
    assert not r.failed and r.turns == TURNS


def test_the_outage_rule() -> None:
    """One rule for both workers: the per-call waits add up to the budget, the loop's pause
    doubles with the outage's length within its bounds, and the watch says once that it
    waits and once that the service is back — only for a call begun after the outage
    began."""
    from remora.clock import LogicalClock

    policy = outage_policy(10.0)
    assert policy.waits[:5] == (0.1, 0.2, 0.4, 0.8, 1.6) and max(policy.waits) == 2.0
    assert sum(policy.waits) >= 10.0 > sum(policy.waits[:-1])
    assert [backoff(e) for e in (0.0, 0.3, 1.5, 9.0)] == [0.1, 0.3, 1.5, 2.0]
    clock = LogicalClock()
    said: list[str] = []
    watch = OutageWatch(5.0, clock, said.append)
    before = watch.now()
    clock.advance(100)
    watch.failed("the durable store", RuntimeError("cut"))
    watch.failed("the durable store", RuntimeError("still cut"))
    watch.answered("the durable store", before)  # begun before the outage: proves nothing
    assert watch.ongoing() is not None and watch.exceeded() is None
    clock.advance(5_001)
    outage = watch.exceeded()
    assert outage is not None and str(outage.last) == "still cut"
    watch.answered("the durable store", watch.now())
    assert watch.ongoing() is None
    assert said == [
        "waiting for the durable store: cut; retrying for up to 5 s (--outage-budget)",
        "the durable store is back after 5.0 s; resuming",
    ]
