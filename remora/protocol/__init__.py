"""Executable port of ``Remora.tla``: the spec, an exhaustive explorer and liveness checks.

* :mod:`remora.protocol.spec` — constants, state, every operator/action/property by TLA+ name.
* :mod:`remora.protocol.config` — named configurations and TOML/JSON config files.
* :mod:`remora.protocol.explore` — breadth-first model checker (TLC-compatible counts).
* :mod:`remora.protocol.parallel` — the same search over several worker processes.
* :mod:`remora.protocol.tlc` — TLC's evaluation multiplicity for "states generated".
* :mod:`remora.protocol.liveness` — fair-SCC liveness checking and the fair drain.
* :mod:`remora.protocol.trace` — counterexample rendering (text and JSON).
* ``remora explore`` (:mod:`remora.cli.explore`) runs the explorer from the command line.
* :mod:`remora.protocol.names` — where each TLA+ definition lives in Python.
"""

from remora.protocol.errors import (
    ConfigError,
    ExplorationLimitError,
    ProtocolError,
    SpecEvaluationError,
)

__all__ = ["ConfigError", "ExplorationLimitError", "ProtocolError", "SpecEvaluationError"]
