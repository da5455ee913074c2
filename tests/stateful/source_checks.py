"""Source-directory, source-read and domain rules for
:class:`~remora.testing.group_machine.GroupRunMachine` (mixins).

* :meth:`SourceLayoutChecks.layout` — a copy of the machine's source directory (real files
  in a temporary directory) with its layout broken one way (a missing directory, a file in
  its place, no partition file, a stray ``partition-*`` name, a number too large or too
  long, two names for one partition, a directory named like a partition file, bytes that
  are not UTF-8) must be refused by both readers with :class:`~remora.errors.InvalidInput`
  naming what is wrong; a harmless variant (other files beside the partition files, the
  largest partition number, ten digits) must read back the records written.  Nothing
  already written changes: the store's snapshot is the same before and after, and the
  machine's own directory still reads back the records.
* :meth:`SourceLayoutChecks.vanished` — a partition file deleted, or rewritten with a bad
  line, *after* :func:`~remora.source.open_source_dir` validated it, under a running group:
  the group ends with exactly one error naming the file (an error no partition owns ends the
  whole group), nothing held, and the store still passes the oracle.
* :meth:`SourceReadChecks.source_reads` — both readers and :class:`FetchCursors` against a
  model computed from the records written: ``partitions``, ``end``, ``next_visible`` at
  positions forwards and back, an unknown partition, ``validate``, duplicate offsets, and a
  round-robin fetch from seeked and unseeked partitions.
* :meth:`SourceReadChecks.legacy_store` — a store whose records were processed before Remora
  recorded sources (no identity): :func:`~remora.worker.source_identity.check_source` says so
  for exactly the partitions with a frontier, records the documented marks (first visible
  record, the one below the frontier) only for the partitions it was asked about, and
  :func:`~remora.worker.source_identity.record_source` then moves only those partitions'
  last marks.
* :meth:`DomainChecks.fold_model` — :func:`~remora.domain.fold.decide` for the machine's
  records against an independent statement of the fold's rules (``docs/fold.md``), for a
  subject absent, live, withdrawn or blocked.
* :meth:`DomainChecks.custom_processing` — a :class:`~remora.domain.Processing` whose
  decision holds unstorable text or an out-of-range number in one field becomes a
  ``malformed`` quarantine naming that field; a decision for another record, seq or subject
  is refused; the range's ends are accepted; a negative partition or offset is refused.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import rule

from remora.clock import LogicalClock
from remora.context import Context
from remora.domain import SourceRecord
from remora.domain.amendment import Malformed, parse_amendment
from remora.domain.fold import Applied, Quarantined, decide
from remora.domain.processing import Processing
from remora.domain.records import Intent, OutboxEntry, QuarantineEntry, SubjectState
from remora.domain.storable import MAX_VERSION, UNSTORABLE
from remora.errors import InvalidInput, RemoraError, SourceError, Unseeked
from remora.limits import MAX_PARTITION
from remora.source.cursor import FetchCursors
from remora.source.files import (
    INDEX_EVERY,
    PartitionSourceError,
    load_source_dir,
    open_source_dir,
)
from remora.source.log import MemorySourceLog
from remora.store import MemoryStore
from remora.store.identity import SourceIdentity, mark
from remora.worker import Lifecycle
from remora.worker.group import WorkerGroup
from remora.worker.source_identity import check_source, record_source

LAYOUTS = (
    "missing",
    "a-file",
    "no-partitions",
    "suffix",
    "not-digits",
    "too-large",
    "eleven-digits",
    "many-strays",
    "two-names",
    "a-directory",
    "not-utf8",
    "beside",
    "largest",
    "ten-digits",
    "long",
)


def _expect_refused(path: Path, fragments: list[str]) -> None:
    for reader in (load_source_dir, open_source_dir):
        try:
            log = reader(path)
        except InvalidInput as exc:
            for fragment in fragments:
                assert fragment in str(exc), f"{reader.__name__}: {exc} (wanted {fragment!r})"
        else:
            if hasattr(log, "close"):
                log.close()
            raise AssertionError(f"{reader.__name__} accepted {path} (wanted {fragments})")


class SourceLayoutChecks:
    """Mixin: list it before :class:`~remora.testing.group_machine.GroupRunMachine`."""

    @rule(kind=st.sampled_from(LAYOUTS), partition=st.integers(0, 7))
    def layout(self, kind: str, partition: int) -> None:
        machine: Any = self
        n = machine.partitions
        p = partition % n
        before = machine.store.backend.snapshot()
        base = Path(tempfile.mkdtemp(dir=machine.dir.parent, prefix="remora-layout-"))
        copy = base / "source"
        shutil.copytree(machine.dir, copy)
        try:
            name = f"partition-{p}.jsonl"
            if kind == "missing":
                _expect_refused(base / "absent", ["absent: not a directory"])
            elif kind == "a-file":
                _expect_refused(copy / name, [f"{name}: not a directory"])
            elif kind == "no-partitions":
                for q in range(n):
                    (copy / f"partition-{q}.jsonl").rename(copy / f"part-{q}.jsonl")
                _expect_refused(copy, ["no partition-<N>.jsonl files"])
            elif kind in ("suffix", "not-digits", "too-large", "eleven-digits"):
                stray = {
                    "suffix": f"partition-{p}.json",
                    "not-digits": "partition-x.jsonl",
                    "too-large": f"partition-{MAX_PARTITION + 1}.jsonl",
                    "eleven-digits": f"partition-{p:011d}.jsonl",
                }[kind]
                (copy / stray).write_text("")
                _expect_refused(copy, [stray, ": not a partition file name", "rename or move"])
            elif kind == "many-strays":
                for i in range(7):
                    (copy / f"partition-s{i}.jsonl").write_text("")
                _expect_refused(copy, ["'partition-s0.jsonl', ", "'partition-s4.jsonl' and 2 more"])
            elif kind == "two-names":
                other = f"partition-0{p}.jsonl"
                shutil.copy(copy / name, copy / other)
                first, second = sorted([name, other])
                _expect_refused(copy, [f"{first} and {second} are both partition {p}"])
            elif kind == "a-directory":
                (copy / f"partition-{n}.jsonl").mkdir()
                _expect_refused(copy, [f"partition-{n}.jsonl: not a regular file"])
            elif kind == "not-utf8":
                lines = (copy / name).read_bytes().count(b"\n")
                with (copy / name).open("ab") as f:
                    f.write(b'{"offset": 999999, "value": "\xff\xfe"}\n')
                _expect_refused(copy, [f"{name}:{lines + 1}: cannot read (not UTF-8"])
            elif kind == "long":
                self._long_file(copy, n, p)
            else:
                extra = {
                    "beside": None,
                    "largest": MAX_PARTITION,
                    "ten-digits": n,
                }[kind]
                (copy / "README.md").write_text("not a partition\n")
                (copy / "records.jsonl").write_text("{not json\n")
                if extra is not None:
                    digits = f"{extra:010d}" if kind == "ten-digits" else str(extra)
                    (copy / f"partition-{digits}.jsonl").write_text("")
                want = tuple(range(n)) + (() if extra is None else (extra,))
                loaded = load_source_dir(copy)
                assert loaded.partitions == want, (kind, loaded.partitions, want)
                written = sorted(machine.source, key=lambda r: (r.partition, r.offset))
                assert loaded.all_records() == written, kind
                with open_source_dir(copy) as log:
                    assert log.partitions == want, (kind, log.partitions)
                    if extra is not None:
                        assert log.end(extra) == 0 and log.next_visible(extra, 0) is None
        finally:
            shutil.rmtree(base, ignore_errors=True)
        assert machine.store.backend.snapshot() == before, "a refused source changed the store"
        assert load_source_dir(machine.dir).all_records() == sorted(
            machine.source, key=lambda r: (r.partition, r.offset)
        )

    def _long_file(self, copy: Path, n: int, step: int) -> None:
        """A partition file longer than the reader's index spacing: reads forwards and back
        (a seek back starts at the last indexed line at or before the position)."""
        records = [
            SourceRecord(n, 2 * i + (i > 1500), i % 7 != step % 7, None, b"v%d" % i)
            for i in range(2 * INDEX_EVERY + 100)
        ]
        lines = [
            f'{{"offset": {r.offset}, "visible": {"true" if r.visible else "false"}, '
            f'"value": "{r.value.decode()}"}}\n'
            for r in records
        ]
        (copy / f"partition-{n}.jsonl").write_text("".join(lines))
        last = records[-1].offset
        with open_source_dir(copy) as log:
            assert log.end(n) == last + 1, (log.end(n), last)
            for position in (
                last - 3,
                7,
                2 * INDEX_EVERY + 5,
                2 * INDEX_EVERY - 1,
                INDEX_EVERY * 2 + 3,
                0,
                last + 1,
                3001,
                3000,
                2 * (INDEX_EVERY - 1),
                5,
                last,
            ):
                want = next((r for r in records if r.offset >= position and r.visible), None)
                got = log.next_visible(n, position)
                assert got == want, (position, got, want)

    @rule(
        garble=st.booleans(),
        partition=st.integers(0, 7),
        workers=st.integers(1, 3),
        batch=st.integers(1, 6),
    )
    def vanished(self, garble: bool, partition: int, workers: int, batch: int) -> None:
        machine: Any = self
        p = partition % machine.partitions
        base = Path(tempfile.mkdtemp(dir=machine.dir.parent, prefix="remora-vanish-"))
        copy = base / "source"
        shutil.copytree(machine.dir, copy)
        start = {
            q: machine.store.backend.partition_row(q).frontier for q in range(machine.partitions)
        }
        try:
            log = open_source_dir(copy)
            file = copy / f"partition-{p}.jsonl"
            if garble:
                file.write_text('{"offset": 0, "value": "x", "oops": 1}\n')
            else:
                file.unlink()
            group = WorkerGroup(machine.store, log, workers, rebalance_every=2, batch=batch)
            stats = group.run(interval=0.01)
            log.close()
        finally:
            shutil.rmtree(base, ignore_errors=True)
        machine._check_store()
        for runner in group.runners:
            assert runner.lifecycle.owned() == {}, runner.lifecycle.owned()
        # Only the unreadable partition stops (issue 25: before, the whole group did).
        assert stats.errors == [] and stats.lost == [], stats
        assert [f.partition for f in stats.failures] == [p], stats
        error = stats.failures[0].error
        assert isinstance(error, PartitionSourceError), error
        if garble:
            assert f"partition-{p}.jsonl:1 (byte 0): unknown field(s) 'oops'" in str(error)
        else:
            assert f"partition-{p}.jsonl: cannot read" in str(error), error
        assert stats.done and not stats.stopped, stats
        for q in range(machine.partitions):
            frontier = machine.store.backend.partition_row(q).frontier
            assert frontier >= start[q], f"partition {q}: frontier {start[q]} -> {frontier}"
        assert machine.store.backend.partition_row(p).frontier == start[p]


class SourceReadChecks:
    """Mixin: list it before :class:`~remora.testing.group_machine.GroupRunMachine`."""

    @rule(
        positions=st.lists(st.integers(0, 24), min_size=1, max_size=8),
        seeks=st.lists(st.one_of(st.integers(0, 4), st.none()), min_size=2, max_size=4),
        max_records=st.integers(1, 9),
        files=st.booleans(),
    )
    def source_reads(
        self, positions: list[int], seeks: list[int | None], max_records: int, files: bool
    ) -> None:
        machine: Any = self
        n = machine.partitions
        model: dict[int, list[SourceRecord]] = {
            q: sorted((r for r in machine.source if r.partition == q), key=lambda r: r.offset)
            for q in range(n)
        }

        def want_next(q: int, position: int) -> SourceRecord | None:
            return next((r for r in model.get(q, []) if r.offset >= position and r.visible), None)

        fds = Path("/proc/self/fd")
        opened = len(list(fds.iterdir())) if fds.is_dir() else None
        log: Any = open_source_dir(machine.dir) if files else load_source_dir(machine.dir)
        try:
            assert log.partitions == tuple(range(n)), log.partitions
            for q in range(n):
                end = model[q][-1].offset + 1 if model[q] else 0
                assert log.end(q) == end, (q, log.end(q), end)
                for position in positions:
                    got = log.next_visible(q, position)
                    assert got == want_next(q, position), (files, q, position, got)
            assert log.next_visible(n, 0) is None and log.end(n) == 0
            ctx = Context(LogicalClock())
            log.validate(n - 1, ctx)
            try:
                log.validate(n, ctx)
            except SourceError as exc:
                assert f"source has no partition {n}" in str(exc), exc
            else:
                raise AssertionError(f"validate accepted the missing partition {n}")
            if not files:
                for q in range(n):
                    assert list(log.records(q)) == model[q]
                assert list(log.records(n)) == []

            # fetch cursors: round robin over the seeked partitions, in the given order
            cursors = FetchCursors(log)
            order = list(range(n))
            at: dict[int, int] = {}
            for q, seek in zip(order, seeks, strict=False):
                if seek is not None:
                    cursors.seek(q, seek)
                    at[q] = seek
            for q in order:
                assert cursors.position(q) == at.get(q), (q, cursors.position(q), at)
            for round_ in range(2):
                want: list[SourceRecord] = []
                moving = True
                while len(want) < max_records and moving:
                    moving = False
                    for q in order:
                        if q not in at:
                            continue
                        record = want_next(q, at[q])
                        if record is not None:
                            want.append(record)
                            at[q] = record.offset + 1
                            moving = True
                            if len(want) >= max_records:
                                break
                got = cursors.fetch_round_robin(order, max_records)
                assert got == want, (round_, got, want)
            for q in order:
                if q not in at:
                    try:
                        cursors.fetch(q)
                    except Unseeked as exc:
                        assert f"partition {q} was not seeked" in str(exc)
                    else:
                        raise AssertionError(f"fetch from unseeked partition {q}")
            cursors.clear()
            assert all(cursors.position(q) is None for q in order)
        finally:
            if files:
                log.close()
        if files:  # closed: no file left open; a read after close reopens the file
            if opened is not None:
                assert len(list(fds.iterdir())) == opened, "close() left files open"
            for q in range(n):
                assert log.next_visible(q, 0) == want_next(q, 0)
            with log:
                pass
            if opened is not None:
                assert len(list(fds.iterdir())) == opened, "leaving with left files open"

        records = [r for rs in model.values() for r in rs]
        extra = MemorySourceLog(records, [n + 1])
        assert extra.partitions == (*range(n), n + 1)
        assert extra.end(n + 1) == 0 and extra.all_records() == [
            r for q in range(n) for r in model[q]
        ]
        if records:
            try:
                MemorySourceLog([*records, records[0]])
            except InvalidInput as exc:
                assert f"partition {records[0].partition} has duplicate offsets" in str(exc)
            else:
                raise AssertionError("duplicate offsets were accepted")


def _process(lifecycle: Lifecycle, records: list[SourceRecord]) -> None:
    if records:
        q = records[0].partition
        lifecycle.assign([q])
        lifecycle.seek(q)
        for record in records:
            lifecycle.process(q, record)


class LegacyStoreCheck:
    """Mixin: list it before :class:`~remora.testing.group_machine.GroupRunMachine`."""

    @rule(cuts=st.lists(st.integers(0, 4), min_size=1, max_size=4), subset=st.booleans())
    def legacy_store(self, cuts: list[int], subset: bool) -> None:
        machine: Any = self
        n = machine.partitions
        log = load_source_dir(machine.dir)
        visible = {
            q: sorted(
                (r for r in machine.source if r.partition == q and r.visible),
                key=lambda r: r.offset,
            )
            for q in range(n)
        }
        cut = {q: cuts[q % len(cuts)] for q in range(n)}
        store = MemoryStore()
        try:
            lifecycle = Lifecycle(store, log, name="legacy")
            for q in range(n):
                _process(lifecycle, visible[q][: cut[q]])
            lifecycle.revoke()
            asked = [n - 1] if subset else list(range(n))
            said: list[str] = []
            check_source(
                store, log, accept=False, say=said.append, partitions=asked if subset else None
            )

            def marks(q: int, done: int) -> SourceIdentity | None:
                if not visible[q]:
                    return None
                last = mark(visible[q][done - 1]) if done else None
                return SourceIdentity(q, mark(visible[q][0]), last)

            want = {q: marks(q, min(cut[q], len(visible[q]))) for q in asked}
            assert store.backend.source_identities() == {
                q: m for q, m in want.items() if m is not None
            }, (store.backend.source_identities(), want)
            for q in range(n):
                frontier = store.backend.partition_row(q).frontier
                told = [s for s in said if s.startswith(f"partition {q}: ")]
                if q in asked and frontier > 0:
                    assert told and f"(frontier {frontier}) has no record of its source" in told[0]
                else:
                    assert not told, told
            # a run goes on: record_source moves only the asked partitions' last marks
            lifecycle = Lifecycle(store, log, name="legacy-2")
            for q in range(n):
                _process(lifecycle, visible[q][cut[q] : cut[q] + 1])
            lifecycle.revoke()
            want = {q: marks(q, min(cut[q] + 1, len(visible[q]))) for q in asked}
            if not subset:  # a run that ended before record_source: check_source adds the
                # last mark where only the first was recorded (and moves nothing else)
                check_source(store, log, accept=False, say=said.append)
                for q in asked:
                    got = store.backend.source_identities().get(q)
                    if cut[q] == 0 and want[q] is not None:
                        assert got == want[q], (q, got, want[q])
            record_source(store, log, partitions=asked if subset else None)
            assert store.backend.source_identities() == {
                q: m for q, m in want.items() if m is not None
            }, (store.backend.source_identities(), want)
            check_source(store, log, accept=False, say=said.append, partitions=asked)
            # last marks already at the frontiers: record_source has nothing to move, even
            # given a source whose first records differ
            recorded = store.backend.source_identities()
            altered = [
                attrs.evolve(r, value=r.value + b" ") if r is visible[r.partition][0] else r
                for q in range(n)
                for r in sorted(
                    (r for r in machine.source if r.partition == q), key=lambda r: r.offset
                )
                if visible[q]
            ]
            record_source(
                store, MemorySourceLog(altered, range(n)), partitions=asked if subset else None
            )
            assert store.backend.source_identities() == recorded, "record_source moved marks"
        finally:
            store.close()


def _model_decision(
    record: SourceRecord, current: SubjectState | None, seq: int
) -> tuple[str, SubjectState | None, int | None]:
    """The fold's rules (``docs/fold.md``), stated independently: the kind of decision
    (``applied`` or the quarantine reason), the subject's new state, and the intent's
    revision (None: no intent)."""
    parsed = parse_amendment(record.value)
    subject = parsed.subject

    def blocked(reason: str) -> tuple[str, SubjectState | None, int | None]:
        if subject is None:
            return reason, None, None
        if current is None:
            return reason, SubjectState(subject, 0, "absent", True), None
        return reason, attrs.evolve(current, blocked=True), None

    if current is not None and current.blocked:
        return blocked("blocked")
    if isinstance(parsed, Malformed):
        return blocked("malformed")
    status = "absent" if current is None else current.status
    revision = 0 if current is None else current.revision
    allowed = {"absent": ("submit",), "live": ("correct", "withdraw"), "withdrawn": ()}[status]
    assert subject is not None
    if parsed.op not in allowed:
        return blocked("rejected")
    if parsed.revision != revision + 1:
        return blocked("conflict")
    if parsed.op == "withdraw":
        return (
            "applied",
            SubjectState(subject, parsed.revision, "withdrawn", False, parsed.body),
            None,
        )
    state = SubjectState(subject, parsed.revision, "live", False, parsed.body)
    return "applied", state, parsed.revision


def _deciding(decision: Any) -> Processing:
    """A processing that decides ``decision`` for every record."""
    return Processing(lambda r: "s", lambda r, c, n: decision)


_STATES = ("absent", "live", "withdrawn", "blocked")


class DomainChecks:
    """Mixin: list it before :class:`~remora.testing.group_machine.GroupRunMachine`."""

    @rule(state=st.sampled_from(_STATES), revision=st.integers(0, 3), seq=st.integers(1, 9))
    def fold_model(self, state: str, revision: int, seq: int) -> None:
        machine: Any = self
        for record in machine.source:
            if not record.visible:
                try:
                    decide(record, parse_amendment(record.value), None, seq)
                except InvalidInput as exc:
                    assert "invisible" in str(exc), exc
                else:
                    raise AssertionError(f"an invisible record was decided: {record}")
                continue
            parsed = parse_amendment(record.value)
            current: SubjectState | None = None
            if parsed.subject is not None and state != "absent":
                current = SubjectState(
                    parsed.subject,
                    revision,
                    "withdrawn" if state == "withdrawn" else "live",
                    state == "blocked",
                    "{}",
                )
                try:
                    decide(
                        record, parsed, attrs.evolve(current, subject=current.subject + "!"), seq
                    )
                except InvalidInput as exc:
                    assert "does not belong" in str(exc), exc
                else:
                    raise AssertionError("another subject's state was accepted")
            kind, new_state, intent = _model_decision(record, current, seq)
            got = decide(record, parsed, current, seq)
            where = f"{record} from {current}"
            if kind == "applied":
                assert isinstance(got, Applied), (where, got)
                assert isinstance(parsed, Malformed) is False and new_state is not None
                assert got.subject == new_state, (where, got.subject, new_state)
                assert got.entry == OutboxEntry(
                    record.partition,
                    seq,
                    new_state.subject,
                    parsed.revision,  # type: ignore[union-attr]
                    parsed.op,  # type: ignore[union-attr]
                    parsed.body,  # type: ignore[union-attr]
                    record.offset,
                ), (where, got.entry)
                want_intent = (
                    None
                    if intent is None
                    else Intent(record.partition, new_state.subject, intent, parsed.body)  # type: ignore[union-attr]
                )
                assert got.intent == want_intent, (where, got.intent, want_intent)
            else:
                assert isinstance(got, Quarantined), (where, got)
                assert got.entry.reason == kind, (where, got.entry.reason, kind)
                assert (got.entry.partition, got.entry.offset) == (record.partition, record.offset)
                assert got.entry.subject == parsed.subject, (where, got.entry)
                assert got.subject == new_state, (where, got.subject, new_state)

    @rule(applied=st.booleans(), seq=st.integers(1, 5))
    def custom_processing(self, applied: bool, seq: int) -> None:
        machine: Any = self
        record = next(
            (r for r in machine.source if r.visible), SourceRecord(0, 3, True, None, b"x")
        )
        p, off = record.partition, record.offset
        state = SubjectState("s", 1, "live", False, "{}")
        decision: Any
        if applied:
            decision = Applied(
                OutboxEntry(p, seq, "s", 1, "submit", "{}", off),
                state,
                Intent(p, "s", 1, "{}"),
            )
            withdrawn = Applied(
                OutboxEntry(p, seq, "s", 2, "withdraw", "{}", off),
                attrs.evolve(state, revision=2, status="withdrawn"),
                None,
            )
            assert _deciding(withdrawn).apply(record, None, seq) == withdrawn
        else:
            decision = Quarantined(
                QuarantineEntry(p, off, "s", "conflict", "d"), attrs.evolve(state, blocked=True)
            )
            bare = Quarantined(QuarantineEntry(p, off, None, "malformed", "d"), None)
            assert _deciding(bare).apply(record, None, seq) == bare
        texts = [("subject", "entry", "subject")]
        if applied:
            texts += [("op", "entry", "op"), ("body", "entry", "body")]
            texts += [("intent subject", "intent", "subject"), ("intent body", "intent", "body")]
        else:
            texts += [("detail", "entry", "detail")]
        texts += [("state subject", "subject", "subject"), ("state body", "subject", "body")]
        numbers = (
            [("version", "entry", "version"), ("intent version", "intent", "version")]
            if applied
            else []
        ) + [("revision", "subject", "revision")]
        for name, part, attr in texts:
            for bad in ("\x00", "\ud800", "ok"):
                self._one_field(record, decision, applied, (name, part, attr), "a" + bad, seq)
        for name, part, attr in numbers:
            for number in (-1, 0, 1, MAX_VERSION, MAX_VERSION + 1):
                self._one_field(record, decision, applied, (name, part, attr), number, seq)
        # decisions for another record or seq are refused before anything is written
        wrong = [
            (attrs.evolve(decision, entry=attrs.evolve(decision.entry, offset=off + 1)), "offset"),
            (
                attrs.evolve(decision, entry=attrs.evolve(decision.entry, partition=p + 1)),
                "partition",
            ),
        ]
        if applied:
            wrong.append(
                (attrs.evolve(decision, entry=attrs.evolve(decision.entry, seq=seq + 1)), "seq")
            )
        else:
            other = attrs.evolve(decision, subject=attrs.evolve(state, subject="t"))
            assert (
                Processing(lambda r: "s", lambda r, c, n: other).apply(record, None, seq) == other
            )
        for bad_decision, _what in wrong:
            self._refused(
                _deciding(bad_decision),
                record,
                seq,
                "processing " if _what != "seq" else "outbox seq",
            )
        for bad_offset in ((-1, 0), (0, -1)):
            try:
                SourceRecord(bad_offset[0], bad_offset[1], True, None, b"")
            except InvalidInput as exc:
                assert "must be >= 0, got -1" in str(exc), exc
            else:
                raise AssertionError(f"a record at {bad_offset} was made")
        assert SourceRecord(0, 0, True, None, b"").offset == 0

    def _one_field(
        self,
        record: SourceRecord,
        decision: Any,
        applied: bool,
        field: tuple[str, str, str],
        value: Any,
        seq: int,
    ) -> None:
        """``decision`` with one field set to ``value``, through a custom processing."""
        name, part, attr = field
        changed = attrs.evolve(getattr(decision, part), **{attr: value})
        if name == "state subject" and applied:  # another subject: refused
            self._refused(
                _deciding(attrs.evolve(decision, subject=changed)),
                record,
                seq,
                "applied one subject and stored another",
            )
            return
        if name == "subject" and applied:  # keep the state's subject the entry's
            state = attrs.evolve(decision.subject, subject=value)
            variant = attrs.evolve(decision, entry=changed, subject=state)
        else:
            variant = attrs.evolve(decision, **{part: changed})
        got = _deciding(variant).apply(record, None, seq)
        if isinstance(value, str) and value != "aok":
            detail = f"the decision's {name} holds {UNSTORABLE}"
        elif isinstance(value, int) and not 0 <= value <= MAX_VERSION:
            detail = f"the decision's {name} is outside 0..{MAX_VERSION}"
        else:
            assert got == variant, (name, value, got)
            return
        want = Quarantined(
            QuarantineEntry(record.partition, record.offset, None, "malformed", detail), None
        )
        assert got == want, (name, value, got)

    def _refused(self, processing: Any, record: SourceRecord, seq: int, fragment: str) -> None:
        try:
            processing.apply(record, None, seq)
        except InvalidInput as exc:
            assert fragment in str(exc), exc
        except RemoraError:
            raise
        else:
            raise AssertionError(f"a decision that does not belong was accepted ({fragment})")
