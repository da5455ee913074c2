"""The suite's job-runtime state machines (imported by the tests and the job campaign)."""

from __future__ import annotations

from hypothesis import settings

from remora.sim.jobs.loops import LoopParts
from remora.testing.job_machines import (
    JobCutMachine,
    JobLoopMachine,
    JobMachineBase,
    JobRaceMachine,
    JobReservationMachine,
    JobRuntimeMachine,
)


class SpecSizedJobs(JobRuntimeMachine):
    """Sized like the spec's small named configurations: one job, two incarnations, one
    slot, two attempts, leases and reservations of one tick, one wipe, two partitions."""

    jobs = ("j1",)
    workers = ("w1", "w2")
    concurrency = 1
    max_attempts = 2
    max_progress = 2
    lease_ticks = 1
    reservation_ticks = 1
    global_limit = 1
    max_credential_intents = 1
    max_coord_losses = 1
    max_partitions = 2
    # plain jobs, as the spec's (no delay, one queue, one priority): its search is the
    # one the planted-bug tests of the judgement were measured with
    max_delay = 0
    queues = ("default",)
    priorities = (0, 0)


class ReservedJobs(JobReservationMachine, SpecSizedJobs):
    """The reservation machine (:class:`~remora.testing.job_machines.JobReservationMachine`:
    a fresh reservation followed by a next step of its worker), sized as the spec-sized
    machine but with three jobs, so that a run reserves more than once."""

    jobs = ("j1", "j2", "j3")


class LargerJobs(JobRuntimeMachine):
    """Larger than the spec's configurations: three jobs, three workers (plus the drain's
    spare), three attempts, two slots per worker, a global limit of three, two wipes; its
    jobs delayed (up to two ticks), in two queues, with priorities (the kinds drawn per
    job, shrinking to plain ones)."""


class RaceJobs(JobRaceMachine):
    """The race machine (:class:`~remora.testing.job_machines.JobRaceMachine`): four jobs
    so the first races of a run each get a fresh one; five incarnations, so a replacement
    worker is at hand after the credential races' crashes and shutdowns; one slot per
    worker, two attempts, two-tick leases and reservations (a lease outlives one tick, so
    a race can act while it is live), a global limit of two, two credential intents per
    job, two wipes, three partitions."""

    jobs = ("j1", "j2", "j3", "j4")
    workers = ("w1", "w2", "w3", "w4", "w5")
    concurrency = 1
    max_attempts = 2
    max_progress = 2
    lease_ticks = 2
    reservation_ticks = 2
    global_limit = 2
    max_credential_intents = 2
    max_coord_losses = 2
    max_partitions = 3


class LoopJobs(JobLoopMachine):
    """The loop machine (:class:`~remora.testing.job_machines.JobLoopMachine`): three
    jobs (delayed, prioritized; one queue, the one the loops reserve from), three
    incarnations with two slots each, two attempts, two-tick leases and reservations (the
    heartbeat is due every two ticks), a global limit of three."""

    jobs = ("j1", "j2", "j3")
    workers = ("w1", "w2", "w3")
    concurrency = 2
    max_attempts = 2
    max_progress = 2
    lease_ticks = 2
    reservation_ticks = 2
    global_limit = 3
    queues = ("default",)


class LoopJobsAtTheLimit(LoopJobs):
    """The loop machine with a global limit of one: a loop's turn asks its batched
    ``Reserve`` for as many jobs as it has free slots, and the batch meets the limit with
    slots to spare — it must take one job and refuse the rest, counting each reservation
    it takes against the limit.  Run over PostgreSQL + Redis
    (``tests/jobs/test_job_machines_services.py``), where that count is the Lua script's
    (the memory store's batch is other code): a script that counts a batch's reservations
    against the worker's slots but not against the global limit (stop 45's realistic bug)
    took the plain loop machine there about 150 examples, this one fewer than 60
    (``tests/jobs/test_job_machines_planted.py``)."""

    global_limit = 1


class CutJobs(JobCutMachine):
    """The cut machine (:class:`~remora.testing.job_machines.JobCutMachine`: steps that
    write both stores cut between their writes): two jobs, three incarnations (so that
    one is up while another is declared down, and a declaration stays possible after the
    first took one down), one slot, two attempts, one-tick leases (a heartbeat expires
    three ticks after the last beat)."""

    jobs = ("j1", "j2")
    workers = ("w1", "w2", "w3")
    concurrency = 1
    max_attempts = 2
    lease_ticks = 1
    reservation_ticks = 1
    global_limit = 2


class CrossedLoopJobs(LoopJobs):
    """The loop machine whose reconcile passes may be crossed by another loop's
    (``loop-reconcile-crossed``: the other pass runs whole between two of this pass's
    store calls, as production's reconciler threads interleave) and whose first loop's
    reconciler cleans in batches of two (a pass then splits its cleans into a batch and a
    single clean).  A machine of its own, at a quarter of the loop machine's examples, so
    the loop machine's derandomized examples stay as they were."""

    cross_passes = True
    loop_parts = LoopParts(clean_batches=(2, 0, 0))


class EmbeddedJobs(RaceJobs):
    """The race machine in embedded mode — ``remora jobs worker`` without ``--redis``,
    the default: each incarnation's coordination is its own process's memory, so no
    cancel or revocation elsewhere raises its mirror's floors or cancel marks, and only
    its own refresh from the durable store under the job's lock fences its lease steps
    (:meth:`~remora.sim.jobs.simulation.Simulation.embed`).  A machine of its own, at a
    quarter of the race machine's examples (an incarnation without that refresh is killed
    within them: ``tests/jobs/test_job_machines_planted.py``)."""

    embedded = True


JOB_MACHINES: tuple[type[JobMachineBase], ...] = (
    SpecSizedJobs,
    ReservedJobs,
    LargerJobs,
    RaceJobs,
    LoopJobs,
    CutJobs,
)
"""Every job machine of the suite (``test_job_machines.py`` judges their reach together)."""

SHARES: dict[type[JobMachineBase], float] = {
    CrossedLoopJobs: 0.5,
    EmbeddedJobs: 0.5,
    LoopJobs: 2.0,
    RaceJobs: 2.0,
    CutJobs: 2.0,
}
"""Each machine's share of the profile's examples in the suite (default 1).  The race
machine runs twice the profile: its sweep hands each step kind's lost replies out in
turn, and the fused ``complete``'s lost COMMIT reply (committed) came up in fewer than one
run of 200 after the loop machine and the fused step joined.  The loop machine runs the
whole profile: with the general rules' draws shifted by the fused step, a handler ran to
its accept in none of 100 examples; it runs twice the profile since stop 35, when its rules
grew to cover the loop's hard cases (a settlement cut between its stores, a stop, a budgeted
outage): at one profile the activation retried after a refusal and a fault inside a
reconcile pass went unreached as the draws shifted (a loop takes 0.1 s an example, so the
second profile costs about 20 s).  The cut machine runs twice the profile: its
``declare_down`` meets an expired heartbeat with another incarnation up seldom enough that
one profile left one of the two lost COMMIT replies of the declaration unreached."""


def budget_of(machine: type[JobMachineBase], base: settings | None = None) -> settings:
    """The settings ``machine`` runs under in the suite: the profile's (or ``base``),
    scaled by its :data:`SHARES`."""
    current = settings.default if base is None else base
    assert current is not None
    share = next((v for k, v in SHARES.items() if issubclass(machine, k)), 1.0)
    return settings(current, max_examples=max(1, round(current.max_examples * share)))


HUNTERS: tuple[type[JobMachineBase], ...] = (RaceJobs, SpecSizedJobs, LargerJobs)
"""The campaign's order: the race machine first — it composes every dangerous combination
by construction, so what it kills does not hang on the search's luck — then the general
machines."""
