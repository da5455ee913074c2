"""Mutants judged equivalent: no test can tell them apart from the original code.

Key: the mutant's key as printed by ``python -m tests.mutation --list``; value: why.  A
mutant goes here only with a reason that holds for every input — never because it survived.
"""

from __future__ import annotations

_DEADLINE = (
    "`time.monotonic() >= give_up` -> `>`: the two differ only when the float clock reads "
    "exactly the deadline; then the mutant polls once more (at most 50 ms later) and gives "
    "up on the next check with the same error, so the result is the same"
)
_BACKOFF = (
    "the lock-poll back-off factor 2 -> 3 (`min(pause * 2, 0.05)`): only how often the "
    "lock is polled within `lock_timeout` changes; the wait still ends when the lock is "
    "free (the same write) or at the same deadline (the same error), capped at 50 ms a poll"
)

EQUIVALENT: dict[str, str] = {
    "remora/store/sqlite.py:SqliteBackend._open:compare#2": _DEADLINE,
    "remora/store/sqlite.py:SqliteBackend._begin:compare#4": _DEADLINE,
    "remora/store/sqlite.py:SqliteBackend._open:constant#1": _BACKOFF,
    "remora/store/sqlite.py:SqliteBackend._begin:constant#1": _BACKOFF,
}
