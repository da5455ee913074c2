"""The concurrency campaign: every planted concurrency bug against the sequential machines
and against the parallel machines, in the same budget.

    python -m tests.parallel.campaign [--only NAME] [--no-shrink] [--no-sequential]

For each bug of ``tests/parallel/planted.py`` (and ``tests/postgres/parallel_planted.py``
when PostgreSQL is reachable: ``$REMORA_PG_DSN`` or 127.0.0.1:5432): the sequential machines
that run its code — the memory machines (``SinglePartitionHeavyFaults``,
``ManyPartitionsAndLifetimes``, ``CombinationSweep``) for a memory store or a lifecycle, the
SQLite machines (``ManyPartitionsOnSqlite``, and ``SqliteFileMachine``, whose file rules
open second connections) for an SQLite store, the first two over PostgreSQL for a PostgreSQL
store — each get as many examples as the parallel machine's budget (derandomized, no
shrinking); then the parallel machine hunts it (derandomized, shrinking the failure).
Prints: the bug, whether the sequential machines killed it (and which, after how many
examples), whether the parallel machine did, its examples and seconds to the first failure,
the shrunk example's commands, how many of ``reproduce`` re-runs of its recorded schedule
failed again, and the failure.  The shrunk examples stay in ``artifacts/campaign/``.
Exit 1 unless every bug is killed by the parallel machines and none by the sequential ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from hypothesis.stateful import run_state_machine_as_test

from remora.sim.trace import SimConfig
from remora.store import StateStore
from remora.testing.machines import WorkerScheduleMachine
from remora.testing.profiles import register_profiles
from tests.parallel.hunt import Planted, hunt, hunt_settings
from tests.parallel.machines import BUDGET, PLANTED_CASES
from tests.stateful import sqlite_checks
from tests.stateful.machines import (
    CombinationSweep,
    ManyPartitionsAndLifetimes,
    ManyPartitionsOnSqlite,
    SinglePartitionHeavyFaults,
)
from tests.stateful.store_machines import SqliteFileMachine

CAMPAIGN_DIR = Path("artifacts") / "campaign"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


@attrs.define
class Row:
    bug: str
    store: str
    budget: int
    sequential: str = "-"  # "no (N examples each: machines)" or "KILLED by M after N"
    sequential_killed: bool = False
    sequential_seconds: float = 0.0
    killed: bool = False
    examples: int = 0
    seconds: float = 0.0
    commands: int | None = None
    reproduced: str = "-"
    failure: str = "survived"


# -- the sequential side ----------------------------------------------------------------


@contextmanager
def sequential_setup(planted: Planted) -> Iterator[list[type[WorkerScheduleMachine]]]:
    """The sequential machines running ``planted``'s code (module docstring)."""
    store = planted.machine.store
    if planted.lifecycle is not None:
        lifecycle = planted.lifecycle
        yield [
            type(f"{m.__name__}-{planted.name}", (m,), {"lifecycle_factory": lifecycle})
            for m in (SinglePartitionHeavyFaults, ManyPartitionsAndLifetimes, CombinationSweep)
        ]
        return
    backend = planted.backend
    if store == "memory":

        def memory(config: SimConfig) -> StateStore:
            return StateStore(backend())

        yield [
            type(f"{m.__name__}-{planted.name}", (m,), {"store_factory": memory})
            for m in (SinglePartitionHeavyFaults, ManyPartitionsAndLifetimes, CombinationSweep)
        ]
        return
    if store == "sqlite":
        base = tempfile.TemporaryDirectory(prefix="remora-campaign-")

        def sqlite(config: SimConfig) -> StateStore:
            # a folder per run, as sqlite_file_store makes (the file machine removes it)
            folder = tempfile.mkdtemp(dir=base.name)
            return StateStore(backend(Path(folder) / "state.sqlite3"))

        saved = sqlite_checks.BACKEND
        sqlite_checks.BACKEND = backend  # the file rules' second connections too
        try:
            yield [
                type(f"{m.__name__}-{planted.name}", (m,), {"store_factory": sqlite})
                for m in (ManyPartitionsOnSqlite, SqliteFileMachine)
            ]
        finally:
            sqlite_checks.BACKEND = saved
            base.cleanup()
        return
    from remora.sim.parallel import site

    with site("postgres", os.environ.get("REMORA_PG_DSN") or DEFAULT_PG) as where:

        def postgres(config: SimConfig) -> StateStore:
            location = where.fresh()  # the scratch database, emptied
            return StateStore(backend(location))

        yield [
            type(
                f"{m.__name__}-{planted.name}",
                (m,),
                {"store_factory": postgres, "store_kind": "postgres"},
            )
            for m in (SinglePartitionHeavyFaults, ManyPartitionsAndLifetimes)
        ]


def sequential_hunt(planted: Planted, budget: int, artifacts: Path) -> tuple[bool, str, float]:
    """Whether the sequential machines kill ``planted`` within ``budget`` examples each."""
    start = time.perf_counter()
    names = []
    with sequential_setup(planted) as machines:
        for machine in machines:
            count = [0]
            init: Callable[..., None] = machine.__init__

            def counting(
                self: Any, _init: Callable[..., None] = init, _c: list[int] = count
            ) -> None:
                _c[0] += 1
                _init(self)

            machine.__init__ = counting  # type: ignore[method-assign]
            name = machine.__name__.split("-")[0]
            names.append(name)
            with _artifacts(artifacts):
                try:
                    run_state_machine_as_test(machine, settings=hunt_settings(budget))
                except Exception as exc:  # a failure of any kind: the machine killed it
                    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    seconds = round(time.perf_counter() - start, 1)
                    return True, f"KILLED by {name} after {count[0]}: {first}", seconds
    seconds = round(time.perf_counter() - start, 1)
    return False, f"no ({budget} each: {', '.join(names)})", seconds


@contextmanager
def _artifacts(folder: Path) -> Iterator[None]:
    saved = os.environ.get("REMORA_ARTIFACT_DIR")
    os.environ["REMORA_ARTIFACT_DIR"] = str(folder)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("REMORA_ARTIFACT_DIR", None)
        else:
            os.environ["REMORA_ARTIFACT_DIR"] = saved


# -- the campaign -----------------------------------------------------------------------


def cases(with_postgres: bool) -> list[tuple[Planted, int]]:
    out = [(p, BUDGET[p.machine.__name__]) for p in PLANTED_CASES]
    if with_postgres:
        from tests.postgres.parallel_machines import PG_BUDGET, PG_PLANTED_CASES

        out += [(p, PG_BUDGET[p.machine.__name__]) for p in PG_PLANTED_CASES]
    return out


def postgres_reachable() -> bool:
    try:
        import psycopg

        with psycopg.connect(
            os.environ.get("REMORA_PG_DSN") or DEFAULT_PG, connect_timeout=3
        ) as conn:
            conn.execute("SELECT 1")
        return True
    except Exception:
        return False


def run_campaign(
    only: str | None = None,
    shrink: bool = True,
    sequential: bool = True,
    artifacts: Path = CAMPAIGN_DIR,
) -> list[Row]:
    rows = []
    pg = postgres_reachable()
    if pg:
        os.environ.setdefault("REMORA_PG_DSN", DEFAULT_PG)
    for planted, budget in cases(pg):
        if only is not None and only not in planted.name:
            continue
        row = Row(planted.name, planted.machine.store, budget)
        if sequential:
            row.sequential_killed, row.sequential, row.sequential_seconds = sequential_hunt(
                planted, budget, artifacts / "sequential"
            )
        found = hunt(planted, budget, artifacts, shrink=shrink)
        row.killed, row.examples, row.seconds = found.killed, found.examples, found.seconds
        row.failure = found.failure
        if found.killed:
            example = found.example()
            row.commands = len(example.prefix) + sum(len(b) for b in example.branches)
            row.reproduced = f"{found.reproduced} of {found.runs}"
        rows.append(row)
        print(f"{planted.name}: {row}", file=sys.stderr, flush=True)
    return rows


def table(rows: list[Row]) -> str:
    head = (
        "planted bug",
        "store",
        "budget",
        "sequential machines",
        "s",
        "parallel",
        "examples",
        "s",
        "commands",
        "reproduced",
        "failure",
    )
    lines = [head]
    for r in rows:
        lines.append(
            (
                r.bug,
                r.store,
                str(r.budget),
                r.sequential,
                f"{r.sequential_seconds:.1f}",
                "killed" if r.killed else "SURVIVED",
                str(r.examples),
                f"{r.seconds:.2f}",
                "-" if r.commands is None else str(r.commands),
                r.reproduced,
                r.failure,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", metavar="NAME", help="only the bugs whose name contains NAME")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--no-sequential", action="store_true")
    args = parser.parse_args()
    register_profiles()
    rows = run_campaign(args.only, not args.no_shrink, not args.no_sequential)
    print(table(rows))
    print(f"examples: {CAMPAIGN_DIR}/parallel-<Machine>-<bug>.json")
    ok = all(r.killed and not r.sequential_killed for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
