"""Target staging and the credential vault.

**Target**: a job's output is staged per *attempt identity* ``(job, token)``: each
``AdvanceAttempt(a, n)`` writes the attempt's snapshot at progress ``n`` (a complete stage is
the snapshot at ``max_progress``).  Only the attempt that wins the durable ``AcceptSuccess``
compare-and-swap becomes the committed result (``committed_result``); ``CleanupStage``
removes the staging of the others and leaves a *cleaned* mark, so a late (zombie) write of a
cleaned attempt is refused.  A resumed attempt takes over its predecessor's staging through
the durable store (``AttemptRow.adopted_from``), not by moving files, so the takeover is part
of the durable ``AuthorizeAttempt`` step.

**Vault**: credential secrets, one per intent ``(job, sequence)``: absent, live, or
destroyed (a tombstone).

Embedded implementations: :class:`MemoryTarget`/:class:`MemoryVault` (simulation) and
:class:`DirectoryTarget`/:class:`DirectoryVault` (atomic writes: write a temporary file,
fsync, rename).  PostgreSQL schemas: :mod:`remora.jobs.postgres`.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, TypeVar, cast

from remora.errors import InvalidInput
from remora.jobs.io import Actor, JobOperation, io_call, resolved_call
from remora.jobs.model import AttemptId, IntentId, NotEnabled, SecretState, StageInfo

T = TypeVar("T")

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_id(kind: str, value: str) -> str:
    """Job and worker ids name files and keys: letters, digits, ``.``, ``_``, ``-``."""
    if not _ID.match(value):
        raise InvalidInput(
            f"{kind} id {value!r}: use 1-64 letters, digits, '.', '_' or '-' (not first)"
        )
    return value


class Target(Protocol):
    def write(
        self, actor: Actor, a: AttemptId, progress: int, data: bytes, worker: str = ""
    ) -> None: ...

    def fence(self, actor: Actor, worker: str) -> None:
        """Refuse every later stage write of ``worker`` (raised before its declaration
        as down commits; a write already under way is serialized before any cleanup of
        its attempt).  The fence is ``actor``'s own: held per declarer, as the
        coordination store's down marks are.  Not a spec step."""
        ...

    def unfence(self, actor: Actor, workers: Iterable[str]) -> None:
        """Lift ``actor``'s own fences of ``workers``: its declarations of them did not
        commit (they are durably up), so the fences would refuse the stage writes of a
        live incarnation — every checkpoint of its attempts, for good.  A fence another
        declarer holds (its declaration may still commit) stays.  Not a spec step."""
        ...

    def fenced(self, holder: str | None = None) -> frozenset[str]:
        """The incarnations whose stage writes are refused (``holder``: only those
        ``holder`` fenced).  A read outside the seam: the judgement compares it with the
        incarnations declared down; the reconciler's full pass reads its own fences to
        sweep the stale ones (:meth:`~remora.jobs.reconciler.Reconciler.sweep_marks`)."""
        ...

    def info(self, actor: Actor | None, a: AttemptId) -> StageInfo | None: ...

    def data(self, a: AttemptId, progress: int | None = None) -> bytes | None: ...

    def cleanup(self, actor: Actor, a: AttemptId) -> bool: ...

    def snapshot(self) -> dict[AttemptId, StageInfo]: ...

    def close(self) -> None: ...


class Vault(Protocol):
    def state(self, actor: Actor | None, c: IntentId) -> SecretState: ...

    def write(self, actor: Actor, c: IntentId, secret: bytes) -> None: ...

    def destroy(self, actor: Actor, c: IntentId) -> None: ...

    def read(self, c: IntentId) -> bytes | None: ...

    def snapshot(self) -> dict[IntentId, SecretState]: ...

    def close(self) -> None: ...


def _write_call(
    actor: Actor,
    op: JobOperation,
    key: str,
    body: Callable[[], T],
    applied: Callable[[], bool],
    done: T,
) -> T:
    """A target/vault write under the seam (``unknown-aborted`` does not apply it); a lost
    reply is resolved by re-reading (:func:`~remora.jobs.io.resolved_call`)."""

    def effect(commit: bool) -> T:
        if not commit:  # unknown-aborted: not applied, the seam reports an unknown result
            return cast(T, None)
        return body()

    return resolved_call(actor, op, key, effect, applied, lambda: done)


def _fence_write(actor: Actor, body: Callable[[], None], applied: Callable[[], bool]) -> None:
    """A fence's raise or let-go (:meth:`Target.fence`, :meth:`Target.unfence`): a target
    write under the seam, keyed by no job."""
    _write_call(actor, JobOperation.TARGET_WRITE, "", body, applied, None)


class MemoryTarget:
    def __init__(self) -> None:
        self._stages: dict[AttemptId, dict[int, bytes]] = {}
        self._cleaned: dict[AttemptId, int] = {}  # progress when cleaned
        #: Incarnations being declared down, each with the declarers that fenced it.
        self._fenced: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def fence(self, actor: Actor, worker: str) -> None:
        def body() -> None:
            with self._lock:
                self._fenced.setdefault(worker, set()).add(actor.name)

        _fence_write(actor, body, lambda: actor.name in self._fenced.get(worker, ()))

    def unfence(self, actor: Actor, workers: Iterable[str]) -> None:
        ids = sorted(workers)

        def body() -> None:
            with self._lock:
                for w in ids:
                    holders = self._fenced.get(w)
                    if holders is not None:
                        holders.discard(actor.name)
                        if not holders:
                            del self._fenced[w]

        _fence_write(
            actor, body, lambda: not any(actor.name in self._fenced.get(w, ()) for w in ids)
        )

    def fenced(self, holder: str | None = None) -> frozenset[str]:
        with self._lock:
            return frozenset(w for w, by in self._fenced.items() if holder is None or holder in by)

    def write(
        self, actor: Actor, a: AttemptId, progress: int, data: bytes, worker: str = ""
    ) -> None:
        _write_call(
            actor,
            JobOperation.TARGET_WRITE,
            a.job,
            lambda: self._put(a, progress, data, worker),
            lambda: _at(self, a, progress),
            None,
        )

    def _put(self, a: AttemptId, progress: int, data: bytes, worker: str) -> None:
        """A stage write's effect: refused (:class:`NotEnabled`) when ``worker`` is
        fenced, ``a``'s staging was cleaned, or a part at ``progress`` or beyond exists."""
        with self._lock:
            if worker and worker in self._fenced:
                raise NotEnabled(f"worker {worker} is down: its stage writes are fenced")
            if a in self._cleaned:
                raise NotEnabled(f"staging of {a} was cleaned")
            parts = self._stages.setdefault(a, {})
            if parts and progress <= max(parts):
                raise NotEnabled(f"{a}: progress {progress} is not ahead")
            parts[progress] = data

    def _unput(self, a: AttemptId, progress: int) -> None:
        """Take back a part :meth:`_put` wrote (its transaction did not commit)."""
        with self._lock:
            parts = self._stages.get(a)
            if parts is not None:
                parts.pop(progress, None)
                if not parts:
                    del self._stages[a]

    def info(self, actor: Actor | None, a: AttemptId) -> StageInfo | None:
        def read(commit: bool = True) -> StageInfo | None:
            with self._lock:
                parts = self._stages.get(a)
                if a in self._cleaned:
                    return StageInfo(self._cleaned[a], True)
                return None if not parts else StageInfo(max(parts), False)

        if actor is None:
            return read()
        return io_call(actor, JobOperation.TARGET_READ, a.job, read)

    def data(self, a: AttemptId, progress: int | None = None) -> bytes | None:
        with self._lock:
            parts = self._stages.get(a) or {}
            keys = [p for p in parts if progress is None or p <= progress]
            return parts[max(keys)] if keys else None

    def cleanup(self, actor: Actor, a: AttemptId) -> bool:
        def body() -> bool:
            with self._lock:
                if a in self._cleaned:
                    return False
                parts = self._stages.pop(a, None) or {}
                self._cleaned[a] = max(parts, default=0)
                return True

        return _write_call(
            actor, JobOperation.TARGET_WRITE, a.job, body, lambda: _gone(self, a), True
        )

    def snapshot(self) -> dict[AttemptId, StageInfo]:
        with self._lock:
            out = {a: StageInfo(max(p), False) for a, p in self._stages.items() if p}
            out.update({a: StageInfo(p, True) for a, p in self._cleaned.items()})
            return out

    def close(self) -> None:
        return None


def _atomic_write(path: Path, data: bytes, mode: int = 0o666) -> None:
    """``data`` at ``path``, all or nothing (a temporary file, fsynced, renamed over it).
    ``mode`` (less the umask) is the temporary file's from its creation: a secret's file
    is never readable by others, not even between its creation and a ``chmod``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a killed writer's leftover keeps its own mode: never reused
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class DirectoryTarget:
    """``<root>/<job>/<token>/<progress>.stage`` snapshots; ``cleaned`` marks a removed
    staging (the marker is written before the snapshots are deleted)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _dir(self, a: AttemptId) -> Path:
        return self.root / check_id("job", a.job) / str(a.token)

    def _parts(self, a: AttemptId) -> dict[int, Path]:
        d = self._dir(a)
        if not d.is_dir():
            return {}
        return {int(p.stem): p for p in d.glob("*.stage") if p.stem.isdigit()}

    def _fences(self, worker: str) -> Path:
        """``.fenced/<worker>/``: one empty file per declarer holding a fence of ``worker``
        (a plain file ``.fenced/<worker>``, an earlier version's fence, is held by no
        declarer: it is never lifted)."""
        return self.root / ".fenced" / check_id("worker", worker)

    def _is_fenced(self, worker: str, holder: str | None = None) -> bool:
        path = self._fences(worker)
        if holder is not None:
            return (path / check_id("declarer", holder)).is_file()
        if path.is_file():
            return True
        return path.is_dir() and any(not p.name.startswith(".") for p in path.iterdir())

    def fence(self, actor: Actor, worker: str) -> None:
        def body() -> None:
            with self._lock:
                path = self._fences(worker)
                if path.is_file():
                    return  # an earlier version's fence: refused for good already
                path.mkdir(parents=True, exist_ok=True)
                _atomic_write(path / check_id("declarer", actor.name), b"")

        _fence_write(
            actor,
            body,
            lambda: self._fences(worker).is_file() or self._is_fenced(worker, actor.name),
        )

    def unfence(self, actor: Actor, workers: Iterable[str]) -> None:
        ids = sorted(workers)

        def body() -> None:
            with self._lock:
                for w in ids:
                    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                        (self._fences(w) / check_id("declarer", actor.name)).unlink()

        _fence_write(actor, body, lambda: not any(self._is_fenced(w, actor.name) for w in ids))

    def fenced(self, holder: str | None = None) -> frozenset[str]:
        marks = self.root / ".fenced"
        if not marks.is_dir():
            return frozenset()
        return frozenset(
            p.name
            for p in marks.iterdir()
            if not p.name.startswith(".") and self._is_fenced(p.name, holder)
        )

    def write(
        self, actor: Actor, a: AttemptId, progress: int, data: bytes, worker: str = ""
    ) -> None:
        def body() -> None:
            with self._lock:
                if worker and self._is_fenced(worker):
                    raise NotEnabled(f"worker {worker} is down: its stage writes are fenced")
                if (self._dir(a) / "cleaned").exists():
                    raise NotEnabled(f"staging of {a} was cleaned")
                parts = self._parts(a)
                if parts and progress <= max(parts):
                    raise NotEnabled(f"{a}: progress {progress} is not ahead")
                _atomic_write(self._dir(a) / f"{progress}.stage", data)

        _write_call(
            actor, JobOperation.TARGET_WRITE, a.job, body, lambda: _at(self, a, progress), None
        )

    def info(self, actor: Actor | None, a: AttemptId) -> StageInfo | None:
        def read(commit: bool = True) -> StageInfo | None:
            mark = self._dir(a) / "cleaned"
            if mark.exists():
                return StageInfo(int(mark.read_text() or 0), True)
            parts = self._parts(a)
            return StageInfo(max(parts), False) if parts else None

        if actor is None:
            return read()
        return io_call(actor, JobOperation.TARGET_READ, a.job, read)

    def data(self, a: AttemptId, progress: int | None = None) -> bytes | None:
        parts = self._parts(a)
        keys = [p for p in parts if progress is None or p <= progress]
        return parts[max(keys)].read_bytes() if keys else None

    def cleanup(self, actor: Actor, a: AttemptId) -> bool:
        def body() -> bool:
            with self._lock:
                d = self._dir(a)
                if (d / "cleaned").exists():
                    return False
                progress = max(self._parts(a), default=0)
                _atomic_write(d / "cleaned", str(progress).encode())
                for p in d.glob("*.stage"):
                    p.unlink()
                return True

        return _write_call(
            actor, JobOperation.TARGET_WRITE, a.job, body, lambda: _gone(self, a), True
        )

    def snapshot(self) -> dict[AttemptId, StageInfo]:
        out: dict[AttemptId, StageInfo] = {}
        for job_dir in sorted(
            p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")
        ):
            for d in sorted(p for p in job_dir.iterdir() if p.is_dir() and p.name.isdigit()):
                a = AttemptId(job_dir.name, int(d.name))
                info = self.info(None, a)
                if info is not None:
                    out[a] = info
        return out

    def close(self) -> None:
        return None


class MemoryVault:
    def __init__(self) -> None:
        self._secrets: dict[IntentId, bytes | None] = {}  # None: destroyed
        self._lock = threading.Lock()

    def state(self, actor: Actor | None, c: IntentId) -> SecretState:
        def read(commit: bool = True) -> SecretState:
            with self._lock:
                if c not in self._secrets:
                    return SecretState.ABSENT
                return SecretState.DESTROYED if self._secrets[c] is None else SecretState.LIVE

        if actor is None:
            return read()
        return io_call(actor, JobOperation.VAULT_READ, c.job, read)

    def write(self, actor: Actor, c: IntentId, secret: bytes) -> None:
        def body() -> None:
            with self._lock:
                if c in self._secrets:
                    raise NotEnabled(f"vault entry {c} exists")
                self._secrets[c] = secret

        _write_call(actor, JobOperation.VAULT_WRITE, c.job, body, lambda: _live(self, c), None)

    def destroy(self, actor: Actor, c: IntentId) -> None:
        def body() -> None:
            with self._lock:
                if self._secrets.get(c) is None:
                    raise NotEnabled(f"no live secret {c}")
                self._secrets[c] = None

        _write_call(actor, JobOperation.VAULT_WRITE, c.job, body, lambda: _dead(self, c), None)

    def read(self, c: IntentId) -> bytes | None:
        with self._lock:
            return self._secrets.get(c)

    def snapshot(self) -> dict[IntentId, SecretState]:
        return {c: self.state(None, c) for c in list(self._secrets)}

    def close(self) -> None:
        return None


SECRET_MODE = 0o600
"""A vault secret's file mode: its owner's alone (the umask may only narrow it)."""


class DirectoryVault:
    """``<root>/<job>/<sequence>.secret`` (mode 0600); a destroyed secret leaves
    ``<sequence>.destroyed``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()

    def _path(self, c: IntentId, kind: str) -> Path:
        return self.root / check_id("job", c.job) / f"{c.sequence}.{kind}"

    def state(self, actor: Actor | None, c: IntentId) -> SecretState:
        def read(commit: bool = True) -> SecretState:
            if self._path(c, "destroyed").exists():
                return SecretState.DESTROYED
            return SecretState.LIVE if self._path(c, "secret").exists() else SecretState.ABSENT

        if actor is None:
            return read()
        return io_call(actor, JobOperation.VAULT_READ, c.job, read)

    def write(self, actor: Actor, c: IntentId, secret: bytes) -> None:
        def body() -> None:
            with self._lock:
                if self.state(None, c) is not SecretState.ABSENT:
                    raise NotEnabled(f"vault entry {c} exists")
                _atomic_write(self._path(c, "secret"), secret, SECRET_MODE)

        _write_call(actor, JobOperation.VAULT_WRITE, c.job, body, lambda: _live(self, c), None)

    def destroy(self, actor: Actor, c: IntentId) -> None:
        def body() -> None:
            with self._lock:
                if self.state(None, c) is not SecretState.LIVE:
                    raise NotEnabled(f"no live secret {c}")
                _atomic_write(self._path(c, "destroyed"), b"")
                self._path(c, "secret").unlink()

        _write_call(actor, JobOperation.VAULT_WRITE, c.job, body, lambda: _dead(self, c), None)

    def read(self, c: IntentId) -> bytes | None:
        p = self._path(c, "secret")
        return p.read_bytes() if p.exists() else None

    def snapshot(self) -> dict[IntentId, SecretState]:
        out: dict[IntentId, SecretState] = {}
        for job_dir in sorted(
            p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")
        ):
            for f in job_dir.iterdir():
                stem, _, kind = f.name.partition(".")
                if stem.isdigit() and kind in ("secret", "destroyed"):
                    c = IntentId(job_dir.name, int(stem))
                    out[c] = self.state(None, c)
        return out

    def close(self) -> None:
        return None


def _at(target: Target, a: AttemptId, progress: int) -> bool:
    info = target.info(None, a)
    return info is not None and not info.cleaned and info.progress >= progress


def _gone(target: Target, a: AttemptId) -> bool:
    info = target.info(None, a)
    return info is not None and info.cleaned


def _live(vault: Vault, c: IntentId) -> bool:
    return vault.state(None, c) is SecretState.LIVE


def _dead(vault: Vault, c: IntentId) -> bool:
    return vault.state(None, c) is SecretState.DESTROYED


__all__ = [
    "DirectoryTarget",
    "DirectoryVault",
    "MemoryTarget",
    "MemoryVault",
    "Target",
    "Vault",
    "check_id",
]
