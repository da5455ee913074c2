"""Mutation score of the state machines.

    python -m tests.mutation [--side worker|jobs] [--jobs N] [--only SUBSTRING] [--limit N]
                             [--list] [--json FILE]

Plants every single-site mutant (``tests/mutation/operators.py``) in the production modules
of one side (:data:`SIDES`: ``worker`` — the lifecycle, stores, domain and source, judged by
the worker machines; ``jobs`` — the job runtime, judged by the job machines), one at a
time, and runs that side's *state machines alone* (``mutants`` profile: ``ci``'s
derandomized examples, so a run is reproducible, without shrinking a failure) as the test
command; each mutant runs the machines whose coverage reaches its lines. A mutant is
*killed* when that command fails (or times out), *survived* when it passes, *not reached*
when the machines never execute its line (found once with coverage, before any mutant runs;
such a mutant survives without being run), and *equivalent* when
:mod:`tests.mutation.equivalent` explains why no test can tell it apart.

Each job works in its own copy of the repository under a temporary directory, so mutants
never touch the working tree.  Prints the table and the survivors; ``--json`` writes every
mutant's result.  Exit 0 when the score (killed / (generated - equivalent)) reaches
``--min-score`` (default 0: report only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import attrs

from tests.mutation.equivalent import EQUIVALENT
from tests.mutation.operators import Site, apply, sites

ROOT = Path(__file__).resolve().parents[2]

TARGETS = (
    "remora/worker",
    "remora/store/base.py",
    "remora/store/memory.py",
    "remora/store/sql.py",
    "remora/store/sqlite.py",
    "remora/faults.py",
    "remora/domain",
    "remora/source",
)
"""What the mutants are planted in (files or packages).  ``remora/store/postgres.py`` is
left out: the machines run it only under the nightly profile."""

MACHINE_TESTS = (
    "tests/stateful/test_worker_machines.py::test_machine[SinglePartitionHeavyFaults]",
    "tests/stateful/test_worker_machines.py::test_machine[ManyPartitionsAndLifetimes]",
    "tests/stateful/test_worker_machines.py::test_machine[CombinationSweep]",
    "tests/stateful/test_worker_machines.py::test_machine[ManyPartitionsOnSqlite]",
    "tests/stateful/test_group_machine.py::test_group_machine_on_memory",
    "tests/stateful/test_group_machine.py::test_group_machine_on_sqlite",
    "tests/stateful/test_store_machines.py::test_sqlite_file_machine",
)
"""The state machines, one pytest node each (the coverage pre-filter learns which nodes
reach each line; a mutant runs only those, in this order, stopping at the first failure)."""

TEST_COMMAND = (
    "-m",
    "pytest",
    "-x",
    "-q",
    "-p",
    "no:xdist",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
)
"""The state machines alone: no named unit tests, no campaign."""

JOB_TARGETS = ("remora/jobs",)
"""The job runtime, every module: the PostgreSQL and Redis stores are reached only by the
services twin (:data:`JOB_SERVICE_MACHINE_TESTS`), reported as not reached without it."""

JOB_FILE_MACHINE_TESTS = tuple(
    f"tests/jobs/test_job_machines_files.py::test_job_machine_on_the_file_stores[{m}]"
    for m in ("spec-sized", "larger", "race", "loop", "embedded")
)
"""The job machines' file-backed twin (the embedded default's SQLite file,
``DirectoryTarget``, ``DirectoryVault``): the only machines that execute the directory
stores; no service needed."""

JOB_MACHINE_TESTS = (
    "tests/jobs/test_job_machines.py::test_job_machines",
    "tests/jobs/test_job_machines.py::test_the_embedded_mode",
    *JOB_FILE_MACHINE_TESTS,
)
"""The job machines (runtime, race and larger machines), one node, and their file twin."""

JOB_SERVICE_MACHINE_TESTS = (
    "tests/jobs/test_job_machines_services.py::test_job_machine_on_postgres_and_redis[spec-sized]",
    "tests/jobs/test_job_machines_services.py::test_job_machine_on_postgres_and_redis[reserved]",
    "tests/jobs/test_job_machines_services.py::test_job_machine_on_postgres_and_redis[race]",
    "tests/jobs/test_job_machines_services.py::test_job_machine_on_postgres_and_redis[loop]",
    "tests/jobs/test_job_machines_services.py::test_job_machine_on_postgres_and_redis[loop-at-the-limit]",
    "tests/jobs/test_job_machines_services.py::test_the_cut_machine_on_postgres_and_redis",
)
"""The job machines' services twin (each step on memory + SQLite and on Redis +
PostgreSQL, compared after every step): the only machines that execute
``remora/jobs/postgres.py`` and ``remora/jobs/redis_coordination.py``.  Added to the job
side when the services answer (:func:`services_available`)."""

SERVICE_ADDRESSES = (("127.0.0.1", 5432), ("127.0.0.1", 6379))
"""PostgreSQL and Redis where the suite reaches them (``tests/common/services.py``)."""


def services_available(choice: str = "auto") -> bool:
    """Whether the job side runs the services twin: ``yes``/``no`` decide; ``auto`` says
    yes under ``REMORA_REQUIRE_SERVICES=1`` (where an unreachable server fails the
    baseline, as it should) and otherwise when both servers accept a connection.  Without
    them the twin would only skip, and its mutants count as not reached: a skip is no
    verdict."""
    if choice != "auto":
        return choice == "yes"
    if os.environ.get("REMORA_REQUIRE_SERVICES") == "1":
        return True
    for host, port in SERVICE_ADDRESSES:
        try:
            socket.create_connection((host, port), timeout=1).close()
        except OSError:
            return False
    return True


@attrs.frozen
class Side:
    """What one mutation run plants mutants in, and which machines judge them."""

    name: str
    targets: tuple[str, ...]
    machines: tuple[str, ...]


SIDES = {
    "worker": Side("worker", TARGETS, MACHINE_TESTS),
    "jobs": Side("jobs", JOB_TARGETS, JOB_MACHINE_TESTS),
}

COPIED = ("remora", "tests", "conftest.py", "pyproject.toml")


@attrs.frozen
class Result:
    site: Site
    status: str  # killed | timeout | survived | not-reached | equivalent | unsampled
    seconds: float = 0.0
    detail: str = ""


def target_files(targets: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for target in targets:
        path = ROOT / target
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return [f for f in files if f.name != "__init__.py" or f.stat().st_size > 0]


def make_slot(base: Path, index: int) -> Path:
    slot = base / f"slot-{index}"
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, slot / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            slot.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, slot / name)
    return slot


def env_for_tests() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        REMORA_HYPOTHESIS_PROFILE="mutants",  # ci's examples, no shrinking (profiles.py)
        PYTHONDONTWRITEBYTECODE="1",
        REMORA_ARTIFACT_DIR=str(Path(tempfile.gettempdir()) / "remora-mutants-artifacts"),
    )
    env.pop("CI", None)
    return env


def run_tests(slot: Path, timeout: float, nodes: tuple[str, ...]) -> tuple[str, float, str]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, *TEST_COMMAND, *nodes],
            cwd=slot,
            env=env_for_tests(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start, f"no verdict within {timeout:.0f} s"
    seconds = time.perf_counter() - start
    if proc.returncode == 0:
        return "survived", seconds, ""
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("E ", "FAILED"))]
    return "killed", seconds, (lines[0] if lines else proc.stdout.strip()[-200:])[:200]


CACHE = ROOT / ".mutants"
"""Where the coverage pass is cached (keyed by :func:`fingerprint`) and where the default
results journal lives (git-ignored)."""


def fingerprint(machines: tuple[str, ...] = MACHINE_TESTS) -> str:
    """A hash of everything a verdict depends on: every copied file except the mutation
    harness itself (so judging an equivalent does not invalidate results), the machine
    nodes and the test command.  A cached coverage pass or a journaled result is reused
    only under the same fingerprint."""
    digest = hashlib.sha256()
    digest.update(repr((machines, TEST_COMMAND, sys.version_info[:2])).encode())
    for name in COPIED:
        source = ROOT / name
        files = sorted(source.rglob("*.py")) if source.is_dir() else [source]
        for f in files:
            rel = f.relative_to(ROOT)
            if rel.parts[:2] == ("tests", "mutation") or "__pycache__" in rel.parts:
                continue
            digest.update(str(rel).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@attrs.frozen
class Coverage:
    """The unmutated machines, measured once: per file and line, the nodes that execute it;
    per node, its time under coverage (the base of a mutant's timeout)."""

    reached: dict[str, dict[int, frozenset[str]]]
    node_seconds: dict[str, float]

    def nodes_for(self, m: Site) -> tuple[str, ...]:
        """The machine nodes that execute any line of ``m``, cheapest first (a killed
        mutant usually dies in the first node that reaches it)."""
        lines = self.reached.get(m.path, {})
        names: set[str] = set()
        for n in range(m.line, m.end_line + 1):
            names |= lines.get(n, frozenset())
        return tuple(sorted(names, key=lambda n: (self.node_seconds[n], n)))

    def dump(self) -> str:
        return json.dumps(
            {
                "node_seconds": self.node_seconds,
                "reached": {
                    path: {str(line): sorted(nodes) for line, nodes in lines.items()}
                    for path, lines in self.reached.items()
                },
            }
        )

    @classmethod
    def load(cls, text: str) -> Coverage:
        doc = json.loads(text)
        return cls(
            {
                path: {int(line): frozenset(nodes) for line, nodes in lines.items()}
                for path, lines in doc["reached"].items()
            },
            {k: float(v) for k, v in doc["node_seconds"].items()},
        )


class BaselineFailed(Exception):
    """The unmutated code fails a machine: no mutant can be judged."""


def measure_coverage(slot: Path, files: list[Path], machines: tuple[str, ...]) -> Coverage:
    """Per line, the machine nodes that execute it on the unmutated code (one coverage run
    per node, each recorded under the node's id as its context).  A node that fails here
    fails on the unmutated code: :class:`BaselineFailed`."""
    env = env_for_tests()
    data = slot / ".coverage-mutants"
    env["COVERAGE_FILE"] = str(data)
    node_seconds: dict[str, float] = {}
    for node in machines:
        began = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "coverage",
                "run",
                "--parallel-mode",
                f"--context={node}",
                "--source=remora",
                *TEST_COMMAND,
                node,
            ],
            cwd=slot,
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise BaselineFailed(f"{node}: {proc.stdout.strip()[-400:]}")
        node_seconds[node] = time.perf_counter() - began
        print(f"  {node}: {node_seconds[node]:.1f} s under coverage", file=sys.stderr)
    report = slot / "coverage.json"
    for command in (["combine"], ["json", "--show-contexts", "-o", str(report)]):
        subprocess.run(
            [sys.executable, "-m", "coverage", *command],
            cwd=slot,
            env=env,
            capture_output=True,
            check=True,
        )
    measured = json.loads(report.read_text())["files"]
    reached: dict[str, dict[int, frozenset[str]]] = {}
    for f in files:
        rel = str(f.relative_to(ROOT))
        contexts = measured.get(rel, {}).get("contexts", {})
        reached[rel] = {
            int(line): frozenset(c for c in names if c) for line, names in contexts.items()
        }
    return Coverage(reached, node_seconds)


def cached_coverage(
    slot: Path, files: list[Path], key: str, fresh: bool, machines: tuple[str, ...]
) -> Coverage:
    """The coverage pass for ``key``, from ``.mutants/coverage-<key>.json`` when present
    (and not ``fresh``), else measured and saved there."""
    path = CACHE / f"coverage-{key}.json"
    if path.exists() and not fresh:
        print(f"coverage: cached ({path.relative_to(ROOT)})", file=sys.stderr)
        return Coverage.load(path.read_text())
    print("coverage: the machines on unmutated code, one node at a time ...", file=sys.stderr)
    coverage = measure_coverage(slot, files, machines)
    CACHE.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(coverage.dump())
    tmp.replace(path)
    return coverage


def mutant_timeout(nodes: tuple[str, ...], coverage: Coverage) -> float:
    """Twice the nodes' time under coverage (already slower than a plain run), at least a
    minute: a mutant that makes a machine loop or stall is killed by the timeout."""
    return max(60.0, 2 * sum(coverage.node_seconds[n] for n in nodes))


def read_journal(path: Path, key: str) -> dict[str, dict[str, object]]:
    """The results journaled under fingerprint ``key`` (the last line per mutant wins);
    lines of other fingerprints — results for other code — are ignored."""
    done: dict[str, dict[str, object]] = {}
    if not path.exists():
        return done
    for line in path.read_text().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # a line cut short by an interrupted run
        if isinstance(doc, dict) and doc.get("fingerprint") == key:
            done[str(doc["key"])] = doc
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument(
        "--side",
        choices=sorted(SIDES),
        default="worker",
        help="which production code to mutate, judged by which machines (default worker)",
    )
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="keep mutants whose key or description contains this text (repeatable), "
        "e.g. --only remora/store/sqlite.py",
    )
    parser.add_argument("--limit", type=int, default=None, help="run at most N mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="the results journal: one JSON line per mutant, appended as each finishes "
        "(default .mutants/results.jsonl; for --side jobs .mutants/results-jobs.jsonl)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="reuse the journal's results for the same code (fingerprint): run only the "
        "mutants without one",
    )
    parser.add_argument(
        "--fresh-coverage", action="store_true", help="measure coverage even when cached"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: print the table from the journal (with --resume); mutants "
        "without a verdict count as unsampled",
    )
    parser.add_argument(
        "--services",
        choices=("auto", "yes", "no"),
        default="auto",
        help="--side jobs: also run the machines over PostgreSQL + Redis (the services "
        "twin), which alone reach the PostgreSQL and Redis stores; auto (default): under "
        "REMORA_REQUIRE_SERVICES=1 or when both servers answer on 127.0.0.1",
    )
    parser.add_argument("--min-score", type=float, default=0.0)
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        help="run only every K-th reached mutant (a systematic sample: not-reached stays "
        "exact, the score is estimated from the sample)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.every < 1:
        print("--jobs and --every must be at least 1", file=sys.stderr)
        return 2

    side = SIDES[args.side]
    if side.name == "jobs" and services_available(args.services):
        side = attrs.evolve(side, machines=side.machines + JOB_SERVICE_MACHINE_TESTS)
        # a server lost mid-run must fail the twin (a killed mutant, a failed baseline),
        # never skip it: a skip would pass as a survivor
        os.environ["REMORA_REQUIRE_SERVICES"] = "1"
        print("the job side runs the services twin (PostgreSQL + Redis)", file=sys.stderr)
    if args.json is None:
        args.json = CACHE / ("results.jsonl" if side.name == "worker" else "results-jobs.jsonl")
    files = target_files(side.targets)
    mutants: list[Site] = []
    for f in files:
        mutants.extend(sites(str(f.relative_to(ROOT)), f.read_text()))
    if args.only:
        mutants = [m for m in mutants if any(o in m.key or o in m.describe() for o in args.only)]
    if args.limit is not None:
        mutants = mutants[: args.limit]
    if args.list:
        for m in mutants:
            print(f"{m.key}  {m.describe()}")
        print(f"{len(mutants)} mutants")
        return 0

    key = fingerprint(side.machines)
    journal = read_journal(args.json, key) if args.resume else {}
    with tempfile.TemporaryDirectory(prefix="remora-mutants-") as tmp:
        base = Path(tmp)
        slots = [make_slot(base, i) for i in range(max(1, args.jobs))]
        try:
            coverage = cached_coverage(slots[0], files, key, args.fresh_coverage, side.machines)
        except BaselineFailed as exc:
            print(f"the unmutated code fails the machines: {exc}", file=sys.stderr)
            return 2
        print(
            f"fingerprint {key}; machine seconds under coverage: "
            + ", ".join(f"{n.split('::')[-1]} {s:.0f}" for n, s in coverage.node_seconds.items())
            + f"; {len(mutants)} mutants over {len(files)} files, {len(slots)} jobs",
            file=sys.stderr,
        )

        results: list[Result] = []
        sampled = 0
        pending: queue.Queue[Site] = queue.Queue()
        for m in mutants:
            if m.key in EQUIVALENT:
                results.append(Result(m, "equivalent", detail=EQUIVALENT[m.key]))
            elif not coverage.nodes_for(m):
                results.append(Result(m, "not-reached"))
            elif m.key in journal:
                doc = journal[m.key]
                results.append(
                    Result(m, str(doc["status"]), float(doc["seconds"]), str(doc["detail"]))  # type: ignore[arg-type]
                )
            else:
                sampled += 1
                if (sampled - 1) % args.every == 0:
                    pending.put(m)
                else:
                    results.append(Result(m, "unsampled"))
        if args.report_only:
            while not pending.empty():
                results.append(Result(pending.get_nowait(), "unsampled"))
        else:  # a stable shuffle: a run cut short is still a sample of every file
            order = sorted(pending.queue, key=lambda m: hashlib.sha256(m.key.encode()).digest())
            pending.queue.clear()
            pending.queue.extend(order)
        total = pending.qsize()
        if journal:
            print(f"resumed: {len(mutants) - total} mutants need no run", file=sys.stderr)
        done = Counter[str]()
        lock = threading.Lock()
        started = time.perf_counter()
        args.json.parent.mkdir(parents=True, exist_ok=True)

        def work(slot: Path) -> None:
            while True:
                try:
                    m = pending.get_nowait()
                except queue.Empty:
                    return
                target = slot / m.path
                original = target.read_text()
                target.write_text(apply(original, m))
                try:
                    nodes = coverage.nodes_for(m)
                    status, seconds, detail = run_tests(
                        slot, mutant_timeout(nodes, coverage), nodes
                    )
                finally:
                    target.write_text(original)
                with lock:
                    results.append(Result(m, status, seconds, detail))
                    with args.json.open("a") as out:  # journaled at once: a cut run keeps it
                        out.write(json.dumps(as_json(Result(m, status, seconds, detail), key)))
                        out.write("\n")
                    done[status] += 1
                    n = sum(done.values())
                    if sys.stderr.isatty() or n % 10 == 0 or n == total:
                        elapsed = time.perf_counter() - started
                        eta = elapsed / n * (total - n)
                        print(
                            f"[{n}/{total}] killed {done['killed'] + done['timeout']} "
                            f"survived {done['survived']}  eta {eta / 60:.1f} min",
                            file=sys.stderr,
                        )

        threads = [threading.Thread(target=work, args=(s,)) for s in slots]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return report(results, args.min_score)


def as_json(r: Result, key: str) -> dict[str, object]:
    return {
        "key": r.site.key,
        "where": r.site.describe(),
        "status": r.status,
        "seconds": round(r.seconds, 2),
        "detail": r.detail,
        "fingerprint": key,
    }


def report(results: list[Result], min_score: float) -> int:
    results.sort(key=lambda r: (r.site.path, r.site.line, r.site.key))
    counts = Counter(r.status for r in results)
    generated = len(results)
    equivalent = counts["equivalent"]
    killed = counts["killed"] + counts["timeout"]
    scored = generated - equivalent
    score = killed / scored if scored else 1.0
    if counts["unsampled"]:  # a sample: scale the sampled kill rate to every reached mutant
        ran = killed + counts["survived"]
        reached = ran + counts["unsampled"]
        score = (killed / ran if ran else 0.0) * reached / scored if scored else 1.0
        print(
            f"\nSAMPLE: {ran} of {reached} reached mutants ran; the score below is estimated "
            f"as (killed/ran) x reached / (generated - equivalent)"
        )
    print()
    print(
        "| generated | killed by the machines | (of which timeouts) | equivalent | "
        "survived | (of which not reached) | score |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {generated} | {killed} | {counts['timeout']} | {equivalent} | "
        f"{counts['survived'] + counts['not-reached']} | {counts['not-reached']} | "
        f"{score:.1%}{' (estimated)' if counts['unsampled'] else ''} |"
    )
    by_file: dict[str, Counter[str]] = {}
    for r in results:
        by_file.setdefault(r.site.path, Counter())[r.status] += 1
    print()
    print("| file | generated | killed | equivalent | survived | not reached | unsampled |")
    print("|---|---|---|---|---|---|---|")
    for path, c in by_file.items():
        print(
            f"| {path} | {sum(c.values())} | {c['killed'] + c['timeout']} | "
            f"{c['equivalent']} | {c['survived']} | {c['not-reached']} | {c['unsampled']} |"
        )
    survivors = [r for r in results if r.status in {"survived", "not-reached"}]
    if survivors:
        print("\nsurvivors:")
        for r in survivors:
            tag = " (not reached)" if r.status == "not-reached" else ""
            print(f"  {r.site.key}{tag}\n      {r.site.describe()}")
    equivalents = [r for r in results if r.status == "equivalent"]
    if equivalents:
        print("\nequivalent (why no test can tell them apart):")
        for r in equivalents:
            print(f"  {r.site.key}: {r.detail}")
    return 0 if score >= min_score else 1


if __name__ == "__main__":
    sys.exit(main())
