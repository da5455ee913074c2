"""Typed errors of the protocol port and its explorer."""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class of every error raised by :mod:`remora.protocol`."""


class ConfigError(ProtocolError):
    """A configuration (named or from a file) was rejected: bad syntax, field or ASSUME."""


class SpecEvaluationError(ProtocolError):
    """The spec could not be evaluated in a state (TLC would stop with an error too)."""


class ExplorationLimitError(ProtocolError):
    """An exploration exceeded a limit the caller set (for example ``max_states``)."""


__all__ = [
    "ProtocolError",
    "ConfigError",
    "SpecEvaluationError",
    "ExplorationLimitError",
]
