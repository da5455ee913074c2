"""Named configurations and configuration files (TOML or JSON) for the explorer.

A file holds the module's CONSTANTS as top-level keys (TLA+ spelling)::

    # retry.toml
    Jobs = ["j1"]
    Workers = ["w1"]
    InitialWorkers = ["w1"]
    MaxAttempts = 2
    MaxProgress = 2

``Jobs``, ``Workers``, ``InitialWorkers``, ``MaxAttempts`` and ``MaxProgress`` are required;
``LeaseLimit``, ``ReservationLimit``, ``LocalLimit`` and ``GlobalLimit`` default to 1,
``FaultsEnabled`` to false, ``FaultServices`` to ``[]``, ``MaxCoordLosses``,
``MaxPartitions`` and ``MaxCredentialIntents`` to 0, ``NoJob``/``NoWorker`` to those names.
An optional ``name`` labels the run.  Unknown keys, wrong types and violated ``ASSUME``
clauses are rejected with :class:`~remora.protocol.errors.ConfigError`.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from remora.protocol.errors import ConfigError
from remora.protocol.spec import SERVICE_NAMES, Constants, Remora

ALL_SERVICES = frozenset(SERVICE_NAMES)

_TINY = Constants(
    Jobs=("j1",),
    Workers=("w1",),
    InitialWorkers=frozenset({"w1"}),
    MaxAttempts=1,
    MaxProgress=1,
    FaultsEnabled=False,
    FaultServices=frozenset(),
    MaxCoordLosses=0,
    MaxPartitions=0,
    MaxCredentialIntents=0,
)

#: The named configurations of issue 5 (all limits not named are 1).
NAMED_CONFIGS: dict[str, Constants] = {
    "tiny": _TINY,
    "retry": _TINY._replace(MaxAttempts=2, MaxProgress=2),
    "faults-1w": _TINY._replace(
        MaxAttempts=2,
        MaxProgress=2,
        FaultsEnabled=True,
        FaultServices=ALL_SERVICES,
        MaxCoordLosses=1,
        MaxPartitions=1,
    ),
    "crash": Constants(
        Jobs=("j1",),
        Workers=("w1", "w2"),
        InitialWorkers=frozenset({"w1"}),
        MaxAttempts=2,
        MaxProgress=1,
        FaultsEnabled=True,
        FaultServices=ALL_SERVICES,
        MaxCoordLosses=1,
        MaxPartitions=0,
    ),
    "credentials": _TINY._replace(MaxCredentialIntents=2),
    "two-jobs": _TINY._replace(Jobs=("j1", "j2"), LocalLimit=1, GlobalLimit=1),
}

_REQUIRED = ("Jobs", "Workers", "InitialWorkers", "MaxAttempts", "MaxProgress")
_INT_FIELDS = (
    "MaxAttempts",
    "MaxProgress",
    "LeaseLimit",
    "ReservationLimit",
    "LocalLimit",
    "GlobalLimit",
    "MaxCoordLosses",
    "MaxPartitions",
    "MaxCredentialIntents",
)
_NAME_LIST_FIELDS = ("Jobs", "Workers", "InitialWorkers", "FaultServices")
_STR_FIELDS = ("NoJob", "NoWorker")
_ALLOWED = frozenset(Constants._fields) | {"name"}


def constants_from_mapping(data: Any, origin: str = "config") -> Constants:
    """Validate a decoded TOML/JSON document and build :class:`Constants`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a table/object of constants")
    unknown = sorted(set(data) - _ALLOWED)
    if unknown:
        raise ConfigError(f"{origin}: unknown field(s): {', '.join(unknown)}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ConfigError(f"{origin}: missing field(s): {', '.join(missing)}")
    kwargs: dict[str, Any] = {}
    for key in _INT_FIELDS:
        if key in data:
            v = data[key]
            if not isinstance(v, int) or isinstance(v, bool):
                raise ConfigError(f"{origin}: {key} must be an integer, got {v!r}")
            kwargs[key] = v
    for key in _NAME_LIST_FIELDS:
        if key in data:
            v = data[key]
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise ConfigError(f"{origin}: {key} must be a list of names, got {v!r}")
            if len(set(v)) != len(v):
                raise ConfigError(f"{origin}: {key} has duplicate names")
            kwargs[key] = tuple(v) if key in ("Jobs", "Workers") else frozenset(v)
    for key in _STR_FIELDS:
        if key in data:
            v = data[key]
            if not isinstance(v, str) or not v:
                raise ConfigError(f"{origin}: {key} must be a non-empty string")
            kwargs[key] = v
    if "FaultsEnabled" in data:
        v = data["FaultsEnabled"]
        if not isinstance(v, bool):
            raise ConfigError(f"{origin}: FaultsEnabled must be a boolean, got {v!r}")
        kwargs["FaultsEnabled"] = v
    if "name" in data and not isinstance(data["name"], str):
        raise ConfigError(f"{origin}: name must be a string")
    constants = Constants(**kwargs)
    Remora(constants)  # checks the module's ASSUME; raises ConfigError
    return constants


def load_config(spec: str) -> tuple[str, Constants]:
    """Resolve ``NAME`` (a named configuration) or a path to a ``.toml``/``.json`` file."""
    if spec in NAMED_CONFIGS:
        return spec, NAMED_CONFIGS[spec]
    path = Path(spec)
    if not path.is_file():
        names = ", ".join(NAMED_CONFIGS)
        raise ConfigError(f"unknown configuration {spec!r} (named: {names}; or a .toml/.json file)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{spec}: cannot read: {exc}") from exc
    data: Any
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # also huge integers, deep nesting
            raise ConfigError(f"{spec}: invalid JSON: {exc}") from exc
    elif path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
            raise ConfigError(f"{spec}: invalid TOML: {exc}") from exc
    else:
        raise ConfigError(f"{spec}: configuration files must end in .toml or .json")
    constants = constants_from_mapping(data, origin=spec)
    name = data.get("name") if isinstance(data.get("name"), str) else path.stem
    return str(name), constants


def constants_to_mapping(k: Constants) -> dict[str, Any]:
    """The JSON-friendly form of a configuration (used in counterexample files)."""
    return {
        "Jobs": list(k.Jobs),
        "Workers": list(k.Workers),
        "InitialWorkers": sorted(k.InitialWorkers),
        "MaxAttempts": k.MaxAttempts,
        "MaxProgress": k.MaxProgress,
        "LeaseLimit": k.LeaseLimit,
        "ReservationLimit": k.ReservationLimit,
        "LocalLimit": k.LocalLimit,
        "GlobalLimit": k.GlobalLimit,
        "FaultsEnabled": k.FaultsEnabled,
        "FaultServices": sorted(k.FaultServices),
        "MaxCoordLosses": k.MaxCoordLosses,
        "MaxPartitions": k.MaxPartitions,
        "MaxCredentialIntents": k.MaxCredentialIntents,
        "NoJob": k.NoJob,
        "NoWorker": k.NoWorker,
    }


__all__ = [
    "ALL_SERVICES",
    "NAMED_CONFIGS",
    "constants_from_mapping",
    "load_config",
    "constants_to_mapping",
]
