"""Repository-wide pytest configuration: Hypothesis profiles.

Profiles (select with ``REMORA_HYPOTHESIS_PROFILE`` or ``--hypothesis-profile``):

* ``default`` — quick local runs.
* ``ci`` — registered explicitly so that our budget wins over the profile Hypothesis loads
  by itself when ``CI`` is set: derandomized (a CI failure reproduces bit for bit on a
  laptop), no example database (clean clones have nothing to replay), ``print_blob`` on.
* ``nightly`` — at least twenty times the ``ci`` budget, randomized, with an example
  database so failures are replayed first on the next run.  When
  ``REMORA_HYPOTHESIS_REDIS`` is set to a Redis URL the database is Redis-backed so several
  machines share their failures.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

CI_EXAMPLES = 200
NIGHTLY_EXAMPLES = 20 * CI_EXAMPLES


def nightly_database() -> ExampleDatabase:
    url = os.environ.get("REMORA_HYPOTHESIS_REDIS")
    if url:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(url), key_prefix=b"remora-hypothesis:")
    return DirectoryBasedExampleDatabase(".hypothesis/examples")


settings.register_profile(
    "default",
    max_examples=40,
    deadline=None,
)
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
    "nightly",
    max_examples=NIGHTLY_EXAMPLES,
    derandomize=False,
    database=nightly_database(),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)

_default_profile = "ci" if os.environ.get("CI") else "default"
settings.load_profile(os.environ.get("REMORA_HYPOTHESIS_PROFILE") or _default_profile)
