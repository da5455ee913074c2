"""A programmable fault hook for tests and examples: :class:`ScriptedFaults` (defined in
:mod:`remora.sim.faults`, which the simulations use on a plain install)."""

from remora.sim.faults import Script, ScriptedFaults

__all__ = ["Script", "ScriptedFaults"]
