"""Riding out a store outage: the one rule both kinds of worker follow (``remora run
--outage-budget`` and ``remora jobs worker --outage-budget``).

Why a module of its own: a dropped connection to PostgreSQL or Redis is normal operation
(a restart, a failover, a network blip), and the stream worker and the job worker must
treat it the same way — call again with backoff, say once that they wait and once that
they resumed, and give up only when the store stayed away for longer than the budget:

* :func:`outage_policy` is the per-call retry (:class:`~remora.worker.retry.RetryPolicy`):
  waits doubling from :data:`FIRST_WAIT` up to :data:`LONGEST_WAIT` until they add up to
  the budget;
* :func:`backoff` is the same doubling for a loop that tries again on its next turn (the
  job worker's loop: wait about as long as the outage has lasted, between the two bounds);
* :class:`OutageWatch` watches calls to one or more services from every thread of the
  process: when each outage began, whether it has lasted past the budget, and the two lines
  an operator sees.  Only a call *begun* after an outage began and answered shows that the
  service is back: a call answered before it proves nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs

from remora.clock import Clock
from remora.worker.retry import RetryPolicy

DEFAULT_OUTAGE_BUDGET = 60.0
"""Seconds a worker waits for an unavailable store before it gives up (``--outage-budget``)."""
FIRST_WAIT = 0.1
LONGEST_WAIT = 2.0


def outage_policy(budget: float) -> RetryPolicy:
    """Waits doubling from 0.1 s up to 2 s between calls, until they add up to ``budget``
    seconds (at least the production policy's three calls)."""
    waits: list[float] = []
    wait = FIRST_WAIT
    while sum(waits) < budget or len(waits) < 2:
        waits.append(wait)
        wait = min(wait * 2, LONGEST_WAIT)
    return RetryPolicy(max_calls=len(waits) + 1, waits=tuple(waits))


def backoff(
    elapsed: float, *, shortest: float = FIRST_WAIT, longest: float = LONGEST_WAIT
) -> float:
    """The pause before trying again ``elapsed`` seconds into an outage: as long as it has
    lasted (so the pauses double), within ``shortest``..``longest``."""
    return min(longest, max(shortest, elapsed))


@attrs.frozen
class Outage:
    """An outage of ``service`` under way since ``since`` (the watch's clock); ``last`` is
    the latest failure seen."""

    service: str
    since: float
    last: BaseException

    def describe(self, now: float, budget: float) -> str:
        return (
            f"{self.service} stayed unavailable for {now - self.since:.1f} s, past the outage "
            f"budget ({budget:g} s, --outage-budget): {self.last}"
        )


class OutageWatch:
    """Calls to services, from any thread, as they end (module docstring).

    :meth:`failed` when a call found its service unavailable (the first one of an outage
    says so: ``waiting for SERVICE: …; retrying for up to N s (--outage-budget)``),
    :meth:`answered` when one came back (``SERVICE is back after X s; resuming`` when it had
    begun after the outage began); :meth:`exceeded` tells whether an outage under way has
    lasted past ``budget``."""

    def __init__(
        self,
        budget: float,
        clock: Clock,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.budget = budget
        self.clock = clock
        self.say = say
        self._lock = threading.Lock()
        self._outages: dict[str, Outage] = {}

    def now(self) -> float:
        return self.clock.now()

    def failed(self, service: str, error: BaseException, where: str = "") -> None:
        """A call to ``service`` (at ``where``, named in the first line) found it
        unavailable."""
        with self._lock:
            outage = self._outages.get(service)
            if outage is None:
                self._outages[service] = Outage(service, self.clock.now(), error)
                at = f" ({where})" if where else ""
                self.say(
                    f"waiting for {service}{at}: {error}; retrying for up to {self.budget:g} s "
                    "(--outage-budget)"
                )
            else:
                self._outages[service] = attrs.evolve(outage, last=error)

    def answered(self, service: str, started: float) -> None:
        """A call to ``service`` begun at ``started`` (this watch's clock) was answered."""
        if not self._outages:  # the common case: no outage, no lock
            return
        with self._lock:
            outage = self._outages.get(service)
            if outage is None or started < outage.since:
                return
            del self._outages[service]
            self.say(f"{service} is back after {self.clock.now() - outage.since:.1f} s; resuming")

    def ongoing(self) -> Outage | None:
        """The longest outage under way, if any."""
        with self._lock:
            return min(self._outages.values(), key=lambda o: o.since, default=None)

    def exceeded(self) -> Outage | None:
        """The outage under way that has lasted past the budget, if any."""
        outage = self.ongoing()
        if outage is not None and self.clock.now() - outage.since > self.budget:
            return outage
        return None


__all__ = [
    "DEFAULT_OUTAGE_BUDGET",
    "FIRST_WAIT",
    "LONGEST_WAIT",
    "Outage",
    "OutageWatch",
    "backoff",
    "outage_policy",
]
