"""The app the simulation's handler processes import (:mod:`remora.sim.jobs.processes`):
one handler, :data:`~remora.sim.jobs.loops.HANDLER`, which runs the simulation's
deterministic handler (:meth:`SimLoops.handler <remora.sim.jobs.loops.SimLoops.handler>`)
of the run whose child thread calls it — as ``remora jobs worker --app`` names the module
its children import."""

from __future__ import annotations

from typing import Any

from remora.jobs.handlers import Registry
from remora.sim.jobs.loops import HANDLER, _current

registry = Registry()


@registry.handler(HANDLER)
def run(ctx: Any) -> bytes:
    """The simulation's handler of the run this child belongs to."""
    output: bytes = _current.loops.handler(ctx)
    return output
