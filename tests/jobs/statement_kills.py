"""Kill-between-statements: every multi-statement durable step is all or nothing.

:class:`StatementKills` wraps a durable store's backend.  Each write that would commit is
first run dry (rolled back) to count its statements; then, for every statement ``k`` of
it, run again with the process "killed" right after statement ``k`` (:class:`Killed`, a
``BaseException``: no handler of the runtime may swallow a death) — and the whole durable
store (every ``remora_jobs_*`` table, the log included) must read exactly as before the
write.  Then the write runs for real.  Driven by a run of the real runtime (a schedule and
its fair drain), it checks every durable step kind the run takes, on SQLite and on
PostgreSQL (``test_between_stores.py``, its services half at the end)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remora.context import Context


class Killed(BaseException):
    """The process died between two statements of a transaction."""


class _Dying:
    """A cursor (or SQLite connection) whose process dies after its ``after``-th
    statement (never, when ``after`` is 0: it only counts)."""

    def __init__(self, cur: Any, after: int) -> None:
        self._cur = cur
        self._after = after
        self.count = 0

    def _ran(self, result: Any) -> Any:
        self.count += 1
        if self.count == self._after:
            raise Killed(f"killed after statement {self.count}")
        return result

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self._ran(self._cur.execute(*args, **kwargs))

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        return self._ran(self._cur.executemany(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


class StatementKills:
    """The backend ``real``, its committing writes checked all or nothing (module
    docstring); ``points``: the (write, statement) kills checked, per write kind;
    ``split``: a planted bug — commit after the first write (a step cut in two
    transactions), which the check must catch."""

    def __init__(self, real: Any, split: bool = False) -> None:
        self.real = real
        self.split = split
        self.points: dict[str, int] = {}
        self.multi = 0  # committing writes of two statements or more

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        def body(cur: Any) -> dict[str, list[tuple[Any, ...]]]:
            if self.real.dialect.name == "sqlite":
                sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
            else:
                sql = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            names = sorted(str(r[0]) for r in cur.execute(sql).fetchall())
            return {
                n: sorted(
                    (tuple(r) for r in cur.execute(f"SELECT * FROM {n}").fetchall()), key=repr
                )
                for n in names
                if n.startswith("remora_jobs_")
            }

        result: dict[str, list[tuple[Any, ...]]] = self.real.read("dump", body)
        return result

    def _body(self, body: Callable[[Any], Any], cursor: _Dying) -> Callable[[Any], Any]:
        def run(cur: Any) -> Any:
            cursor._cur = cur
            if self.split and cursor._after:  # the planted split in the killed runs only
                return body(_Splitting(cursor))
            return body(cursor)

        return run

    def write(self, ctx: Context, commit: bool, what: str, body: Callable[[Any], Any]) -> Any:
        if not commit:
            return self.real.write(ctx, commit, what, body)
        counter = _Dying(None, 0)
        self.real.write(ctx, False, what, self._body(body, counter))
        n = counter.count
        if n >= 2:
            self.multi += 1
            before = self.dump()
            for k in range(1, n + 1):
                try:
                    self.real.write(ctx, True, what, self._body(body, _Dying(None, k)))
                except Killed:
                    pass
                else:
                    raise AssertionError(f"{what}: statement {k} of {n} was never reached")
                after = self.dump()
                if after != before:
                    changed = sorted(t for t in after if after[t] != before.get(t))
                    raise AssertionError(
                        f"{what}: killed after statement {k} of {n}, the durable store "
                        f"kept part of the transaction (tables {', '.join(changed)})"
                    )
                self.points[what] = self.points.get(what, 0) + 1
        return self.real.write(ctx, True, what, body)


class _Splitting:
    """The planted bug: the transaction is committed right after its first write."""

    def __init__(self, cur: _Dying) -> None:
        self._cur = cur
        self._split = False

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        result = self._cur.execute(*args, **kwargs)
        write = not str(args[0]).lstrip().upper().startswith("SELECT")
        if write and not self._split:
            self._split = True
            self._cur._cur.execute("COMMIT")
            self._cur._cur.execute("BEGIN")
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)
