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

_IDLE_WAIT = (
    "`Coordinator.idle`'s wait loop `generation == self.generation` -> `!=`: idle() has "
    "just returned early unless the generation is the current one, so the mutated loop "
    "never waits and idle() returns at once; the member's poll loop then re-fetches its "
    "(empty) share and calls idle() again until the generation changes or the group "
    "closes, exactly where the wait would have woken it -- the member is added to the "
    "idle set (and `done` detected) before the loop either way; only CPU time differs"
)
_STALE_PARTITIONS = (
    "`GroupClient._revoke` without `self.partitions = []`: every path after a revoke "
    "either sets `partitions` from the join (poll), resets it (restart), or revokes again "
    "(a newer generation, close), where the stale list only reaches `on_revoked` -- "
    "`Lifecycle.revoke`, which clears an already empty assignment without I/O; fetch "
    "skips the stale partitions because `cursors.clear()` removed their positions"
)
_GENERATION_NOTIFY = (
    "`_next_generation` without `notify_all()`: it runs only inside `progress`, called by "
    "a member's poll that returns records; that member then always reaches a call that "
    "notifies -- its next poll joins the new generation (`join` notifies), a failure "
    "restarts it into the same join, and a group-wide error or stop closes the "
    "coordinator (`close` notifies) -- so every member waiting for the generation to "
    "change wakes either way, with the same assignments and records; only later"
)
_STATS_DEFAULT = (
    "a default of `GroupStats`: its only construction (`WorkerGroup.run`) passes every "
    "field, so no default is ever used"
)

_INDEX_SPACING = (
    "which records `_PartitionFile.validated` indexes (every 1024th, another spacing, none "
    "but the first, or nearly all): every entry `(end, start)` pairs a line start with one "
    "past the offset before it, a valid (floor, pos) wherever it is taken, and "
    "`next_visible` only uses the index to restart reading at some entry whose floor is at "
    "or below the position, then reads forward to the first visible record at or after "
    "it -- the same record from any such entry; only how far it rereads differs"
)
_RESTART_AT_FLOOR = (
    "`next_visible`'s `position < self.floor` -> `<=`: at `position == floor` the mutant "
    "restarts from the last index entry at or below the position (a valid (floor, pos), see "
    "the index spacing) instead of reading on; reading forward from either returns the first "
    "visible record at or after the position"
)
_INITIAL_FLOOR = (
    "`_PartitionFile`'s initial `floor = 0` -> `1`: the floor is read only by "
    "`position < self.floor`; for position 0 the mutant restarts at index entry (0, 0), "
    "exactly the initial (floor, pos), and for any larger position neither restarts, so "
    "both read from byte 0"
)

_RAW_NUL = (
    "`_may_hold_unstorable`'s `'\\x00' in text` -> `not in`: it is called only after "
    "`_DECODER.decode(text)` succeeded, and the strict JSON parser refuses a raw NUL "
    "everywhere (inside a string: an invalid control character; outside: not JSON), so "
    "`'\\x00' in text` is always false there and the mutant's test always true: the exact "
    "walk `unstorable_in` then runs on every value instead of only on those with a `\\u` "
    "escape, and finds nothing in a value without one (a decoded string holds NUL or a lone "
    "surrogate only through such an escape) -- the same result, more work"
)

_END_PROCESS_DONE = (
    "`AttemptContext._end_steps`: `done = True` -> `False` after a `process` step refused "
    "because another actor took the outcome first: `done` is read only by the `stop` "
    'step\'s test (`step == "stop" and not done`), and this branch runs only for `process` '
    "(any other refused step re-raises first), so the value is never read"
)
_WRITTEN_IS_LIVE = (
    "CommitCredentialVersion's second conjunct (the vault holds a live secret) follows from "
    "its first in every reachable state: an intent becomes Written only by "
    "RecordCredentialWrite, which needs the secret live, and only "
    "DestroyClaimedCredentialSecret ends a live secret, which needs the intent Abandoning — "
    "Written implies live (Remora.tla), so dropping the check changes no step"
)

EQUIVALENT: dict[str, str] = {
    "remora/jobs/guards.py:Guards.commit_credential_version:delete-statement#2": _WRITTEN_IS_LIVE,
    "remora/jobs/attempt.py:AttemptContext._end_steps:flip-bool#1": _END_PROCESS_DONE,
    "remora/domain/amendment.py:_may_hold_unstorable:compare#2": _RAW_NUL,
    "remora/source/files.py:_PartitionFile.__init__:constant#2": _INITIAL_FLOOR,
    "remora/source/files.py:_PartitionFile.validated:constant#4": _INDEX_SPACING,
    "remora/source/files.py:_PartitionFile.validated:compare#1": _INDEX_SPACING,
    "remora/source/files.py:_PartitionFile.validated:constant#5": _INDEX_SPACING,
    "remora/source/files.py:_PartitionFile.validated:delete-statement#1": _INDEX_SPACING,
    "remora/source/files.py:_PartitionFile.next_visible:compare#1": _RESTART_AT_FLOOR,
    "remora/worker/group.py:Coordinator.idle:compare#3": _IDLE_WAIT,
    "remora/worker/group.py:GroupClient._revoke:delete-statement#2": _STALE_PARTITIONS,
    "remora/worker/group.py:Coordinator._next_generation:delete-statement#5": _GENERATION_NOTIFY,
    "remora/worker/group.py:GroupStats:constant#1": _STATS_DEFAULT,
    "remora/worker/group.py:GroupStats:constant#2": _STATS_DEFAULT,
    "remora/worker/group.py:GroupStats:constant#3": _STATS_DEFAULT,
    "remora/worker/group.py:GroupStats:flip-bool#1": _STATS_DEFAULT,
    "remora/worker/group.py:GroupStats:flip-bool#2": _STATS_DEFAULT,
    "remora/store/sqlite.py:SqliteBackend._open:compare#2": _DEADLINE,
    "remora/store/sqlite.py:SqliteBackend._begin:compare#4": _DEADLINE,
    "remora/store/sqlite.py:SqliteBackend._open:constant#1": _BACKOFF,
    "remora/store/sqlite.py:SqliteBackend._begin:constant#1": _BACKOFF,
    "remora/store/sqlite.py:SqliteBackend._open:delete-statement#4": _NO_PAUSE,
    "remora/store/sqlite.py:SqliteBackend._begin:delete-statement#4": _NO_PAUSE,
}
