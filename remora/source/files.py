"""A file-backed source: a directory of JSONL files, one per partition.

File names are ``partition-<N>.jsonl`` (``N`` ≥ 0).  Each non-blank line is one record::

    {"offset": 0, "visible": true, "key": "s1", "value": {"subject": "s1", ...}}

* ``offset`` (required) — strictly increasing within the file; gaps are allowed;
* ``visible`` (default true) — false for aborted/control records, which fetch skips;
* ``key`` (default null) — a string or null;
* exactly one of ``value`` — a JSON string is taken as raw UTF-8 text (so malformed values can
  be written), any other JSON value is stored as its compact JSON text — or
  ``value_base64`` — raw bytes, base64-encoded;
* ``partition`` (optional) — must equal the file's partition.

Anything else is rejected with ``file:line: reason``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Any

from remora.domain import SourceRecord
from remora.errors import InvalidInput
from remora.source.log import MemorySourceLog

_FILE = re.compile(r"^partition-(\d+)\.jsonl$")
_FIELDS = frozenset({"offset", "visible", "key", "value", "value_base64", "partition"})


def parse_source_line(partition: int, line: str, where: str) -> SourceRecord:
    try:
        doc: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: a record must be a JSON object")
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        raise InvalidInput(f"{where}: unknown field(s) {', '.join(unknown)}")
    offset = doc.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidInput(f"{where}: offset must be a non-negative integer")
    if "partition" in doc and doc["partition"] != partition:
        raise InvalidInput(f"{where}: partition {doc['partition']!r} in file of {partition}")
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
        try:
            value = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise InvalidInput(f"{where}: value_base64 is not valid base64") from None
    elif isinstance(doc["value"], str):
        value = doc["value"].encode("utf-8")
    else:
        value = json.dumps(doc["value"], separators=(",", ":"), sort_keys=True).encode("utf-8")
    return SourceRecord(partition=partition, offset=offset, visible=visible, key=key, value=value)


def load_source_dir(path: str | Path) -> MemorySourceLog:
    """Load every ``partition-<N>.jsonl`` file under ``path`` into a :class:`MemorySourceLog`."""
    root = Path(path)
    if not root.is_dir():
        raise InvalidInput(f"{root}: not a directory")
    records: list[SourceRecord] = []
    partitions: list[int] = []
    for file in sorted(root.iterdir()):
        match = _FILE.match(file.name)
        if match is None:
            continue
        partition = int(match.group(1))
        partitions.append(partition)
        last = -1
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{file}: cannot read ({exc})") from None
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            record = parse_source_line(partition, line, f"{file}:{number}")
            if record.offset <= last:
                raise InvalidInput(f"{file}:{number}: offset {record.offset} is not increasing")
            last = record.offset
            records.append(record)
    if not partitions:
        raise InvalidInput(f"{root}: no partition-<N>.jsonl files")
    return MemorySourceLog(records, partitions)
