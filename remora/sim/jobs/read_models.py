"""What users read agrees with what happened (issue 21, item 6): the read models judged
after every step that changed the durable store, and after the drain.

``remora jobs status``, ``remora jobs history`` and a worker's Prometheus metrics are read
models: each is computed from the durable rows and log (and the target's staging, and the
step records a process counts), never from the spec state — so the refinement check, which
reads the rows through alpha, never looks at them.  A history that blames an attempt's end
on the wrong token, or a gauge that counts one phase under another, is wrong in what users
see while every spec state is right.

The expectation is derived from the run's own account, never by re-reading the rows the
read model reads: the tracked spec state (alpha after the step) and the spec actions the
refinement check took, each with the spec state it was taken in
(:attr:`~remora.sim.jobs.refinement.RefinementChecker.last_steps`).  :class:`ReadModelJudge`
folds those actions into each attempt's possible endings as they happen:

* ``Accept*`` of an attempt ends it (a retryable failure with budget: retryable or timed
  out — which of the two is the error's wording, a fact the spec does not carry);
  ``ReapLostAttempt``, reaped; ``FinalizeCancel``, the job's current attempt in the state
  it was taken in, cancelled; ``CrashWorker(w)``, every attempt of ``w`` existing and with
  no outcome in flight in that state — abandoned at shutdown when ``w`` took the step,
  declared down otherwise.  The first ending counts; endings at the same durable time are
  all acceptable (history orders a coarse clock's ties by subject, which no spec state
  decides).
* an attempt none of these ended is running, or rejected (a ``RejectOutcome``), or, after
  its ``CooperativeStop``, stopped (its worker records the stop by a durable step the
  spec does not see: either may show until then).

The judged read models (:func:`read_model_problems`): every job's status (phase, attempt
count, current attempt's worker, the staged progress of a running one — the target's), every
job's history (its tokens, each attempt's worker, ending and the outcome it asked for), the
metrics gauge of jobs by phase and queue (the durable store's aggregate, through the
collector a scrape runs) and the step counters of a :class:`~remora.jobs.metrics.
MetricsRecorder` fed every step record of the run (attempts started, ended by why,
renewals, reaper steps, incarnations gone down): each counter equals the number of the
spec actions it counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from remora.jobs.actions import Action
from remora.jobs.history import Ending, history, statuses
from remora.jobs.metrics import JobMetrics
from remora.jobs.model import AttemptId
from remora.protocol import spec as S

if TYPE_CHECKING:
    from remora.sim.jobs.run import JobRun

#: The ending each accepted outcome gives, as the spec names the action (the judgement's
#: own table: never :data:`remora.jobs.history.ACCEPTED`, which it judges).
ACCEPT_ENDINGS: dict[str, frozenset[Ending]] = {
    "AcceptSuccess": frozenset({Ending.SUCCEEDED}),
    "AcceptPermanentFailure": frozenset({Ending.FAILED}),
    "AcceptRetryableFailureWithBudget": frozenset({Ending.RETRYABLE, Ending.TIMED_OUT}),
    "AcceptRetryableFailureExhausted": frozenset({Ending.EXHAUSTED}),
}

#: What history calls each outcome a handler asks for (``SendOutcome``'s parameter).
OUTCOME_WORDS = {
    "WantsSuccess": "success",
    "WantsRetryableFailure": "retryable",
    "WantsPermanentFailure": "permanent",
}

#: The metrics' step counters and the spec actions each counts (label value, actions).
ENDED_COUNTS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("succeeded",): ("AcceptSuccess",),
    ("failed",): ("AcceptPermanentFailure",),
    ("retryable", "timed_out"): ("AcceptRetryableFailureWithBudget",),
    ("exhausted",): ("AcceptRetryableFailureExhausted",),
    ("reaped",): ("ReapLostAttempt",),
}
REAP_STEPS = ("ExpireLease", "ExpireReservation", "ReapLostAttempt")
#: The step counters judged (the durations and waits are wall-clock times: not judged; the
#: jobs gauge is its collector's, scraped on its own).
JUDGED_METRICS = (
    "remora_jobs_attempts_started_total",
    "remora_jobs_attempts_ended_total",
    "remora_jobs_lease_renewals_total",
    "remora_jobs_reaps_total",
    "remora_jobs_declare_downs_total",
)


class ReadModelJudge:
    """The run's account of every attempt's endings, and the metrics of every step record
    (module docstring); :meth:`observe` after every checked step, :meth:`problems` when
    the durable store changed."""

    def __init__(self, run: JobRun) -> None:
        self.run = run
        #: (job, token) -> [(durable time, acceptable endings)], in step order.
        self.endings: dict[tuple[str, int], list[tuple[float, frozenset[Ending]]]] = {}
        self.stopped: set[tuple[str, int]] = set()
        self.rejected: set[tuple[str, int]] = set()
        self.outcome: dict[tuple[str, int], str] = {}
        #: The spec actions counted by the metrics (CrashWorker: by kind).
        self.counted: dict[str, int] = {}
        self.metrics = JobMetrics(run.sim.stores.durable)
        self.recorder = self.metrics.recorder()
        self._judged = self.metrics.registry.restricted_registry(JUDGED_METRICS)
        self._fed = 0
        self._changes: object = None
        #: Each job's history as last judged: (its row's version, the incarnations' rows).
        self._judged_history: dict[str, tuple[int, tuple[tuple[str, bool], ...]]] = {}
        self._scraped: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}

    # -- the run's account -------------------------------------------------------------------
    def observe(self) -> None:
        """Fold the last step's spec actions into the account, and feed the metrics every
        step record since the last call."""
        run = self.run
        now = run.sim.clock.now()
        k = run.chk.constants
        for record, s in run.chk.last_steps:
            action, p = record.action, record.params
            if action in ACCEPT_ENDINGS:
                self._end(AttemptId.parse(str(p["a"])), now, ACCEPT_ENDINGS[action])
            elif action == Action.REAP_LOST_ATTEMPT:
                self._end(AttemptId.parse(str(p["a"])), now, frozenset({Ending.REAPED}))
            elif action == Action.FINALIZE_CANCEL:
                j = str(p["j"])
                token = s.currentToken[k.Jobs.index(j)]
                if token:
                    self._end(AttemptId(j, token), now, frozenset({Ending.CANCELLED}))
            elif action == Action.CRASH_WORKER:
                w = str(p["w"])
                kind = Ending.SHUTDOWN if record.actor == w else Ending.DECLARED_DOWN
                self.counted[f"CrashWorker:{kind.name}"] = (
                    self.counted.get(f"CrashWorker:{kind.name}", 0) + 1
                )
                for a in self._attempts(s):
                    i = run.chk.alpha.attempt(a)
                    if k.Workers[s.attemptWorker[i]] == w and s.pendingOutcome[i] == S.NoOutcome:
                        self._end(a, now, frozenset({kind}))
            elif action == Action.SEND_OUTCOME:
                a = AttemptId.parse(str(p["a"]))
                self.outcome[(a.job, a.token)] = OUTCOME_WORDS[str(p["outcome"])]
            elif action == Action.COOPERATIVE_STOP:
                a = AttemptId.parse(str(p["a"]))
                self.stopped.add((a.job, a.token))
            elif action == Action.REJECT_OUTCOME:
                a = AttemptId.parse(str(p["a"]))
                self.rejected.add((a.job, a.token))
            self.counted[action] = self.counted.get(action, 0) + 1
        steps = run.sim.recorder.steps
        for record in steps[self._fed :]:
            if record.action:
                self.recorder.record(record)
        self._fed = len(steps)

    def _end(self, a: AttemptId, at: float, endings: frozenset[Ending]) -> None:
        self.endings.setdefault((a.job, a.token), []).append((at, endings))

    def _attempts(self, s: S.State) -> list[AttemptId]:
        """The attempts that exist in the spec state ``s``."""
        k = self.run.chk.constants
        out = []
        for job in k.Jobs:
            for token in range(1, k.MaxAttempts + 1):
                i = self.run.chk.alpha.attempt(AttemptId(job, token))
                if s.attemptState[i] != S.AttemptUnused:
                    out.append(AttemptId(job, token))
        return out

    def expected_endings(
        self, job: str, token: int, *, recorded: bool = False
    ) -> frozenset[Ending]:
        """The endings history may show for the attempt (module docstring); ``recorded``:
        its durable row says its worker recorded a stop."""
        ends = self.endings.get((job, token))
        if ends:
            first = ends[0][0]
            return frozenset().union(*(e for at, e in ends if abs(at - first) < 1e-9))
        # a stop is told the durable store by a step the spec does not see (RecordStop,
        # after CooperativeStop): until then history shows the attempt as before; once
        # recorded, stopped and nothing else
        if (job, token) in self.stopped and recorded:
            return frozenset({Ending.STOPPED})
        stopped = {Ending.STOPPED} if (job, token) in self.stopped else set()
        if (job, token) in self.rejected:
            return frozenset({Ending.REJECTED, *stopped})
        return frozenset({Ending.RUNNING, *stopped})

    # -- the judgement -----------------------------------------------------------------------
    def changed(self) -> bool:
        """Whether the durable store changed since the last judgement (its snapshot: the
        refinement check's, read again only when a row changed)."""
        snap = self.run.chk.last_view.durable
        if snap is self._changes:
            return False
        self._changes = snap
        return True

    def problems(self) -> list[str]:
        # one scrape of the judged metrics (a lookup by name would scrape the whole
        # registry again — the jobs gauge's durable aggregate, the histograms' buckets)
        families = list(self._judged.collect())
        if self.metrics.jobs is not None:
            families += list(self.metrics.jobs.collect())
        self._scraped = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in families
            for s in family.samples
        }
        return (
            self.status_problems()
            + self.history_problems()
            + self.gauge_problems()
            + self.counter_problems()
        )

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """A metric's value in the last scrape (None: not exposed)."""
        return self._scraped.get((name, frozenset((labels or {}).items())))

    def status_problems(self) -> list[str]:
        run = self.run
        s, k = run.chk.state, run.chk.constants
        st = run.sim.stores
        rows = {r.id for r in run.chk.last_view.durable.jobs}
        problems: list[str] = []
        seen = statuses(st.durable, st.target)
        tokens_of: dict[str, list[int]] = {}
        for a in self._attempts(s):
            tokens_of.setdefault(a.job, []).append(a.token)
        if {x.job.id for x in seen} != rows:
            problems.append(f"status lists {sorted(x.job.id for x in seen)}, not {sorted(rows)}")
        for x in seen:
            if x.job.id not in k.Jobs:
                continue
            j = k.Jobs.index(x.job.id)
            phase = S.PHASE_NAMES[s.phase[j]]
            if x.job.phase.value != phase:
                problems.append(f"status shows {x.job.id} {x.job.phase.value}, not {phase}")
            tokens = tokens_of.get(x.job.id, [])
            if x.attempts != len(tokens):
                problems.append(f"status counts {x.attempts} attempts of {x.job.id}, not {tokens}")
            cur = s.currentToken[j]
            i = run.chk.alpha.attempt(AttemptId(x.job.id, cur)) if cur else None
            worker = None if i is None else k.Workers[s.attemptWorker[i]]
            if x.worker != worker:
                problems.append(f"status shows {x.job.id} at {x.worker}, not {worker}")
            if (
                x.staged is not None
                and i is not None
                and s.stageState[i] in (S.StagePartial, S.StageComplete)
                and x.staged != s.attemptProgress[i]
            ):
                problems.append(
                    f"status shows {x.job.id} staged at {x.staged}, not {s.attemptProgress[i]}"
                )
        return problems

    def history_problems(self) -> list[str]:
        run = self.run
        s, k = run.chk.state, run.chk.constants
        problems: list[str] = []
        rows = {r.id for r in run.chk.last_view.durable.jobs}
        exist = self._attempts(s)
        snap = run.chk.last_view.durable
        versions = {r.id: r.version for r in snap.jobs}
        workers = tuple((w.id, w.up) for w in snap.workers)
        recorded = {(r.job, r.token) for r in snap.attempts if r.stopped}
        for job in sorted(rows & set(k.Jobs)):
            # a job's history changes only with its own log or an incarnation going down
            key = (versions[job], workers)
            if self._judged_history.get(job) == key:
                continue
            self._judged_history[job] = key
            h = history(run.sim.stores.durable, job)
            tokens = [a.token for a in exist if a.job == job]
            shown = [a.token for a in h.attempts]
            if shown != tokens:
                problems.append(f"history of {job} shows attempts {shown}, not {tokens}")
                continue
            for a in h.attempts:
                i = run.chk.alpha.attempt(AttemptId(job, a.token))
                worker = k.Workers[s.attemptWorker[i]]
                if a.worker != worker:
                    problems.append(f"history shows {job}#{a.token} at {a.worker}, not {worker}")
                want = self.expected_endings(job, a.token, recorded=(job, a.token) in recorded)
                if a.ending not in want:
                    names = sorted(e.value for e in want)
                    problems.append(
                        f"history shows {job}#{a.token} ended {a.ending.value!r}, not {names}"
                    )
                outcome = self.outcome.get((job, a.token))
                if a.outcome != outcome:
                    problems.append(
                        f"history shows {job}#{a.token} asked for {a.outcome}, not {outcome}"
                    )
        return problems

    def gauge_problems(self) -> list[str]:
        run = self.run
        s, k = run.chk.state, run.chk.constants
        want: dict[tuple[str, str], int] = {}
        for r in run.chk.last_view.durable.jobs:
            if r.id not in k.Jobs:
                continue
            phase = S.PHASE_NAMES[s.phase[k.Jobs.index(r.id)]]
            kind = run.kinds.get(r.id)
            queue = kind.queue if kind is not None else "default"
            want[(phase, queue)] = want.get((phase, queue), 0) + 1
        problems: list[str] = []
        if self.sample("remora_jobs_store_up") != 1:
            problems.append("the jobs gauge says the durable store did not answer")
        queues = sorted({q for _, q in want} | {"default"})
        for phase in S.PHASE_NAMES:
            for queue in queues:
                got = self.sample("remora_jobs", {"phase": phase, "queue": queue})
                n = want.get((phase, queue), 0)
                if (got or 0) != n:
                    problems.append(f"the jobs gauge counts {got} {phase} jobs in {queue}, not {n}")
        return problems

    def counter_problems(self) -> list[str]:
        n = self.counted
        problems: list[str] = []

        def check(
            name: str, labels: dict[str, str], got_of: list[dict[str, str]], want: int
        ) -> None:
            got = sum(self.sample(name, lb) or 0 for lb in got_of)
            if got != want:
                problems.append(f"the metric {name}{labels or ''} is {got}, {want} steps counted")

        check("remora_jobs_attempts_started_total", {}, [{}], n.get("ActivateAttempt", 0))
        check("remora_jobs_lease_renewals_total", {}, [{}], n.get("RenewLease", 0))
        for outcomes, actions in ENDED_COUNTS.items():
            labels = [{"outcome": o} for o in outcomes]
            want = sum(n.get(a, 0) for a in actions)
            check("remora_jobs_attempts_ended_total", labels[0], labels, want)
        for step in REAP_STEPS:
            check("remora_jobs_reaps_total", {"step": step}, [{"step": step}], n.get(step, 0))
        for kind, ending in (("shutdown", Ending.SHUTDOWN), ("declared", Ending.DECLARED_DOWN)):
            check(
                "remora_jobs_declare_downs_total",
                {"kind": kind},
                [{"kind": kind}],
                n.get(f"CrashWorker:{ending.name}", 0),
            )
        return problems


def read_model_problems(judge: ReadModelJudge, force: bool = False) -> list[str]:
    """What users read that disagrees with the run's account (module docstring): after a
    step that changed the durable store (``force``: regardless, after the drain)."""
    if not judge.changed() and not force:
        return []
    return judge.problems()


__all__ = ["ACCEPT_ENDINGS", "ReadModelJudge", "read_model_problems"]
