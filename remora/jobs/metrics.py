"""A worker's Prometheus metrics (``remora jobs worker --metrics-port N``), counted from the
step records the process already writes — not from increments scattered through the
runtime.

Why from the records: every runtime step records the spec action it performed
(:class:`~remora.jobs.io.StepRecord`, with the step's facts: an accepted failure's error,
how long the job waited); :class:`MetricsRecorder` is one more recorder teed beside the
log and ``--record`` ones, so a metric cannot disagree with the log line or the recorded
run of the same step, and the runtime knows nothing of Prometheus.  The jobs by phase are
read from the durable store at scrape time (one aggregate statement).

Each process counts the steps *it* took: an attempt's end is counted by the process whose
worker or reconciler took the ending step (``Accept*``, ``ReapLostAttempt``,
``FinalizeCancel``; its own shutdown, ``CrashWorker``), and each such step is taken by
exactly one process — so the sums over a deployment's workers count each end once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from remora.errors import RemoraError
from remora.jobs.actions import Action
from remora.jobs.history import ACCEPTED, TIMED_OUT, Ending
from remora.jobs.io import StepRecord
from remora.jobs.model import AttemptId, Phase

#: Seconds: from a fast no-op job to a long batch job.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
WAIT_BUCKETS = DURATION_BUCKETS
#: The attempts a recorder remembers activating (an attempt another process ended is never
#: seen to end here: the oldest are forgotten beyond this many).
MAX_ACTIVE = 100_000


class _Jobs(Collector):
    """``remora_jobs{phase, queue}``: the jobs in each phase and queue, read from the
    durable store at scrape time; ``remora_jobs_store_up`` says whether it could be read
    (a scrape never fails because the store is unreachable)."""

    def __init__(self, durable: Any) -> None:
        self.durable = durable

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily(
            "remora_jobs", "Jobs in each phase and queue (durable store)", labels=["phase", "queue"]
        )
        up = GaugeMetricFamily("remora_jobs_store_up", "1 if the durable store answered the scrape")
        try:
            counts = self.durable.counts()
        except (RemoraError, OSError):
            up.add_metric([], 0)
            yield up
            return
        queues = sorted({q for _, q in counts} or {"default"})
        for phase in Phase:
            for queue in queues:
                jobs.add_metric([phase.value, queue], counts.get((phase.value, queue), 0))
        up.add_metric([], 1)
        yield jobs
        yield up


class JobMetrics:
    """The metrics of one worker process, in a registry of their own."""

    def __init__(self, durable: Any = None, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.started = Counter(
            "remora_jobs_attempts_started", "Attempts activated (ActivateAttempt)", registry=r
        )
        self.ended = Counter(
            "remora_jobs_attempts_ended",
            "Attempts ended, by why (history's endings: succeeded, failed, retryable, "
            "exhausted, timed_out, reaped, cancelled, shutdown)",
            ["outcome"],
            registry=r,
        )
        self.timeouts = Counter(
            "remora_jobs_timeouts", "Attempts ended by their handler's timeout", registry=r
        )
        self.reaps = Counter(
            "remora_jobs_reaps",
            "Reaper steps (ExpireLease, ExpireReservation, ReapLostAttempt)",
            ["step"],
            registry=r,
        )
        self.declared_down = Counter(
            "remora_jobs_declare_downs",
            "Incarnations gone down (CrashWorker): declared by this process, or its shutdown",
            ["kind"],
            registry=r,
        )
        self.renewals = Counter("remora_jobs_lease_renewals", "Leases renewed", registry=r)
        self.duration = Histogram(
            "remora_jobs_attempt_duration_seconds",
            "From activation to the end, of the attempts this process activated",
            ["outcome"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.wait = Histogram(
            "remora_jobs_queue_wait_seconds",
            "From queued (or due) to authorized, on the durable store's clock",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        #: The jobs-by-phase collector (None without a durable store): a scrape runs it.
        self.jobs: _Jobs | None = None
        if durable is not None:
            self.jobs = _Jobs(durable)
            r.register(self.jobs)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def recorder(self) -> MetricsRecorder:
        return MetricsRecorder(self)

    def serve(self, host: str, port: int) -> int:
        """Serve the Prometheus text on ``host:port`` (0: a free port) in a daemon thread;
        returns the port."""
        self._server, self._thread = start_http_server(port, host, registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class MetricsRecorder:
    """A :class:`~remora.jobs.io.Recorder` that counts the steps it is given."""

    def __init__(self, metrics: JobMetrics) -> None:
        self.m = metrics
        self._lock = threading.Lock()
        #: The attempts activated here and not yet ended: (worker, wall time).
        self._active: dict[AttemptId, tuple[str, float]] = {}

    def record(self, step: StepRecord) -> None:
        m, action, p = self.m, step.action, step.params
        with self._lock:
            if action == Action.ACTIVATE_ATTEMPT:
                m.started.inc()
                self._active[AttemptId.parse(str(p["a"]))] = (step.actor, step.wall)
                if len(self._active) > MAX_ACTIVE:  # ended elsewhere: forget the oldest
                    del self._active[next(iter(self._active))]
            elif action == Action.RENEW_LEASE:
                m.renewals.inc()
            elif action == Action.AUTHORIZE_ATTEMPT and "waited" in step.facts:
                m.wait.observe(float(step.facts["waited"]))
            elif action in ACCEPTED:
                ending = ACCEPTED[action]
                if ending is Ending.RETRYABLE and str(step.facts.get("error", "")).startswith(
                    TIMED_OUT
                ):
                    ending = Ending.TIMED_OUT
                    m.timeouts.inc()
                self._end(AttemptId.parse(str(p["a"])), ending, step.wall)
            elif action in (
                Action.EXPIRE_LEASE,
                Action.EXPIRE_RESERVATION,
                Action.REAP_LOST_ATTEMPT,
            ):
                m.reaps.labels(step=str(action)).inc()
                if action == Action.REAP_LOST_ATTEMPT:
                    self._end(AttemptId.parse(str(p["a"])), Ending.REAPED, step.wall)
            elif action == Action.FINALIZE_CANCEL:
                job = str(p["j"])
                mine = [a for a in self._active if a.job == job]
                for a in mine or [AttemptId(job, 0)]:
                    self._end(a, Ending.CANCELLED, step.wall)
            elif action == Action.CRASH_WORKER:
                w = str(p["w"])
                kind = "shutdown" if step.actor == w else "declared"
                m.declared_down.labels(kind=kind).inc()
                if kind == "shutdown":
                    for a in [a for a, (by, _) in self._active.items() if by == w]:
                        self._end(a, Ending.SHUTDOWN, step.wall)

    def _end(self, a: AttemptId, ending: Ending, wall: float) -> None:
        label = LABELS[ending]
        self.m.ended.labels(outcome=label).inc()
        started = self._active.pop(a, None)
        if started is not None:
            self.m.duration.labels(outcome=label).observe(max(wall - started[1], 0.0))


#: The ``outcome`` label of each ending.
LABELS = {
    Ending.SUCCEEDED: "succeeded",
    Ending.FAILED: "failed",
    Ending.RETRYABLE: "retryable",
    Ending.EXHAUSTED: "exhausted",
    Ending.TIMED_OUT: "timed_out",
    Ending.REAPED: "reaped",
    Ending.CANCELLED: "cancelled",
    Ending.SHUTDOWN: "shutdown",
    Ending.DECLARED_DOWN: "declared_down",
    Ending.STOPPED: "stopped",
    Ending.REJECTED: "rejected",
    Ending.RUNNING: "running",
}


__all__ = ["DURATION_BUCKETS", "LABELS", "JobMetrics", "MetricsRecorder"]
