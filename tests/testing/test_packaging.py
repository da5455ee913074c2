"""Packaging for users: the extras, the plugin's entry point, and the Hypothesis pin that CI
and tox install from (derandomized ci examples and blobs are bound to its exact version)."""

from __future__ import annotations

import configparser
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"


def pins() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.strip()] = version.strip()
    return out


def test_testing_extra_is_apart_from_dev() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    testing = " ".join(extras["testing"])
    assert "hypothesis" in testing and "pytest" in testing
    assert not any(tool in testing for tool in ("tox", "mypy", "ruff", "coverage"))
    dev = " ".join(extras["dev"])
    assert "remora[testing,postgres,redis]" in dev
    assert all(t in dev for t in ("tox", "mypy", "ruff"))
    assert extras["test"] == ["remora[dev]"]


def test_the_plugin_is_registered_through_pytest11() -> None:
    found = [e for e in metadata.entry_points(group="pytest11") if e.name == "remora"]
    assert [e.value for e in found] == ["remora.testing.plugin"]


def test_ci_and_tox_install_from_the_constraints_file() -> None:
    assert "hypothesis" in pins() and pins()["hypothesis"].count(".") == 2
    assert "-c .ci/constraints.txt -e '.[dev]'" in (ROOT / ".ci" / "run").read_text()
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    assert ".ci{/}constraints.txt" in tox["testenv"]["install_command"]
    assert tox["testenv"]["extras"].strip() == "dev"
    assert "-c .ci/constraints.txt -e '.[dev]'" in (ROOT / "README.md").read_text()


def test_the_installed_hypothesis_is_the_pinned_one() -> None:
    installed = metadata.version("hypothesis")
    assert installed == pins()["hypothesis"], (
        f"Hypothesis {installed} is installed, the pin is {pins()['hypothesis']}: install with "
        "pip install -c .ci/constraints.txt -e '.[dev]' (derandomized examples and blobs "
        "depend on the exact version)"
    )
