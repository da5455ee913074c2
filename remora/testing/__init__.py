"""Test doubles and test machinery: nothing here is part of the production runtime.

* :mod:`remora.testing.faults` — :class:`ScriptedFaults`, a programmable fault hook;
* :mod:`remora.testing.clients` — :class:`LogClient`, an in-process source client;
* :mod:`remora.testing.scratch` — throw-away PostgreSQL databases;
* :mod:`remora.testing.stores` — fresh stores of any kind for a replay;
* :mod:`remora.testing.strategies`, :mod:`remora.testing.machines`,
  :mod:`remora.testing.profiles` — Hypothesis strategies, state machines and profiles.

Production packages never import from here (``tests/test_boundaries.py`` enforces it).
This ``__init__`` imports nothing, so the doubles that do not need Hypothesis (the first
four) load without it.
"""
