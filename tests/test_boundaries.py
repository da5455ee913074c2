"""The layering table, row by row (docs/index.md, "Who each package is for"):

* production — every module of ``remora`` outside ``sim``, ``testing``, ``oracle``,
  ``protocol`` and ``cli`` (and ``__main__``), so a runtime package added later is covered
  without touching this test — imports nothing of the simulations, the test kit, the oracle,
  the spec port (``remora.jobs`` is spec-free), the command line or Hypothesis;
* ``cli`` and ``sim`` never import ``remora.testing``, Hypothesis or pytest (a plain
  ``pip install remora`` runs every command);
* only ``remora.testing`` imports Hypothesis.

Each row is checked on the source (lazy, relative and type-checking imports included), with
a planted violation it catches, and by importing the modules and looking at what got loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REMORA = Path(__file__).resolve().parents[1] / "remora"
NOT_PRODUCTION = ("sim", "testing", "oracle", "protocol", "cli", "__main__.py")
FORBIDDEN = (
    "remora.sim",
    "remora.testing",
    "remora.oracle",
    "remora.protocol",
    "remora.cli",
    "hypothesis",
)
"""What production (and so ``remora.jobs``) may never import: the runtime is spec-free."""

KIT = ("remora.testing", "hypothesis", "pytest", "_pytest")
"""What the command line and the simulations may never import: a plain install runs them."""

VERIFICATION = ("cli", "sim", "__main__.py")


def modules_under(root: Path, keep: Callable[[str], bool]) -> dict[str, Path]:
    """Dotted name → file of every module under the package directory ``root`` whose first
    path part (``worker``, ``sim``, ``clock.py`` …) ``keep`` accepts."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if not keep(rel.parts[0]):
            continue
        parts = [root.name, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def production_modules(root: Path) -> dict[str, Path]:
    """Every production module: all of ``remora`` outside the verification packages."""
    return modules_under(root, lambda top: top not in NOT_PRODUCTION)


def imported_names(module: str, path: Path) -> list[str]:
    """Every module ``path`` imports (relative imports resolved; lazy and TYPE_CHECKING
    imports included)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


def violations(modules: dict[str, Path], forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for module, path in modules.items():
        for name in imported_names(module, path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{module} imports {name}")
    return sorted(set(found))


def boundary_violations(root: Path) -> list[str]:
    """Every broken row of the layering table (docs/index.md, "Who each package is for")."""
    return sorted(
        violations(production_modules(root), FORBIDDEN)
        + violations(modules_under(root, lambda top: top in VERIFICATION), KIT)
        + violations(modules_under(root, lambda top: top != "testing"), ("hypothesis",))
    )


def test_production_imports_nothing_from_tests_or_checkers() -> None:
    modules = production_modules(REMORA)
    assert {"remora.worker.lifecycle", "remora.store.base", "remora.jobs.worker"} <= set(modules)
    assert not any(m.startswith(("remora.sim", "remora.testing")) for m in modules)
    assert boundary_violations(REMORA) == []


def _loaded_by(modules: list[str], prefixes: tuple[str, ...]) -> str:
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_importing_production_loads_no_forbidden_module() -> None:
    assert _loaded_by(sorted(production_modules(REMORA)), FORBIDDEN) == "[]"


def test_the_command_line_and_the_simulations_load_no_test_kit() -> None:
    """What a plain ``pip install remora`` runs: every module of ``cli`` and ``sim``
    (``tests/testing/test_wheel.py`` runs the commands from a built wheel)."""
    modules = sorted(modules_under(REMORA, lambda top: top in VERIFICATION))
    assert {"remora.cli.sim_jobs", "remora.sim.jobs.run", "remora.cli.jobs"} <= set(modules)
    assert _loaded_by(modules, KIT) == "[]"


@pytest.mark.parametrize(
    ("where", "source", "caught"),
    [
        ("worker/lazy.py", "def f():\n    from remora.sim.trace import Step\n", "remora.sim.trace"),
        ("store/rel.py", "from ..testing import faults\n", "remora.testing"),
        ("jobs/__init__.py", "import hypothesis.strategies\n", "hypothesis.strategies"),
        (
            "jobs/typed.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from remora import oracle\n",
            "remora.oracle",
        ),
        ("clock.py", "from .cli.common import EXIT_OK\n", "remora.cli.common"),
        # jobs is spec-free
        ("jobs/check.py", "from remora.protocol.spec import State\n", "remora.protocol.spec"),
        # cli and sim run on a plain install
        (
            "cli/sim_jobs.py",
            "from remora.testing.job_machines import X\n",
            "remora.testing.job_machines",
        ),
        ("sim/jobs/run.py", "def f():\n    import pytest\n", "pytest"),
        ("cli/lazy.py", "def f():\n    from hypothesis import given\n", "hypothesis"),
        # only the test kit imports Hypothesis
        ("protocol/gen.py", "import hypothesis\n", "hypothesis"),
        ("oracle/gen.py", "from hypothesis import strategies\n", "hypothesis"),
    ],
)
def test_a_planted_import_is_caught(tmp_path: Path, where: str, source: str, caught: str) -> None:
    """Planted: a forbidden import in an existing or a brand-new package, lazy, relative or
    for type checking only — one per row of the table."""
    root = tmp_path / "remora"
    for directory in ("worker", "store", "jobs", "sim", "sim/jobs", "testing", "cli"):
        (root / directory).mkdir(parents=True)
        (root / directory / "__init__.py").write_text("")
    for directory in ("protocol", "oracle"):
        (root / directory).mkdir(parents=True)
        (root / directory / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "testing" / "machines.py").write_text("import hypothesis\nimport pytest\n")  # allowed
    (root / "sim" / "check.py").write_text("from remora.protocol import spec\n")  # allowed
    assert boundary_violations(root) == []
    (root / where).write_text(source)
    assert [v for v in boundary_violations(root) if v.endswith(caught)] != []


def test_every_remora_directory_is_a_shipped_package() -> None:
    """A directory without ``__init__.py`` is a namespace package that setuptools'
    ``find_packages`` leaves out of the wheel (``remora.sim`` was)."""
    import setuptools

    shipped = set(setuptools.find_packages(str(REMORA.parent), include=["remora*"]))
    directories = {
        ".".join(d.relative_to(REMORA.parent).parts)
        for d in [REMORA, *REMORA.rglob("*")]
        if d.is_dir() and d.name != "__pycache__"
    }
    assert directories - shipped == set()


def test_the_clock_imports_nothing_of_remora() -> None:
    """Time is the bottom layer: the clock knows no context (the former import circle)."""
    clock = REMORA / "clock.py"
    assert [n for n in imported_names("remora.clock", clock) if n.startswith("remora")] == []
