"""The job runtime's stores on the real services, for the job machines: a scratch
PostgreSQL database per test (durable store, target and vault schemas) and a private Redis
namespace per example, on the simulation's logical clock.

:func:`service_backends` yields a :class:`ServiceBackends`; each call of it builds a fresh
:class:`~remora.jobs.stores.Stores` for one example: it first closes the previous example's
stores and deletes their namespace, then empties every ``remora_jobs_*`` table but the
schema's config (a ``TRUNCATE`` is about a hundred times cheaper than a database per
example), and opens the stores on a new namespace ``remora-machine:<random>``."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from remora.clock import LogicalClock
from remora.context import Context
from remora.jobs.coordination import MemoryCoordination
from remora.jobs.durable import open_postgres, open_sqlite
from remora.jobs.io import Actor
from remora.jobs.model import JobsConfig
from remora.jobs.redis_coordination import (
    KEY_NAMES,
    QUEUE_KEY_PREFIX,
    RedisCoordination,
    namespace_keys,
)
from remora.jobs.stores import Stores
from remora.jobs.target import DirectoryTarget, DirectoryVault
from remora.testing.job_machines import JobMachineBase, JobScheduleFailure
from tests.common.services import require_redis

# psycopg is imported where it is used: this module (and the job tests that import it)
# collect without it (tests/test_layout.py).

WAKEUPS_KEPT = 64
"""The wake-ups ``Enqueue`` keeps (its ``LTRIM``)."""


class ServiceBackends:
    """A stores factory over one scratch database and one Redis server (module docstring)."""

    #: The target shares the durable store's database (``PostgresTarget.locked_write``):
    #: the memory + SQLite run fuses the same writes
    #: (:class:`~remora.sim.jobs.simulation.FusedMemoryTarget`, ``JobConfig.fused_stage``).
    fuses_stage = True

    def __init__(self, dsn: str, redis_url: str) -> None:
        self.dsn = dsn
        self.redis_url = redis_url
        self.current: Stores | None = None
        self.built = 0
        self._tables: list[str] | None = None
        import psycopg
        from psycopg import sql

        # a throw-away database: its commits need not wait for the disk (the runtime's
        # transactions, locks and isolation are unchanged)
        with psycopg.connect(dsn, autocommit=True) as conn:
            name = conn.execute("SELECT current_database()").fetchone()
            assert name is not None
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(
                    sql.Identifier(str(name[0]))
                )
            )

    def __call__(self, clock: LogicalClock, config: JobsConfig) -> Stores:
        from remora.jobs.postgres import PostgresTarget, PostgresVault

        self.release()
        # migrated by the first example's open; later ones only check the schema version
        durable = open_postgres(self.dsn, migrate=not self.built, injected_clock=True)
        self._truncate()
        self.current = Stores(
            durable=durable,
            coordination=RedisCoordination(
                self.redis_url,
                config,
                namespace=f"remora-machine:{secrets.token_hex(6)}",
                clock=clock,
            ),
            target=PostgresTarget(self.dsn),
            vault=PostgresVault(self.dsn),
            clock=clock,
            config=config,
        )
        # A fresh Redis namespace cannot tell itself from a wiped one (no ``marks`` key):
        # its first Enqueue would republish the down marks, where a fresh memory store
        # starts marked — the twin found a first Enqueue whose republish lost its reply
        # done on memory and unavailable on Redis.  The scratch database holds nobody
        # down, so the marks are published first (as the coordination twin does).
        coordination = self.current.coordination
        assert isinstance(coordination, RedisCoordination)
        coordination.publish_down(Actor("setup", Context(clock)), [])
        self.built += 1
        return self.current

    def _truncate(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            if self._tables is None:
                rows = conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    "AND tablename LIKE 'remora_jobs_%' AND tablename <> 'remora_jobs_config'"
                ).fetchall()
                self._tables = sorted(str(r[0]) for r in rows)
            if self._tables:
                conn.execute(f"TRUNCATE {', '.join(self._tables)} RESTART IDENTITY")

    def keys(self) -> list[str]:
        """Every key of the current namespace (a wipe check reads them)."""
        if self.current is None:
            return []
        coord = self.current.coordination
        assert isinstance(coord, RedisCoordination)
        return sorted(k.decode() for k in coord.client.keys(f"{coord.ns}:*"))

    def audit(self) -> list[str]:
        """What the current namespace holds that its snapshot does not show and the
        durable store and the coordination log do not imply, after a drain
        (:func:`namespace_problems`, then :meth:`audit_wakeups`).  (The down marks are
        judged for every configuration by the run itself: :func:`~remora.sim.jobs.
        judgement.drained_coordination_problems`.)"""
        if self.current is None:
            return []
        coord = self.current.coordination
        assert isinstance(coord, RedisCoordination)
        return namespace_problems(coord, wakeups=False) + self.audit_wakeups()

    def audit_wakeups(self) -> list[str]:
        """The wake-ups equal what the coordination log implies (:func:`wakeup_problems`)."""
        if self.current is None:
            return []
        coord = self.current.coordination
        assert isinstance(coord, RedisCoordination)
        return wakeup_problems(coord)

    def release(self) -> None:
        """Close the current example's stores and delete its namespace."""
        stores, self.current = self.current, None
        if stores is None:
            return
        coord = stores.coordination
        assert isinstance(coord, RedisCoordination)
        try:
            coord.client.delete(*namespace_keys(coord.client, coord.ns))
        finally:
            stores.close()


def namespace_problems(coord: RedisCoordination, *, wakeups: bool = True) -> list[str]:
    """What ``coord``'s namespace holds that its snapshot does not show: a key outside the
    store's own, a queue ranking other than the queued jobs of that queue, an index of live
    leases other than the leases marked live, and (``wakeups``) wake-ups other than the
    ``Enqueue`` steps since the last wipe imply (:func:`wakeup_problems`).  Every Lua
    script keeps these (each runs atomically), so they hold after every call, not only
    after a drain."""
    client, ns = coord.client, coord.ns
    # one round trip for the queues' names, one for the rest (a pipeline, not atomic: the
    # callers call nothing meanwhile)
    queues = sorted(m.decode() for m in client.smembers(f"{ns}:queues"))
    pipe = client.pipeline(transaction=False)
    pipe.keys(f"{ns}:*")
    pipe.smembers(f"{ns}:queued")
    pipe.hgetall(f"{ns}:jobq")
    pipe.smembers(f"{ns}:live")
    pipe.hgetall(f"{ns}:lease")
    for q in queues:
        pipe.zrange(f"{ns}:{QUEUE_KEY_PREFIX}{q}", 0, -1)
    keys, queued_raw, jobq_raw, index_raw, leases, *rankings = pipe.execute()
    # the store's fixed keys as this suite knows them (not a patched list: a planted
    # wipe that forgets one must leave a key the audit sees), and its queues' rankings
    own = {f"{ns}:{k}" for k in KEY_NAMES} | {f"{ns}:{QUEUE_KEY_PREFIX}{q}" for q in queues}
    held = sorted(k.decode() for k in keys)
    problems = [f"the key {key} is not the store's" for key in held if key not in own]
    # each queue's ranking indexes exactly the queued jobs of that queue
    queued = {m.decode() for m in queued_raw}
    jobq = {k.decode(): v.decode() for k, v in jobq_raw.items()}
    ranked: dict[str, str] = {}
    for q, members in zip(queues, rankings, strict=True):
        for j in members:
            ranked[j.decode()] = q
    for j in sorted(set(ranked) - queued):
        problems.append(f"the ranking of queue {ranked[j]} holds {j}, which is not queued")
    for j in sorted(queued - set(ranked)):
        problems.append(f"the queued {j} is in no queue's ranking")
    if jobq != ranked:
        problems.append(f"the queue of each ranked job {jobq} is not its ranking's {ranked}")
    index = {m.decode() for m in index_raw}
    live = {k.decode() for k, v in leases.items() if v.endswith(b"|1")}
    for a in sorted(index - live):
        problems.append(f"the live-lease index holds {a}, whose lease is not live")
    for a in sorted(live - index):
        problems.append(f"the live lease of {a} is not in the live-lease index")
    return problems + (wakeup_problems(coord) if wakeups else [])


def wakeup_problems(coord: RedisCoordination) -> list[str]:
    """The wake-ups equal what the coordination log implies: one per ``Enqueue`` since the
    last wipe (the log starts at it), at most :data:`WAKEUPS_KEPT` (nothing here waits for
    work, so none is consumed)."""
    enqueued = sum(1 for e in coord.log() if e.action == "Enqueue")
    held = int(coord.client.llen(f"{coord.ns}:wake"))
    want = min(WAKEUPS_KEPT, enqueued)
    if held != want:
        return [f"the namespace holds {held} wake-ups, {want} Enqueue steps since the wipe"]
    return []


@contextmanager
def service_backends(dsn: str) -> Iterator[ServiceBackends]:
    """PostgreSQL (the scratch database ``dsn``: the plugin's ``remora_scratch_database``)
    + Redis stores for a job machine (skips, or fails under ``REMORA_REQUIRE_SERVICES=1``,
    when Redis is unreachable)."""
    url = require_redis()
    backends = ServiceBackends(dsn, url)
    try:
        yield backends
    finally:
        backends.release()


class FileBackends:
    """The embedded default's stores (``remora jobs`` without ``--dsn``/``--redis``:
    :func:`remora.cli.jobs.open_stores`): an SQLite database file, the staging directory
    beside it (:class:`~remora.jobs.target.DirectoryTarget`) and the vault directory
    (:class:`~remora.jobs.target.DirectoryVault`), with the process's memory coordination
    store; each call builds them in a fresh directory under ``root`` for one example,
    removing the previous example's."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.current: Stores | None = None
        self.dir: Path | None = None
        self.built = 0

    def __call__(self, clock: LogicalClock, config: JobsConfig) -> Stores:
        self.release()
        self.dir = Path(tempfile.mkdtemp(prefix="example-", dir=self.root))
        db = self.dir / "jobs.db"
        self.current = Stores(
            durable=open_sqlite(db),
            coordination=MemoryCoordination(clock, config),
            target=DirectoryTarget(db.with_name(db.name + ".stage")),
            vault=DirectoryVault(db.with_name(db.name + ".vault")),
            clock=clock,
            config=config,
        )
        self.built += 1
        return self.current

    def release(self) -> None:
        """Close the current example's stores and remove their directory."""
        stores, self.current = self.current, None
        where, self.dir = self.dir, None
        try:
            if stores is not None:
                stores.close()
        finally:
            if where is not None:
                shutil.rmtree(where, ignore_errors=True)


@contextmanager
def file_backends(root: Path) -> Iterator[FileBackends]:
    """The embedded default's file-backed stores for a job machine, under ``root``."""
    backends = FileBackends(root)
    try:
        yield backends
    finally:
        backends.release()


SHARE = 20
"""The machines over the services run ``max_examples // SHARE`` examples of the profile
(``ci``: 10, ``nightly``: 200).  It was 40 until stop 41, when the job machines' steps got
cheaper: at 5 examples the race machine over the services did not meet a PostgreSQL
staging cleanup that cleans every attempt of the job (stop 41's realistic bug); at 10 it
does."""


def services_budget() -> settings:
    current = settings.default
    assert current is not None
    return settings(current, max_examples=max(2, current.max_examples // SHARE))


def twin_machine(
    base: type[JobMachineBase], backends: ServiceBackends | FileBackends
) -> type[JobMachineBase]:
    """``base`` with a twin run on ``backends`` (a class of its own: its own reach)."""
    where = "Files" if isinstance(backends, FileBackends) else "Services"
    machine = type(f"{base.__name__}On{where}", (base,), {})
    machine.twin_backends = backends
    return machine


#: How a planted bug is hunted over the services: 60 derandomized examples, stopping at the
#: first failure (no shrinking).
HUNT = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
)


def killed(
    base: type[JobMachineBase],
    services: ServiceBackends | FileBackends,
    budget: settings | None = None,
) -> str:
    """The failure ``base`` over the services reports within ``budget`` (default
    :func:`hunt_budget`; it must report one)."""
    import pytest

    with pytest.raises(JobScheduleFailure) as info:
        run_state_machine_as_test(twin_machine(base, services), settings=budget or hunt_budget())
    return info.value.failure


def hunt_budget() -> settings:
    """:data:`HUNT` under ``ci``; under ``nightly`` twenty times its examples, randomized
    (each night a different search)."""
    from remora.testing.profiles import selected_profile

    if selected_profile() != "nightly":
        return HUNT
    return settings(HUNT, max_examples=20 * (HUNT.max_examples or 1), derandomize=False)


def plant_script(monkeypatch: Any, name: str, old: str, new: str) -> None:
    """A planted bug in the Lua script ``name`` (a step's, or a read's): ``old`` replaced by
    ``new`` (``monkeypatch``: pytest's, undone after the test)."""
    from remora.jobs import redis_coordination as rc

    table = rc.SCRIPTS if name in rc.SCRIPTS else rc.READS
    assert old in table[name], f"the planted bug no longer applies to {name}"
    monkeypatch.setitem(table, name, table[name].replace(old, new))
