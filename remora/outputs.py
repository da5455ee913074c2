"""Writing output files: the one writer every Remora command and artifact uses.

What a user names as an output (``--report``, ``--save``, ``--out``, ``--json``, ``--dir``,
``--counterexample``) may be anything, so :func:`write_output` looks before it writes:

* a **missing path** or a **regular file** is written *atomically*: a temporary file in the
  same folder, fsync'ed, renamed over the target — readers see the old file or the new one,
  never a torn one, and a failure leaves no temporary file.  A new file gets the permissions
  the umask allows (``0666 & ~umask``, as ``open`` would: not ``mkstemp``'s ``0600``); a
  replaced file keeps its permission bits;
* a **symlink**, a **character device** (``/dev/stdout``, ``/dev/null``) or a **FIFO** is
  *written through*: opened and written in place, never replaced — replacing ``/dev/stdout``
  with a regular file (as root) or a symlink with a file is exactly what must not happen;
* a **directory**, a **block device** or a **socket** is refused.

A folder that does not exist is refused too (a mistyped ``--report`` path is reported, not
silently created), except where Remora picks the place itself (``artifacts/…``):
``parents=True``.  Every refusal is :class:`OutputError` — an
:class:`~remora.errors.InvalidInput`, one line naming the path: exit 2.

:func:`write_new` is for artifacts Remora names itself (failing traces, reductions): it
never overwrites a *different* file — an identical one is reused, otherwise the name gets a
``-2``, ``-3``, … suffix — using an atomic no-clobber link, so two processes cannot both win.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from remora.errors import InvalidInput

MAX_NEW_NAMES = 1000
"""How many ``-N`` suffixes :func:`write_new` tries before it gives up."""


class OutputError(InvalidInput):
    """An output path Remora will not (or cannot) write; the message names it."""


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _check_folder(target: Path, parents: bool) -> None:
    folder = target.parent
    if parents:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{target}: cannot create its folder ({_reason(exc)})") from None
        return
    if not folder.exists():
        raise OutputError(f"{target}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputError(f"{target}: {folder} is not a folder")


ATOMIC = "atomic"
THROUGH = "through"


def check_output(path: str | Path, *, parents: bool = False) -> None:
    """Refuse, before any work is done, an output :func:`write_output` would refuse."""
    target = Path(path)
    if _plan(target)[0] == ATOMIC and not parents:
        _check_folder(target, parents=False)


def write_output(path: str | Path, data: str | bytes, *, parents: bool = False) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` (module docstring).  Returns ``path``."""
    target = Path(path)
    payload = _bytes(data)
    how, mode = _plan(target)
    if how == THROUGH:
        return _through(target, payload)
    if mode is None:  # a new file
        _check_folder(target, parents)
    return _atomic(target, payload, mode=mode)


def _plan(target: Path) -> tuple[str, int | None]:
    """How to write ``target``: (:data:`ATOMIC`, None) for a new file, (:data:`ATOMIC`, its
    permission bits) for a regular file to replace, (:data:`THROUGH`, None) to write in
    place; anything else is refused with :class:`OutputError`."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return ATOMIC, None
    except OSError as exc:  # e.g. a path through a file ("file/x"), or no permission
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    if stat.S_ISREG(st.st_mode):
        return ATOMIC, stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(target)  # what the link leads to
        except FileNotFoundError:
            return THROUGH, None  # a dangling link: create what it names
        except OSError as exc:
            raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
        if stat.S_ISREG(st.st_mode):
            return THROUGH, None
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return THROUGH, None
    kind = (
        "a directory"
        if stat.S_ISDIR(st.st_mode)
        else "a block device"
        if stat.S_ISBLK(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "not a regular file"
    )
    raise OutputError(f"{target}: is {kind}; name a file to write")


def _through(target: Path, payload: bytes) -> Path:
    """Open what ``target`` names and write in place (no temporary file, no rename)."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    return target


def _temporary(target: Path, payload: bytes, mode: int | None) -> Path:
    """A fully written, fsync'ed temporary file beside ``target``: mode ``0666 & ~umask``
    (the kernel applies the umask to ``os.open``'s mode) or exactly ``mode``."""
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic(target: Path, payload: bytes, mode: int | None) -> Path:
    try:
        tmp = _temporary(target, payload, mode)
        try:
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    _sync_folder(target.parent)
    return target


def _candidates(path: Path) -> list[Path]:
    return [path] + [
        path.with_name(f"{path.stem}-{n}{path.suffix}") for n in range(2, MAX_NEW_NAMES + 1)
    ]


def _same_content(path: Path, payload: bytes) -> bool:
    try:
        st = os.lstat(path)
        return (
            stat.S_ISREG(st.st_mode)
            and st.st_size == len(payload)
            and (path.read_bytes() == payload)
        )
    except OSError:
        return False


def write_new(path: str | Path, data: str | bytes, *, parents: bool = True) -> Path:
    """Write ``data`` to ``path`` or, when a different file (or anything else) is there, to
    the first free ``<stem>-N<suffix>`` beside it; an identical file is reused.  Returns the
    path that holds ``data``.  Atomic: the file appears complete (a hard link of a fsync'ed
    temporary file, which fails rather than replace anything)."""
    target = Path(path)
    payload = _bytes(data)
    _check_folder(target, parents)
    try:
        tmp = _temporary(target, payload, mode=None)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    try:
        for candidate in _candidates(target):
            if _same_content(candidate, payload):
                return candidate
            try:
                os.link(tmp, candidate)
            except FileExistsError:
                continue
            except OSError as exc:
                raise OutputError(f"{candidate}: cannot write ({_reason(exc)})") from None
            _sync_folder(candidate.parent)
            return candidate
    finally:
        tmp.unlink(missing_ok=True)
    raise OutputError(f"{target}: {MAX_NEW_NAMES} files of this name exist already")


__all__ = [
    "MAX_NEW_NAMES",
    "OutputError",
    "ATOMIC",
    "THROUGH",
    "check_output",
    "write_output",
    "write_new",
]
