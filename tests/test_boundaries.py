"""Production apart from test doubles: the runtime packages import nothing from the
simulation, the test machinery, the oracle, the command line or Hypothesis.

Production is every module of ``remora`` outside ``sim``, ``testing``, ``oracle``,
``protocol`` and ``cli`` (and the ``__main__`` entry point) — so a runtime package added
later (``remora.jobs``, say) is covered without touching this test.  ``protocol`` is the
reference model: a runtime package may check itself against it, so it is neither production
nor forbidden here, but importing it must not drag a forbidden module in (the second test
imports every production module and looks at what got loaded)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REMORA = Path(__file__).resolve().parents[1] / "remora"
NOT_PRODUCTION = ("sim", "testing", "oracle", "protocol", "cli", "__main__.py")
FORBIDDEN = ("remora.sim", "remora.testing", "remora.oracle", "remora.cli", "hypothesis")


def production_modules(root: Path) -> dict[str, Path]:
    """Dotted name → file of every production module under the package directory ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_PRODUCTION:
            continue
        parts = [root.name, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


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


def boundary_violations(root: Path) -> list[str]:
    found = []
    for module, path in production_modules(root).items():
        for name in imported_names(module, path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                found.append(f"{module} imports {name}")
    return sorted(set(found))


def test_production_imports_nothing_from_tests_or_checkers() -> None:
    modules = production_modules(REMORA)
    assert {"remora.worker.lifecycle", "remora.store.base", "remora.clock"} <= set(modules)
    assert not any(m.startswith(("remora.sim", "remora.testing")) for m in modules)
    assert boundary_violations(REMORA) == []


def test_importing_production_loads_no_forbidden_module() -> None:
    modules = sorted(production_modules(REMORA))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


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
    ],
)
def test_a_planted_import_is_caught(tmp_path: Path, where: str, source: str, caught: str) -> None:
    """Planted: a forbidden import in an existing or a brand-new runtime package, lazy,
    relative or for type checking only."""
    root = tmp_path / "remora"
    for directory in ("worker", "store", "jobs", "sim", "testing"):
        (root / directory).mkdir(parents=True)
        (root / directory / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "sim" / "scheduler.py").write_text("import hypothesis\n")  # allowed there
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
