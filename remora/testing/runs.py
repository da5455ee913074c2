"""What a trace runs besides its schedule: the lifecycle, and the planted bug, it names.

A trace's ``config`` records what the run used when it was not the built-in default — a
named mutation (``config.mutation``) — so a replay or a reduction runs exactly that, never
silently the real lifecycle.  :func:`prepared` turns the recorded names into the objects to
run, inside a block (a mutation may patch for the block's duration); a name that cannot be
resolved is an :class:`~remora.errors.InvalidInput` naming the trace field.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from remora.errors import InvalidInput
from remora.sim.scheduler import LifecycleFactory
from remora.sim.trace import SimConfig
from remora.testing.mutations import mutation
from remora.worker import Lifecycle


@attrs.frozen
class RunSetup:
    """The objects a trace runs with."""

    lifecycle_factory: LifecycleFactory = Lifecycle


@contextmanager
def prepared(config: SimConfig) -> Iterator[RunSetup]:
    """Resolve what ``config`` names and keep it in force for the block."""
    if config.mutation is None:
        yield RunSetup()
        return
    try:
        planted = mutation(config.mutation)
    except InvalidInput as exc:
        raise InvalidInput(f"trace.config.mutation: {exc}") from None
    with planted.applied() as lifecycle:
        yield RunSetup(lifecycle)
