"""Cancellation contexts.

A lifecycle owns a root :class:`Context`; each guarded operation runs under a child with a
deadline (the operation budget).  Canceling a context cancels its children, wakes its
:meth:`Context.sleep` and runs the callbacks registered with :meth:`Context.on_cancel` —
that is how ``Lifecycle.stop()`` interrupts blocked I/O (an SQLite ``interrupt``, a
PostgreSQL cancel request) without taking the lifecycle mutex.  Every wait goes through the
context's clock, so one injected :class:`~remora.clock.Clock` decides what time is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from remora.clock import Clock
from remora.errors import Canceled, DeadlineExceeded

Callback = Callable[[], None]


class Context:
    """A cancelable scope with an optional deadline on an injected clock."""

    __slots__ = (
        "_callbacks",
        "_children",
        "_clock",
        "_deadline",
        "_event",
        "_lock",
        "_parent",
        "_reason",
    )

    def __init__(
        self,
        clock: Clock,
        *,
        parent: Context | None = None,
        deadline: float | None = None,
    ) -> None:
        self._clock = clock
        self._parent = parent
        self._deadline = deadline
        self._event: threading.Event | None = None  # created on first sleep (most never do)
        self._lock = threading.Lock()
        self._reason: Canceled | None = None
        self._callbacks: list[Callback] = []
        self._children: list[Context] = []
        if parent is not None:
            parent._adopt(self)

    # -- construction ---------------------------------------------------------------
    def child(self, *, budget: float | None = None) -> Context:
        """A child scope; ``budget`` seconds from now bounds it (and it inherits ours)."""
        deadline = None if budget is None else self._clock.now() + budget
        if self._deadline is not None and (deadline is None or self._deadline < deadline):
            deadline = self._deadline
        return Context(self._clock, parent=self, deadline=deadline)

    def root(self) -> Context:
        """The outermost scope this one descends from (a process's own context): what a
        kill of the process cancels, whichever child scope the call ran under."""
        ctx = self
        while ctx._parent is not None:
            ctx = ctx._parent
        return ctx

    def close(self) -> None:
        """Detach a finished child from its parent so the parent does not grow."""
        parent = self._parent
        if parent is not None:
            with parent._lock:
                if self in parent._children:
                    parent._children.remove(self)

    def _adopt(self, child: Context) -> None:
        with self._lock:
            reason = self._reason
            if reason is None:
                self._children.append(child)
        if reason is not None:
            child.cancel(reason)

    # -- cancellation ---------------------------------------------------------------
    def cancel(self, reason: Canceled | None = None) -> None:
        """Cancel this scope and its children; idempotent (the first reason wins)."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason or Canceled("canceled")
            callbacks, self._callbacks = self._callbacks, []
            children, self._children = self._children, []
            event = self._event
        if event is not None:
            event.set()
        for child in children:
            child.cancel(self._reason)
        for callback in callbacks:
            callback()

    @property
    def canceled(self) -> bool:
        return self._reason is not None

    @property
    def deadline(self) -> float | None:
        return self._deadline

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None without one)."""
        if self._deadline is None:
            return None
        return self._deadline - self._clock.now()

    def error(self) -> Canceled | None:
        """Why this scope may not run more I/O, or None if it may."""
        if self._reason is not None:
            return self._reason
        if self._deadline is not None and self._clock.now() > self._deadline:
            return DeadlineExceeded("operation budget exhausted")
        return None

    def check(self) -> None:
        """Raise :class:`Canceled` (or :class:`DeadlineExceeded`) if no more I/O may run."""
        err = self.error()
        if err is not None:
            raise err

    def on_cancel(self, callback: Callback) -> Callback:
        """Run ``callback`` when this scope is canceled; returns an unregister function.

        If the scope is already canceled the callback runs immediately."""
        with self._lock:
            if self._reason is None:
                self._callbacks.append(callback)

                def unregister() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unregister
        callback()
        return lambda: None

    def sleep(self, seconds: float, *, wake: threading.Event | None = None) -> bool:
        """Wait ``seconds`` on this context's clock, waking early when the context is
        canceled (or ``wake`` is set); True if the whole time passed uncanceled (and
        unwoken).  On a :class:`~remora.clock.MonotonicClock` this is a real wait; on a
        :class:`~remora.clock.LogicalClock` it advances logical time instead."""
        if wake is not None:
            unregister = self.on_cancel(wake.set)
            try:
                return self._clock.sleep(seconds, wake) and not self.canceled
            finally:
                unregister()
        with self._lock:
            if self._event is None:
                self._event = threading.Event()
                if self._reason is not None:
                    self._event.set()
            event = self._event
        return self._clock.sleep(seconds, event)


__all__ = [
    "Callback",
    "Context",
]
