"""Mutation score of the state machines.

    python -m tests.mutation [--jobs N] [--only SUBSTRING] [--limit N] [--list] [--json FILE]

Plants every single-site mutant (``tests/mutation/operators.py``) in the production modules
listed in :data:`TARGETS`, one at a time, and runs the *state machines alone* (the
``tests/stateful`` machine tests — :data:`MACHINE_TESTS`, ``ci`` profile: derandomized, so a
run is reproducible) as the test command; each mutant runs the machines whose coverage
reaches its lines.  A mutant is *killed* when that command fails (or times out), *survived*
when it passes, *not reached* when the machines never execute its line (found once with
coverage, before any mutant runs; such a mutant survives without being run), and
*equivalent* when :mod:`tests.mutation.equivalent` explains why no test can tell it apart.

Each job works in its own copy of the repository under a temporary directory, so mutants
never touch the working tree.  Prints the table and the survivors; ``--json`` writes every
mutant's result.  Exit 0 when the score (killed / (generated - equivalent)) reaches
``--min-score`` (default 0: report only).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
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
        REMORA_HYPOTHESIS_PROFILE="ci",
        PYTHONDONTWRITEBYTECODE="1",
        REMORA_ARTIFACT_DIR=str(Path(tempfile.gettempdir()) / "remora-mutants-artifacts"),
    )
    env.pop("CI", None)
    return env


def run_tests(
    slot: Path, timeout: float, nodes: tuple[str, ...] = MACHINE_TESTS
) -> tuple[str, float, str]:
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


NODE_SECONDS: dict[str, float] = {}
"""How long each machine node took under coverage (the base of a mutant's timeout)."""


def covered_lines(slot: Path, files: list[Path]) -> dict[str, dict[int, set[str]]]:
    """Per line, the machine nodes that execute it on the unmutated code (one coverage run
    per node, each recorded under the node's id as its context)."""
    env = env_for_tests()
    data = slot / ".coverage-mutants"
    env["COVERAGE_FILE"] = str(data)
    for node in MACHINE_TESTS:
        began = time.perf_counter()
        subprocess.run(
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
            check=True,
        )
        NODE_SECONDS[node] = time.perf_counter() - began
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
    out: dict[str, dict[int, set[str]]] = {}
    for f in files:
        contexts = measured.get(str(f.relative_to(ROOT)), {}).get("contexts", {})
        out[str(f.relative_to(ROOT))] = {
            int(line): {c for c in names if c} for line, names in contexts.items()
        }
    return out


def nodes_for(m: Site, reached: dict[str, dict[int, set[str]]]) -> tuple[str, ...]:
    """The machine nodes that execute any line of ``m`` (in :data:`MACHINE_TESTS` order)."""
    lines = reached.get(m.path, {})
    names = set().union(*(lines.get(n, set()) for n in range(m.line, m.end_line + 1)))
    return tuple(n for n in MACHINE_TESTS if n in names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="keep mutants whose key or description contains this text (repeatable)",
    )
    parser.add_argument("--limit", type=int, default=None, help="run at most N mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--json", type=Path, default=None, help="write every result here")
    parser.add_argument("--min-score", type=float, default=0.0)
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        help="run only every K-th reached mutant (a systematic sample: not-reached stays "
        "exact, the score is estimated from the sample)",
    )
    args = parser.parse_args(argv)

    files = target_files(TARGETS)
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

    with tempfile.TemporaryDirectory(prefix="remora-mutants-") as tmp:
        base = Path(tmp)
        slots = [make_slot(base, i) for i in range(max(1, args.jobs))]
        print("baseline: the machines on unmutated code, with coverage ...", file=sys.stderr)
        status, baseline, detail = run_tests(slots[0], timeout=3600)
        if status != "survived":
            print(f"the unmutated code fails the machines: {detail}", file=sys.stderr)
            return 2
        reached = covered_lines(slots[0], files)
        print(
            f"baseline {baseline:.1f} s; per-mutant timeout twice its machines' time under "
            f"coverage (at least 60 s); "
            f"{len(mutants)} mutants over {len(files)} files, {len(slots)} jobs",
            file=sys.stderr,
        )

        results: list[Result] = []
        sampled = 0
        pending: queue.Queue[Site] = queue.Queue()
        for m in mutants:
            if m.key in EQUIVALENT:
                results.append(Result(m, "equivalent", detail=EQUIVALENT[m.key]))
            elif not nodes_for(m, reached):
                results.append(Result(m, "not-reached"))
            else:
                sampled += 1
                if (sampled - 1) % args.every == 0:
                    pending.put(m)
                else:
                    results.append(Result(m, "unsampled"))
        total = pending.qsize()
        done = Counter[str]()
        lock = threading.Lock()
        started = time.perf_counter()

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
                    nodes = nodes_for(m, reached)
                    timeout = max(60.0, 2 * sum(NODE_SECONDS[n] for n in nodes))
                    status, seconds, detail = run_tests(slot, timeout, nodes)
                finally:
                    target.write_text(original)
                with lock:
                    results.append(Result(m, status, seconds, detail))
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

    return report(results, args.json, args.min_score)


def report(results: list[Result], json_path: Path | None, min_score: float) -> int:
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
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(
            json.dumps(
                [
                    {
                        "key": r.site.key,
                        "where": r.site.describe(),
                        "status": r.status,
                        "seconds": round(r.seconds, 2),
                        "detail": r.detail,
                    }
                    for r in results
                ],
                indent=1,
            )
        )
    return 0 if score >= min_score else 1


if __name__ == "__main__":
    sys.exit(main())
