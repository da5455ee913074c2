"""More rules for :class:`~remora.testing.group_machine.GroupRunMachine`, as a mixin.

* :meth:`SourceChecks.source_identity` — what ``remora run`` does around a run: record the
  source's identity in the store (:func:`~remora.worker.source_identity.record_source`) and
  check it before the next run (:func:`~remora.worker.source_identity.check_source`).  The
  unchanged (only appended-to) source must pass and leave exactly the marks the module
  documents — per partition with a visible record, the first visible record, and the record
  just below the durable frontier; a copy with one processed record altered or dropped must
  be refused (:class:`~remora.worker.source_identity.SourceMismatch`, naming the partition)
  exactly when that record is one of the marks, and with ``accept`` be re-recorded instead.
* :meth:`SourceChecks.append_awkward` — values that parse but that no store can hold (NUL,
  lone surrogates in keys, values or nested lists, a subject of such text), values with
  escapes every store can hold, and amendments with a wrong field type or an extra field:
  the runs that follow must quarantine or apply each exactly as the independent oracle
  says (the machine's store check after every run).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from remora.domain import SourceRecord
from remora.source.files import load_source_dir
from remora.store.identity import SourceIdentity, mark
from remora.worker.source_identity import SourceMismatch, check_source, record_source


def _awkward(subject: str) -> list[bytes]:
    """Amendments (``submit``, revision 1 of a fresh subject) that parse, each awkward."""

    def am(**fields: Any) -> bytes:
        doc: dict[str, Any] = {"subject": subject, "op": "submit", "revision": 1, "body": {}}
        doc.update(fields)
        return json.dumps(doc).encode()  # ensure_ascii: NUL and surrogates as \\u escapes

    return [
        am(body={"k": "a\x00b"}),
        am(body={"\ud800": 1}),
        am(body={"k": [["x", {"y": "\udfff"}]]}),
        am(body={"k": ["caf\u00e9", {"n": [1, "\u00fc"]}]}),  # escapes every store holds
        am(subject="\x00" + subject),
        am(revision="1"),
        am(revision=True),
        am(op=5),
        am(body=[1]),
        am(extra=1),
        b'{"subject": "' + subject.encode() + b'", "op": "submit", "revision": NaN, "body": {}}',
    ]


AWKWARD_KINDS = len(_awkward("s"))


class SourceChecks:
    """Mixin: list it before :class:`~remora.testing.group_machine.GroupRunMachine`."""

    @rule(partition=st.integers(0, 7), kind=st.integers(0, AWKWARD_KINDS - 1))
    def append_awkward(self, partition: int, kind: int) -> None:
        p = partition % self.partitions  # type: ignore[attr-defined]
        offset = self._end(p)  # type: ignore[attr-defined]
        value = _awkward(f"p{p}-odd{offset}")[kind]
        self._write([SourceRecord(p, offset, True, None, value)], [0])  # type: ignore[attr-defined]

    def _accepted(self) -> set[int]:
        """Partitions whose identity an accepted change re-recorded: their first mark may
        since be any record this source holds as such (it moves only when it differs)."""
        accepted: set[int] | None = getattr(self, "_accepted_partitions", None)
        if accepted is None:
            accepted = set()
            self._accepted_partitions = accepted
        return accepted

    def _marks(self) -> dict[int, SourceIdentity]:
        """The identities the module documents for the source as written."""
        want = {}
        for p in range(self.partitions):  # type: ignore[attr-defined]
            visible = sorted(
                (r for r in self.source if r.partition == p and r.visible),  # type: ignore[attr-defined]
                key=lambda r: r.offset,
            )
            if not visible:
                continue
            frontier = self.store.backend.partition_row(p).frontier  # type: ignore[attr-defined]
            last = [r for r in visible if r.offset == frontier - 1]
            first = mark(visible[0])
            if p in self._accepted():
                recorded = self.store.backend.source_identities().get(p)  # type: ignore[attr-defined]
                held = {mark(r) for r in visible}
                if recorded is not None and recorded.first in held:
                    first = recorded.first
            want[p] = SourceIdentity(p, first, mark(last[0]) if last else None)
        return want

    def _copy(self, change: SourceRecord | None, drop: bool) -> Path:
        """The source as written, with ``change`` replacing (or, with ``drop``, removing)
        the record at its offset: every line in the plain encoding."""
        copy = Path(tempfile.mkdtemp(dir=self.dir.parent, prefix="remora-changed-"))  # type: ignore[attr-defined]
        for p in range(self.partitions):  # type: ignore[attr-defined]
            lines = []
            for r in sorted(self.source, key=lambda r: r.offset):  # type: ignore[attr-defined]
                if r.partition != p:
                    continue
                if change is not None and (r.partition, r.offset) == (
                    change.partition,
                    change.offset,
                ):
                    if drop:
                        continue
                    r = change
                lines.append(self._encode(r, 0)[0])  # type: ignore[attr-defined]
            (copy / f"partition-{p}.jsonl").write_text("".join(lines), newline="")
        return copy

    @rule(
        partition=st.integers(0, 7),
        which=st.sampled_from(["first", "last", "other"]),
        drop=st.booleans(),
        accept=st.booleans(),
    )
    def source_identity(self, partition: int, which: str, drop: bool, accept: bool) -> None:
        store = self.store  # type: ignore[attr-defined]
        said: list[str] = []
        log = load_source_dir(self.dir)  # type: ignore[attr-defined]
        record_source(store, log)
        check_source(store, log, accept=False, say=said.append)
        identities = store.backend.source_identities()
        assert identities == self._marks(), (identities, self._marks())

        p = partition % self.partitions  # type: ignore[attr-defined]
        frontier = store.backend.partition_row(p).frontier
        done = sorted(
            (r for r in self.source if r.partition == p and r.visible and r.offset < frontier),  # type: ignore[attr-defined]
            key=lambda r: r.offset,
        )
        if not done:
            return
        target = {"first": done[0], "last": done[-1], "other": done[len(done) // 2]}[which]
        changed = SourceRecord(p, target.offset, True, target.key, target.value + b" ")
        marked = {done[0].offset, frontier - 1}
        copy = self._copy(changed, drop)
        try:
            other = load_source_dir(copy)
            try:
                check_source(store, other, accept=accept, say=said.append)
            except SourceMismatch as exc:
                refused = True
                assert f"partition {p}:" in str(exc), exc
            else:
                refused = False
            assert refused == (target.offset in marked and not accept), (
                f"{which} record {target.offset} of partition {p} "
                f"{'dropped' if drop else 'altered'} (marks at {sorted(marked)}): "
                f"{'refused' if refused else 'accepted'} with accept={accept}"
            )
            if accept and target.offset in marked:
                assert any("source changed" in s for s in said), said
                if other.next_visible(p, 0) is not None:
                    check_source(store, other, accept=False, say=said.append)  # re-recorded
                else:
                    # nothing left in the partition to record: the store keeps its marks,
                    # so the emptied source is refused again without ``accept``
                    try:
                        check_source(store, other, accept=False, say=said.append)
                    except SourceMismatch:
                        pass
                    else:
                        raise AssertionError(f"partition {p} emptied: accepted without accept")
                check_source(store, log, accept=True, say=said.append)  # back to ours
                self._accepted().add(p)
            check_source(store, log, accept=False, say=said.append)
        finally:
            shutil.rmtree(copy, ignore_errors=True)


# The settings of the runs that show a group rule catching its planted bug (tests/stateful/
# test_group_checks.py, test_group_failure_checks.py): short, derandomized, no shrinking.
SHORT = settings(
    max_examples=80,
    stateful_step_count=12,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.generate],  # the failure is the point, not its shrinking
)
