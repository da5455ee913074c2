"""What a trace runs besides its schedule: the lifecycle, the processing, the reference
model and the planted bug it names.

A trace's ``config`` records every one that is not the built-in default — ``lifecycle``,
``processing`` and ``model`` as ``module:qualname`` references, ``mutation`` by name — so a
replay or a reduction runs exactly what produced it, never silently Remora's own.
:func:`prepared` turns the recorded names into the objects to run, inside a block (a mutation
may patch for the block's duration); a name that cannot be imported is an
:class:`~remora.errors.InvalidInput` naming the trace field.

Without a recorded ``model``, a trace with a custom ``processing`` is checked for the
generic properties only (each visible offset accounted for exactly once, frontier and epoch
rules, ownership, outbox seq); with the built-in processing, against the amendment rules.

References are imported like ``module:qualname`` entry points: the module must be importable
(installed, on ``PYTHONPATH``, or in the current directory, which is put on ``sys.path``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from remora.domain import AMENDMENTS, Processing
from remora.errors import InvalidInput
from remora.oracle import AMENDMENT_RULES, Model
from remora.sim.mutations import mutation
from remora.sim.scheduler import LifecycleFactory
from remora.sim.trace import SimConfig
from remora.worker import Lifecycle


@attrs.frozen
class RunSetup:
    """The objects a trace runs with."""

    lifecycle_factory: LifecycleFactory = Lifecycle
    processing: Processing = AMENDMENTS
    model: Model = AMENDMENT_RULES

    def run_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`remora.sim.report.run_trace` / ``replay``."""
        return {
            "lifecycle_factory": self.lifecycle_factory,
            "processing": self.processing,
            "model": self.model,
        }


def reference_of(obj: Any) -> str:
    """``module:qualname`` of ``obj``, checked to import back to the same object."""
    name = f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', '?')}"
    if "<locals>" in name or import_reference(name, "reference") is not obj:
        raise InvalidInput(
            f"{name} cannot be recorded in a trace: define it at the top level of an "
            "importable module"
        )
    return name


def processing_reference(processing: Processing) -> str:
    """``module:name`` of a :class:`Processing` defined at the top level of the module of
    its ``decide`` function."""
    module = getattr(processing.decide, "__module__", None)
    found = sys.modules.get(module or "")
    for attr, value in vars(found).items() if found is not None else ():
        if value is processing and not attr.startswith("__"):
            return f"{module}:{attr}"
    raise InvalidInput(
        "a custom Processing cannot be recorded in a trace unless it is defined at the top "
        "level of the module of its decide function"
    )


def import_reference(name: str, where: str) -> Any:
    """The object ``module:qualname`` names (InvalidInput, prefixed by ``where``, if not)."""
    module_name, sep, qualname = name.partition(":")
    if not sep or not module_name or not qualname:
        raise InvalidInput(f"{where}: {name!r} is not module:qualname")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # an import runs foreign code: any failure is the input's
        raise InvalidInput(f"{where}: cannot import {name} ({type(exc).__name__}: {exc})") from None
    return obj


def lifecycle_of(name: str, where: str) -> LifecycleFactory:
    """A ``Lifecycle`` subclass (or a function making one with the same arguments)."""
    obj = import_reference(name, where)
    if (isinstance(obj, type) and not issubclass(obj, Lifecycle)) or not callable(obj):
        raise InvalidInput(f"{where}: {name} is not a subclass of remora.worker.Lifecycle")
    return obj  # type: ignore[no-any-return]


@contextmanager
def prepared(config: SimConfig, lifecycle: str | None = None) -> Iterator[RunSetup]:
    """Resolve what ``config`` names and keep it in force for the block.  ``lifecycle``
    (``--lifecycle``) replaces the recorded lifecycle."""
    processing = AMENDMENTS
    if config.processing is not None:
        processing = import_reference(config.processing, "trace.config.processing")
        if not isinstance(processing, Processing):
            raise InvalidInput(
                f"trace.config.processing: {config.processing} is not a remora.domain.Processing"
            )
    model: Model = AMENDMENT_RULES if config.processing is None else None
    if config.model is not None:
        model = import_reference(config.model, "trace.config.model")
        if not callable(model):
            raise InvalidInput(f"trace.config.model: {config.model} is not callable")
    name, where = config.lifecycle, "trace.config.lifecycle"
    if lifecycle is not None:
        name, where = lifecycle, "--lifecycle"
    if config.mutation is None:
        factory = Lifecycle if name is None else lifecycle_of(name, where)
        yield RunSetup(factory, processing, model)
        return
    if name is not None:
        raise InvalidInput(f"{where}: a trace run against a mutation runs the mutation's lifecycle")
    try:
        planted = mutation(config.mutation)
    except InvalidInput as exc:
        raise InvalidInput(f"trace.config.mutation: {exc}") from None
    with planted.applied() as mutant:
        yield RunSetup(mutant, processing, model)


__all__ = [
    "RunSetup",
    "reference_of",
    "processing_reference",
    "import_reference",
    "lifecycle_of",
    "prepared",
]
