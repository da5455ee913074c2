"""The user's Hypothesis kit: what a project that runs Remora's machines over its own
lifecycle, processing or store backend imports (``pip install 'remora[testing]'``).

* :mod:`remora.testing.plugin` — the pytest plugin (store fixtures of every kind);
* :mod:`remora.testing.profiles` — the Hypothesis settings profiles;
* :mod:`remora.testing.strategies` — strategies for worker schedules;
* :mod:`remora.testing.machines` — the worker machines a user subclasses;
* :mod:`remora.testing.group_machine` — the machine over the running worker group;
* :mod:`remora.testing.job_machines` — the job-runtime machines;
* :mod:`remora.testing.parallel` — the parallel machines (real threads, linearizability);
* :mod:`remora.testing.read_checks` — the observer-read contract a custom backend keeps;
* :mod:`remora.testing.faults` — :class:`ScriptedFaults`, a programmable fault hook;
* :mod:`remora.testing.clients` — :class:`LogClient`, an in-process source client.

The deterministic simulations the machines drive (and the command line runs) live in
:mod:`remora.sim`, which imports no Hypothesis; checks of Remora's own internals live in the
repository's ``tests/``.  Production packages, the command line and the simulations never
import from here (``tests/test_boundaries.py``).  This ``__init__`` imports nothing, so the
doubles that do not need Hypothesis (the last two) load without it.
"""

__all__: list[str] = []
