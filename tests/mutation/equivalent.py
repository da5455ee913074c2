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
_NO_PAUSE = (
    "deleting the wall-clock pause between two polls of a lock held by another process "
    "(`time.sleep(pause)`, used only when no context is given: opening a file, recording a "
    "source identity): the loop still polls until the lock is free (then the same open or "
    "write) or until the same `lock_timeout` deadline (then the same error); only the CPU "
    "spent polling changes, which no result of the store shows"
)

EQUIVALENT: dict[str, str] = {
    "remora/store/sqlite.py:SqliteBackend._open:compare#2": _DEADLINE,
    "remora/store/sqlite.py:SqliteBackend._begin:compare#4": _DEADLINE,
    "remora/store/sqlite.py:SqliteBackend._open:constant#1": _BACKOFF,
    "remora/store/sqlite.py:SqliteBackend._begin:constant#1": _BACKOFF,
    "remora/store/sqlite.py:SqliteBackend._open:delete-statement#4": _NO_PAUSE,
    "remora/store/sqlite.py:SqliteBackend._begin:delete-statement#4": _NO_PAUSE,
}
