"""The Hypothesis settings profiles of the suite (registered from ``conftest.py``).

* ``default`` — quick local runs.
* ``ci`` — set explicitly, so our budget wins over the ``ci`` profile Hypothesis loads by
  itself when the ``CI`` variable is set.  Derandomized (a CI failure replays bit for bit
  on a laptop), no example database (a clean clone has nothing to replay, and a database
  would make runs depend on history), ``print_blob`` on, and enough examples that every
  rule, operation x outcome, interleave kind and status is reached.
* ``nightly`` — twenty times the ``ci`` budget, randomized, with an example database so a
  failure is replayed first next time.  With ``REMORA_HYPOTHESIS_REDIS`` set to a Redis URL
  the database is a :class:`~hypothesis.extra.redis.RedisExampleDatabase`, so several
  machines share their failures.
* ``mutants`` — ``ci`` without the shrink and explain phases, for the mutation harness
  (``tests/mutation``): a mutant is killed by the first failing example, and shrinking it
  (a database file or threads per replay on some machines) only spent the mutant's
  timeout, so a killed mutant was recorded as a timeout.  Generation is the same as
  ``ci``'s, so the same examples run and the same mutants die.

Select one with ``REMORA_HYPOTHESIS_PROFILE`` or pytest's ``--hypothesis-profile``.

Registering the profiles also pins Hypothesis's pool of *local constants*
(:func:`pin_local_constants`): without it a derandomized run's examples depended on which
modules the process had imported before the test, so one test found a planted bug alone and
missed it after others in the same pytest-xdist worker.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

CI_EXAMPLES = 200
NIGHTLY_EXAMPLES = 20 * CI_EXAMPLES
DEFAULT_EXAMPLES = 40
REDIS_ENV = "REMORA_HYPOTHESIS_REDIS"
PROFILE_ENV = "REMORA_HYPOTHESIS_PROFILE"
REDIS_KEY_PREFIX = b"remora-hypothesis:"


def nightly_database(key_prefix: bytes = REDIS_KEY_PREFIX) -> ExampleDatabase:
    """Redis when ``REMORA_HYPOTHESIS_REDIS`` is set, else a local directory."""
    url = os.environ.get(REDIS_ENV)
    if url:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(url), key_prefix=key_prefix)
    return DirectoryBasedExampleDatabase(".hypothesis/examples")


def pin_local_constants() -> None:
    """Make generation independent of the process's history: Hypothesis (since 6.131)
    draws integers, strings and floats now and then from a pool of constants it scans out
    of every *local* module in ``sys.modules``, rescanning whenever a module is imported.
    Which modules a pytest-xdist worker has imported depends on the tests it ran before, so
    a derandomized example was not a function of the test alone: a planted bug's hunt that
    kills it when run by itself missed it in the suite, and a machine's reach changed with
    the tests beside it.  The pool is pinned empty here (Hypothesis's own global constants
    still apply).  Hypothesis is pinned (``.ci/constraints.txt``); on a version without the
    pool this does nothing."""
    from hypothesis.internal.conjecture import providers

    hyp: Any = providers
    if not hasattr(hyp, "_get_local_constants"):
        return
    pool = hyp._local_constants
    empty = type(pool)(
        integers=type(pool.integers)(),
        floats=type(pool.floats)(key=pool.floats.key),
        bytes=type(pool.bytes)(),
        strings=type(pool.strings)(),
    )
    original = hyp._get_local_constants
    original = getattr(original, "__wrapped_original__", original)

    def pinned() -> Any:
        return empty

    pinned.__wrapped_original__ = original  # type: ignore[attr-defined]
    hyp._get_local_constants = pinned
    hyp.CONSTANTS_CACHE.cache.clear()


def register_profiles() -> None:
    pin_local_constants()
    settings.register_profile("default", max_examples=DEFAULT_EXAMPLES, deadline=None)
    settings.register_profile(
        "ci",
        max_examples=CI_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile(
        "mutants",
        settings.get_profile("ci"),
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    )
    settings.register_profile(
        "nightly",
        max_examples=NIGHTLY_EXAMPLES,
        derandomize=False,
        database=nightly_database(),
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )


def selected_profile() -> str:
    return os.environ.get(PROFILE_ENV) or ("ci" if os.environ.get("CI") else "default")


def full_budget() -> bool:
    """True under a profile that promises reach (``ci`` or ``nightly`` sized)."""
    current = settings.default
    return current is not None and current.max_examples >= CI_EXAMPLES


__all__ = [
    "CI_EXAMPLES",
    "NIGHTLY_EXAMPLES",
    "DEFAULT_EXAMPLES",
    "REDIS_ENV",
    "PROFILE_ENV",
    "REDIS_KEY_PREFIX",
    "nightly_database",
    "pin_local_constants",
    "register_profiles",
    "selected_profile",
    "full_budget",
]
