"""A file-backed source: a directory of JSONL files, one per partition.

File names are ``partition-<N>.jsonl`` (``N`` in ASCII digits, 0 ≤ N < 2^31; two names for
one partition, or any other ``partition-*`` entry, are refused, naming the files).  Each
non-blank line is one record::

    {"offset": 0, "visible": true, "key": "s1", "value": {"subject": "s1", ...}}

* ``offset`` (required) — strictly increasing within the file; gaps are allowed;
* ``visible`` (default true) — false for aborted/control records, which fetch skips;
* ``key`` (default null) — a string or null;
* exactly one of ``value`` — a JSON string is taken as raw UTF-8 text (so malformed values can
  be written), any other JSON value is stored as its compact JSON text — or
  ``value_base64`` — raw bytes, base64-encoded;
* ``partition`` (optional) — must equal the file's partition.

Anything else is rejected with ``file:line: reason``.  Records are separated by ``\n`` (a
``\r\n`` ending is accepted too).

Two readers share one parser and one validation: :func:`load_source_dir` loads everything
into a :class:`~remora.source.log.MemorySourceLog` (tests, small tools), and
:func:`open_source_dir` returns a :class:`FileSourceLog`, which validates every file in one
streaming pass and then reads records from the files as they are fetched — what
``remora run`` uses, so its memory does not grow with the source.
"""

from __future__ import annotations

import bisect
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from remora import strictjson
from remora.context import Context
from remora.domain import SourceRecord
from remora.errors import InvalidInput, SourceError
from remora.faults import NO_FAULTS, IOCall, IOHook, Operation, controlled_call
from remora.limits import MAX_OFFSET, MAX_PARTITION
from remora.source.log import MemorySourceLog

_FILE = re.compile(r"^partition-([0-9]+)\.jsonl$", re.ASCII)
_FIELDS = frozenset({"offset", "visible", "key", "value", "value_base64", "partition"})


def parse_source_line(partition: int, line: str, where: str) -> SourceRecord:
    """One source line as a record, read as strictly as a trace (:mod:`remora.strictjson`:
    duplicate keys, ``NaN``, huge integers, deep nesting and lone surrogates are refused),
    with every integer bounded to what every store holds (:mod:`remora.limits`)."""
    try:
        doc: Any = strictjson.loads(line)
    except strictjson.JsonRejected as exc:
        reason = f"not JSON ({exc})" if exc.syntax else str(exc)
        raise InvalidInput(f"{where}: {reason}") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: a record must be a JSON object")
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        names = ", ".join(strictjson.short(u, 40) for u in unknown[:5])
        raise InvalidInput(f"{where}: unknown field(s) {names}")
    offset = doc.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= MAX_OFFSET:
        raise InvalidInput(f"{where}: offset must be an integer in 0..{MAX_OFFSET}")
    if "partition" in doc and (
        not strictjson.is_int(doc["partition"]) or doc["partition"] != partition
    ):
        raise InvalidInput(
            f"{where}: partition {strictjson.short(doc['partition'])} in file of {partition}"
        )
    visible = doc.get("visible", True)
    if not isinstance(visible, bool):
        raise InvalidInput(f"{where}: visible must be true or false")
    key = doc.get("key")
    if key is not None and not isinstance(key, str):
        raise InvalidInput(f"{where}: key must be a string or null")
    if ("value" in doc) == ("value_base64" in doc):
        raise InvalidInput(f"{where}: exactly one of value and value_base64 is required")
    if "value_base64" in doc:
        encoded = doc["value_base64"]
        if not isinstance(encoded, str):
            raise InvalidInput(f"{where}: value_base64 must be a string")
        value = strictjson.decode_base64(encoded, f"{where}: value_base64")
    elif isinstance(doc["value"], str):
        value = doc["value"].encode("utf-8")  # no surrogate: strictjson refused those
    else:
        value = json.dumps(doc["value"], separators=(",", ":"), sort_keys=True).encode("utf-8")
    return SourceRecord(partition=partition, offset=offset, visible=visible, key=key, value=value)


INDEX_EVERY = 1024
"""A :class:`FileSourceLog` remembers where every 1024th record of a file starts, so that a
seek back (a new owner resuming at the durable frontier) rereads at most that many lines."""


def _partition_files(path: str | Path) -> list[tuple[int, Path]]:
    """The partition files of a source directory, in partition order.

    Refused (one line naming the files): two names for one partition
    (``partition-1.jsonl`` and ``partition-01.jsonl``), a ``partition-*`` entry that does not
    match ``partition-<N>.jsonl`` (N in ASCII digits only, at most :data:`MAX_PARTITION`) or
    is not a regular file — a file the user meant to be read is never silently skipped."""
    root = Path(path)
    if not root.is_dir():
        raise InvalidInput(f"{root}: not a directory")
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        raise InvalidInput(f"{root}: cannot list ({exc.strerror or exc})") from None
    found: dict[int, Path] = {}
    strays: list[str] = []
    for file in entries:
        if not file.name.startswith("partition-"):
            continue
        match = _FILE.match(file.name)
        if match is None or len(match.group(1)) > 10 or int(match.group(1)) > MAX_PARTITION:
            strays.append(file.name)
            continue
        if not file.is_file():
            raise InvalidInput(f"{file}: not a regular file")
        number = int(match.group(1))
        if number in found:
            raise InvalidInput(
                f"{root}: {found[number].name} and {file.name} are both partition {number}"
            )
        found[number] = file
    if strays:
        shown = ", ".join(strictjson.short(name, 80) for name in strays[:5])
        more = f" and {len(strays) - 5} more" if len(strays) > 5 else ""
        raise InvalidInput(
            f"{root}: {shown}{more}: not a partition file name (partition-<N>.jsonl, N in "
            f"0..{MAX_PARTITION} in ASCII digits); rename or move it"
        )
    if not found:
        raise InvalidInput(f"{root}: no partition-<N>.jsonl files")
    return sorted(found.items())


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{where}: cannot read (not UTF-8: {exc.reason})") from None


def _scan(partition: int, file: Path) -> Iterator[tuple[SourceRecord, int, int]]:
    """Every record of one partition file, validated (parsed, offsets increasing), with the
    byte position its line starts at and its line number; read line by line."""
    last = -1
    position = 0
    try:
        with file.open("rb") as f:
            for number, raw in enumerate(f, start=1):
                start, position = position, position + len(raw)
                where = f"{file}:{number}"
                line = _decode(raw, where)
                if not line.strip():
                    continue
                record = parse_source_line(partition, line, where)
                if record.offset <= last:
                    raise InvalidInput(f"{where}: offset {record.offset} is not increasing")
                last = record.offset
                yield record, start, number
    except OSError as exc:
        raise InvalidInput(f"{file}: cannot read ({exc})") from None


def load_source_dir(path: str | Path) -> MemorySourceLog:
    """Load every ``partition-<N>.jsonl`` file under ``path`` into a :class:`MemorySourceLog`."""
    files = _partition_files(path)
    records = [record for p, file in files for record, _, _ in _scan(p, file)]
    return MemorySourceLog(records, [p for p, _ in files])


def open_source_dir(path: str | Path, hook: IOHook = NO_FAULTS) -> FileSourceLog:
    """Validate every ``partition-<N>.jsonl`` file under ``path`` (one streaming pass: a bad
    line is rejected before anything runs) and return a :class:`FileSourceLog` over them."""
    return FileSourceLog(
        [(p, _PartitionFile.validated(p, file)) for p, file in _partition_files(path)], hook
    )


class PartitionSourceError(SourceError):
    """A partition file that no longer reads while a run reads it (a line changed, cut
    short or gone, or the file removed, after it was validated): that partition's failure,
    not the whole run's.  The message names ``FILE:LINE (byte B)``."""

    def __init__(self, partition: int, line: int, byte: int, after: int, reason: str) -> None:
        super().__init__(reason)
        self.partition = partition
        self.line = line
        self.byte = byte
        self.after = after  # the smallest offset the bad line could have held


class _PartitionFile:
    """One validated partition file and a reading position in it.

    ``pos`` is a line boundary, ``line`` its line number and ``floor`` the smallest offset a
    record from ``pos`` on can have; ``index`` holds such (floor, pos, line) triples every
    :data:`INDEX_EVERY` records."""

    def __init__(
        self, partition: int, file: Path, index: list[tuple[int, int, int]], end: int
    ) -> None:
        self.partition = partition
        self.file = file
        self.index = index
        self.floors = [floor for floor, _, _ in index]
        self.end = end
        self.lock = threading.Lock()
        self.handle: IO[bytes] | None = None
        self.pos = 0
        self.line = 1
        self.floor = 0

    @classmethod
    def validated(cls, partition: int, file: Path) -> _PartitionFile:
        index = [(0, 0, 1)]
        end = 0
        for n, (record, start, line) in enumerate(_scan(partition, file), start=1):
            if n % INDEX_EVERY == 0:
                index.append((end, start, line))
            end = record.offset + 1
        return cls(partition, file, index, end)

    def next_visible(self, position: int) -> SourceRecord | None:
        with self.lock:
            if position < self.floor:  # back to the last indexed line at or before it
                self.floor, self.pos, self.line = self.index[
                    bisect.bisect_right(self.floors, position) - 1
                ]
            if self.handle is None:
                try:
                    self.handle = self.file.open("rb")
                except OSError as exc:
                    raise PartitionSourceError(
                        self.partition,
                        self.line,
                        self.pos,
                        self.floor,
                        f"{self.file}: cannot read ({exc})",
                    ) from None
            self.handle.seek(self.pos)
            while raw := self.handle.readline():
                where = f"{self.file}:{self.line} (byte {self.pos})"
                try:
                    line = _decode(raw, where)
                    record = (
                        parse_source_line(self.partition, line, where) if line.strip() else None
                    )
                    if record is not None and record.offset < self.floor:
                        raise InvalidInput(f"{where}: offset {record.offset} is not increasing")
                except InvalidInput as exc:
                    # Validated when the run began, so the file changed since: this
                    # partition stops here (the position is kept; a rerun reads it again).
                    raise PartitionSourceError(
                        self.partition,
                        self.line,
                        self.pos,
                        self.floor,
                        f"{exc} (changed since the run began)",
                    ) from None
                self.pos += len(raw)
                self.line += 1
                if record is None:
                    continue
                self.floor = record.offset + 1
                if record.offset >= position and record.visible:
                    return record
            return None

    def close(self) -> None:
        with self.lock:
            if self.handle is not None:
                self.handle.close()
                self.handle = None


class FileSourceLog:
    """A source read from its partition files as records are fetched (module docstring).

    Memory does not grow with the files: it holds one open file and a sparse index (one
    entry per :data:`INDEX_EVERY` records) per partition.  Safe to share between threads;
    close it (or use it as a context manager) to close the files (a later read opens its
    file again)."""

    def __init__(self, files: list[tuple[int, _PartitionFile]], hook: IOHook = NO_FAULTS) -> None:
        self._files = dict(files)
        self.hook = hook

    @property
    def partitions(self) -> tuple[int, ...]:
        return tuple(sorted(self._files))

    def validate(self, partition: int, ctx: Context) -> None:
        """Modeled I/O: confirm the partition exists (commit or abort only)."""

        def effect(commit: bool) -> None:
            if partition not in self._files:
                raise SourceError(f"source has no partition {partition}")

        controlled_call(self.hook, IOCall(Operation.VALIDATE, partition), ctx, effect)

    def next_visible(self, partition: int, position: int) -> SourceRecord | None:
        """The first visible record at or after ``position``, or None."""
        file = self._files.get(partition)
        return None if file is None else file.next_visible(position)

    def end(self, partition: int) -> int:
        """One past the last offset of the partition (0 when empty)."""
        file = self._files.get(partition)
        return 0 if file is None else file.end

    def close(self) -> None:
        for file in self._files.values():
            file.close()

    def __enter__(self) -> FileSourceLog:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "parse_source_line",
    "INDEX_EVERY",
    "load_source_dir",
    "open_source_dir",
    "PartitionSourceError",
    "FileSourceLog",
]
