"""Source side: ordered partitions of raw records, fetch cursors and a file-backed log.

A source partition is an ordered log of :class:`~remora.domain.SourceRecord`.  Offsets may
have gaps and some records are invisible; fetch skips those.  Validating that a partition
exists is modeled I/O and goes through the same fault hook as the store.
"""

from __future__ import annotations

from remora.source.cursor import FetchCursors
from remora.source.files import (
    FileSourceLog,
    PartitionSourceError,
    load_source_dir,
    open_source_dir,
    parse_source_line,
)
from remora.source.log import MemorySourceLog, SourceLog, SourceValidator

__all__ = [
    "FetchCursors",
    "FileSourceLog",
    "MemorySourceLog",
    "PartitionSourceError",
    "SourceLog",
    "SourceValidator",
    "load_source_dir",
    "open_source_dir",
    "parse_source_line",
]
