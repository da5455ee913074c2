"""Per-attempt postconditions: the seed's method table and fault-boundary table as checks.

The oracle judges *committed state*; these rules judge each attempt's *observable result*
against the seed's rule for it, using the attempt's I/O calls (:class:`Call`, one per modeled
I/O return) and — where the store keeps one — the store's own log of what it actually wrote
(:attr:`remora.store.memory.MemoryBackend.write_log`).  They are independent of the oracle:
a lifetime that keeps a wrong token, or a fault seam that reports an effect the store never
made, is caught at the attempt where it happens even when the final state turns out right.

Method table (:func:`check_method`), for the step's own lifetime:

* ``assign`` ok — it holds the partition under exactly the token its own last claim wrote;
  and any assign — each claim follows a validation of that partition that returned ok;
* ``seek`` ok — no write of its own, the epoch it held, and a cursor at the frontier it holds;
* ``process`` ok — exactly one process write of its own, for that record, under the saved
  epoch, and it holds ``(epoch, offset + 1)``;
* ``revoke`` / ``stop`` — no I/O, nothing held (a stop also leaves the lifecycle stopped);
* any other result of an I/O callback — the lifetime holds nothing (it retired);
* ``fenced`` — only if the store's own row shows an epoch past the one the lifetime held
  (or claimed itself in the attempt): a healthy owner never gives up its partition, e.g.
  after an unknown result whose recovery read shows that nothing happened;
* a callback to a lifetime that was not live — no I/O at all;
* retries — every wait is one of the policy's, the first is the policy's first, and an
  exhausted operation waited all of them in order (retry loops nest, so no more is required).

Fault-boundary table (:func:`check_call`), per call of the step's own lifetime:

* every call — a write operation applied its effect iff the store logged exactly one write
  (reads never write);
* ``commit`` — observed ``ok``, ``fenced`` or ``canceled``; ``ok`` means applied;
* ``abort`` — observed ``unavailable`` (or ``canceled``), nothing applied;
* ``unknown-committed`` — observed ``unknown``/``fenced``/``canceled``; ``unknown`` means applied;
* ``unknown-aborted`` — observed ``unknown``/``fenced``/``canceled``, nothing applied;
* ``delay_ms`` — at least that much logical time passed during the call;
* interleave ``before`` with ``stop`` — no effect, observed ``canceled``; ``after`` with
  ``stop`` — observed ``canceled`` (an ``abort`` may still observe ``unavailable``, and a
  write the fence refused, nothing applied, ``fenced``); either
  way the attempt fails and the lifetime holds nothing and is stopped;
* interleave ``before`` with a replacement that started (outcome not ``abort``), on
  ``process`` — fenced, no effect;
  on a seek's ``observe`` — the seek fails (an assign's recovery read may be followed by a
  fresh claim that succeeds);
* interleave ``after`` with a replacement on an unknown ``process`` (the seed's epoch race) —
  the attempt fails, the lifetime holds nothing, and it made exactly the write the fault
  reported (one for unknown-committed, none for unknown-aborted), never a second.

Budget table (:func:`check_budget`), for an assign, seek or process callback:

* no call of its own begins after the callback's budget (counted from when it was made,
  the wait for the lifetime's mutex included) is spent;
* a mutex that a concurrent call of the lifetime holds past the whole budget — the
  machines' ``contended`` rule, ``Step.mutex_held_ms`` — ends it ``deadline`` with no I/O,
  when the budget runs out.

Every violation's kind starts with ``postcondition-`` and names the row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from remora.oracle import Violation
from remora.store import Token
from remora.store.memory import Write

WRITES = ("claim", "process")
OBSERVED_FOR = {
    "commit": ("ok", "fenced", "canceled"),
    "abort": ("unavailable", "canceled"),
    "unknown-committed": ("unknown", "fenced", "canceled"),
    "unknown-aborted": ("unknown", "fenced", "canceled"),
}
"""What a caller may observe for each requested outcome (a fence or a cancellation wins)."""

FAILED = ("fenced", "exhausted", "unresolved", "deadline", "canceled", "invalid", "error")
"""Attempt results of a live lifetime's I/O callback that retire it."""


@attrs.frozen
class Call:
    """One modeled I/O call as the rules see it (kept beside the report's events)."""

    lifetime: int
    partition: int
    operation: str
    outcome: str
    selected: bool
    applied: bool | None
    observation: str
    writes: tuple[Write, ...] | None  # None: the store keeps no write log
    elapsed_ms: int
    delay_ms: int = 0
    at: str | None = None  # interleave boundary
    stop: bool = False
    replacement: int | None = None
    replacement_started: bool = False
    started_ms: int = 0  # logical time the call began (after its retry wait, if any)


@attrs.frozen
class Before:
    """The step's lifetime as it was when the attempt began."""

    live: bool
    held: Token | None  # the token it held for the step's partition
    record_offset: int | None = None  # the record a process step submitted


@attrs.frozen
class After:
    """The step's lifetime when the attempt ended."""

    owned: Mapping[int, Token]
    stopped: bool
    cursor: int | None  # its fetch position for the step's partition
    installed: Token | None = None  # the store's own row for the step's partition, at the end


def _v(row: str, partition: int | None, message: str) -> Violation:
    return Violation(f"postcondition-{row}", partition, message)


def check_call(
    call: Call, attempt_result: str, after: After, actor: str = "process"
) -> list[Violation]:
    """One call of the step's own lifetime (in an attempt of ``actor``) against the
    fault-boundary table."""
    found: list[Violation] = []
    p, op, obs = call.partition, call.operation, call.observation
    where = f"{op} ({call.outcome}, observed {obs})"
    if call.writes is not None:
        n = len(call.writes)
        want = 1 if call.applied and op in WRITES else 0
        if call.applied is not None and n != want:
            found.append(
                _v("effect", p, f"{where} reported applied={call.applied}, store wrote {n}")
            )
        if any(w.operation != op or w.partition != p for w in call.writes):
            found.append(_v("effect", p, f"{where} wrote {list(call.writes)}"))
    if not call.selected:
        return found
    allowed = OBSERVED_FOR.get(call.outcome, ())
    if obs not in allowed:
        found.append(_v(call.outcome, p, f"{where}: may only observe {allowed}"))
    if call.outcome in ("abort", "unknown-aborted") and call.applied:
        found.append(_v(call.outcome, p, f"{where} applied its effect"))
    if call.outcome == "commit" and obs == "ok" and not call.applied:
        found.append(_v("commit", p, f"{where} observed ok without its effect"))
    if call.outcome == "unknown-committed" and obs == "unknown" and not call.applied:
        found.append(_v("unknown-committed", p, f"{where} observed unknown, nothing applied"))
    if call.elapsed_ms < call.delay_ms:
        found.append(_v("delay", p, f"{where}: {call.elapsed_ms} ms passed, delay {call.delay_ms}"))
    if call.at is None:
        return found
    boundary = f"interleave-{call.at}"
    if call.stop:
        # an abort at ``after`` raises its unavailability before the cancellation is seen;
        # a write the store's fence refused (nothing applied) raised ``Fenced`` before the
        # stop at ``after`` ran: the fence wins, as in the outcome table
        seen = ("canceled", "unavailable") if call.outcome == "abort" else ("canceled",)
        if call.at == "after" and not call.applied and call.outcome != "abort":
            seen = (*seen, "fenced")
        if obs not in seen or (call.at == "before" and call.applied):
            found.append(_v(boundary, p, f"{where} after a stop at {call.at}"))
        if attempt_result == "ok" or after.owned or not after.stopped:
            found.append(
                _v(
                    boundary,
                    p,
                    f"stopped at {call.at} of {op}, the attempt ended {attempt_result!r} "
                    f"holding {dict(after.owned)} (stopped={after.stopped})",
                )
            )
        return found
    if call.replacement is None or not call.replacement_started:
        return found
    if call.outcome == "abort":
        return found  # an abort never reaches the effect or its fence
    if call.at == "before" and op == "process" and (obs != "fenced" or call.applied):
        found.append(_v(boundary, p, f"{where} after a replacement claimed the partition"))
    if call.at == "before" and op == "observe" and actor == "seek" and attempt_result == "ok":
        found.append(_v(boundary, p, "a seek succeeded after a replacement claimed the partition"))
    race = call.at == "after" and op == "process" and call.outcome.startswith("unknown")
    if race and (attempt_result == "ok" or p in after.owned):
        found.append(
            _v(
                "epoch-race",
                p,
                f"{where} then a replacement: the attempt ended {attempt_result!r} "
                f"holding {dict(after.owned)}",
            )
        )
    return found


def check_method(
    actor: str,
    partition: int | None,
    result: str,
    calls: Sequence[Call],
    before: Before,
    after: After,
    waits_ms: Sequence[int],
    policy_waits_ms: Sequence[int],
) -> list[Violation]:
    """The attempt of ``actor`` against the method table (``calls``: its own lifetime's)."""
    found: list[Violation] = []
    p = partition
    logged = all(c.writes is not None for c in calls)
    own_writes = [w for c in calls for w in (c.writes or ())]
    if not before.live:
        if calls:
            found.append(_v("rejected", p, f"{actor} of a lifetime that was not live made I/O"))
        return found
    if actor in ("revoke", "stop"):
        if calls or after.owned:
            found.append(_v(actor, None, f"{actor}: {len(calls)} calls, holds {dict(after.owned)}"))
        if actor == "stop" and not after.stopped:
            found.append(_v("stop", None, "the lifecycle is not stopped after stop"))
        return found
    # Retry loops nest (a recovery read retries inside a claim's or a process's loop), so
    # only what holds under nesting is required: every wait is a policy wait, the first one
    # is the first policy wait, and an exhausted operation's waits all appear in order.
    policy = list(policy_waits_ms)
    odd = [w for w in waits_ms if w not in policy]
    if odd or (waits_ms and policy and waits_ms[0] != policy[0]):
        found.append(_v("retry", p, f"waited {list(waits_ms)}; the policy waits {policy}"))
    if result == "exhausted" and not _in_order(policy, waits_ms):
        found.append(_v("retry", p, f"exhausted after waits {list(waits_ms)}, policy {policy}"))
    if actor == "assign":
        found += _claims_validated(p, calls)
    if result in FAILED and actor in ("assign", "seek", "process") and after.owned:
        found.append(_v("failure", p, f"{actor} ended {result!r} holding {dict(after.owned)}"))
    if result == "fenced" and p is not None and after.installed is not None:
        found += _spurious_fence(actor, p, before, own_writes, after.installed)
    if result != "ok" or p is None:
        return found
    held = after.owned.get(p)
    if actor == "assign":
        claims = [w for w in own_writes if w.operation == "claim"]
        if held is None or held.epoch < 1:
            found.append(_v("assign", p, f"assign ok, holds {held}"))
        elif logged and (not claims or held != Token(claims[-1].epoch, claims[-1].frontier)):
            found.append(_v("assign", p, f"assign ok holding {held}, its claims wrote {claims}"))
        elif before.held is not None and held.epoch <= before.held.epoch:
            found.append(_v("assign", p, f"assign ok holding {held}, held {before.held}"))
    elif actor == "seek":
        if own_writes:
            found.append(_v("seek", p, f"seek wrote {own_writes}"))
        if held is None or before.held is None or held.epoch != before.held.epoch:
            found.append(_v("seek", p, f"seek ok holding {held}, held {before.held} before"))
        elif after.cursor != held.frontier:
            found.append(_v("seek", p, f"seek ok holding {held}, cursor at {after.cursor}"))
    elif actor == "process":
        offset, saved = before.record_offset, before.held
        if offset is None or saved is None:
            return found
        if held != Token(saved.epoch, offset + 1):
            found.append(_v("process", p, f"processed offset {offset} under {saved}, holds {held}"))
        if logged and [(w.operation, w.epoch, w.offset) for w in own_writes] != [
            ("process", saved.epoch, offset)
        ]:
            found.append(_v("process", p, f"processed offset {offset}, wrote {own_writes}"))
    return found


def check_budget(
    actor: str,
    partition: int | None,
    result: str,
    calls: Sequence[Call],
    started_ms: int,
    ended_ms: int,
    budget_ms: int,
    mutex_held_ms: int,
) -> list[Violation]:
    """The operation budget starts when the callback is made, before the wait for the
    lifetime's mutex (``mutex_held_ms``: how long a concurrent call held it), on the
    simulation's clock: no call of the step's own lifetime begins after the budget is
    spent; and a mutex held past the whole budget ends the attempt ``deadline`` with no I/O,
    exactly when the budget runs out — not when the holder lets go."""
    if actor not in ("assign", "seek", "process"):
        return []
    found: list[Violation] = []
    deadline = started_ms + budget_ms
    late = [c for c in calls if c.started_ms > deadline]
    if late:
        found.append(
            _v(
                "budget",
                partition,
                f"{actor}: {late[0].operation} began at {late[0].started_ms} ms, the budget of "
                f"the callback made at {started_ms} ms ran out at {deadline} ms "
                f"(mutex held {mutex_held_ms} ms)",
            )
        )
    made = result not in ("idle", "unseeked", "unstarted")  # else no callback was made
    if (
        made
        and mutex_held_ms > budget_ms
        and (result, len(calls), ended_ms)
        != (
            "deadline",
            0,
            deadline,
        )
    ):
        found.append(
            _v(
                "mutex-budget",
                partition,
                f"{actor} found the mutex held {mutex_held_ms} ms, past its {budget_ms} ms "
                f"budget: ended {result!r} after {ended_ms - started_ms} ms with "
                f"{len(calls)} calls (want 'deadline' after {budget_ms} ms, no I/O)",
            )
        )
    return found


def _claims_validated(p: int | None, calls: Sequence[Call]) -> list[Violation]:
    """An assignment claims a partition only after validating its source: each claim
    call follows a validate call of that partition that returned ``ok`` (so an assignment
    whose validation fails leaves the partition's epoch, and its owner, alone)."""
    validated: set[int] = set()
    for c in calls:
        if c.operation == "validate" and c.observation == "ok":
            validated.add(c.partition)
        elif c.operation == "claim" and c.partition not in validated:
            return [_v("assign", p, f"claimed partition {c.partition} before validating it")]
    return []


def _spurious_fence(
    actor: str, p: int, before: Before, own_writes: Sequence[Write], installed: Token
) -> list[Violation]:
    """A lifetime gives up a partition as fenced only when the store's epoch for it really
    moved past the lifetime's: past the epoch it held when the attempt began and past every
    claim of its own in the attempt (read from the store's write log, where it keeps one)."""
    mine = [w.epoch for w in own_writes if w.operation == "claim" and w.partition == p]
    if before.held is not None:
        mine.append(before.held.epoch)
    if mine and installed.epoch <= max(mine):
        return [
            _v(
                "spurious-fence",
                p,
                f"{actor} ended fenced holding epoch {max(mine)}, but the store's epoch is "
                f"still {installed.epoch}: nothing fenced it",
            )
        ]
    return []


def _in_order(wanted: Sequence[int], seen: Sequence[int]) -> bool:
    """``wanted`` is a subsequence of ``seen``."""
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


__all__ = [
    "WRITES",
    "OBSERVED_FOR",
    "FAILED",
    "Call",
    "Before",
    "After",
    "check_call",
    "check_method",
    "check_budget",
]
