"""Mutants judged equivalent: no test can tell them apart from the original code.

Key: the mutant's key as printed by ``python -m tests.mutation --list``; value: why.
"""

from __future__ import annotations

EQUIVALENT: dict[str, str] = {}
