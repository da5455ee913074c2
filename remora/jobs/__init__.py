"""Remora jobs: the ``Remora.tla`` job protocol as a runtime.

The durable store (SQLite or PostgreSQL) is the sole authority; the coordination store
(memory or Redis) holds what can be rebuilt from it; target staging is per attempt
identity; the reconciler runs the spec's ambient actions.  Every runtime step records the
spec action it performs, and :mod:`remora.sim.jobs.refinement` checks runs against the spec.
One concept per module: the incarnation's steps (:mod:`.worker`), the production loop
(:mod:`.loop`) with its executors (:mod:`.executor`), attempts (:mod:`.attempt`) and
settlement (:mod:`.settlement`), the reconciler, the guards, the stores and the durable
store's parts (:mod:`.durable`).  See ``docs/jobs.md``.

Handler API::

    from remora import jobs

    @jobs.handler("greet")
    def greet(ctx: jobs.JobContext) -> str:
        return f"hello {ctx.payload['name']}"
"""

from __future__ import annotations

from remora.jobs.handlers import (
    REGISTRY,
    Cancelled,
    JobContext,
    Permanent,
    Registry,
    Retryable,
    UnknownHandler,
    handler,
    load_app,
)
from remora.jobs.model import (
    AttemptId,
    JobRow,
    JobsConfig,
    NotEnabled,
    Outcome,
    Phase,
    UnknownJob,
)

__all__ = [
    "REGISTRY",
    "AttemptId",
    "Cancelled",
    "JobContext",
    "JobRow",
    "JobsConfig",
    "NotEnabled",
    "Outcome",
    "Permanent",
    "Phase",
    "Registry",
    "Retryable",
    "UnknownHandler",
    "UnknownJob",
    "handler",
    "load_app",
]
