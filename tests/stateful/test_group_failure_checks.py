"""The group machine's worker-failure, schedule, source-layout, source-read, legacy-store
and domain rules (:mod:`tests.stateful.group_failures`, :mod:`tests.stateful.source_checks`)
shown catching planted bugs: each patch breaks one production function only inside the
test, and the machine (the suite's ``GroupRunChecked``) must fail."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any
from unittest import mock

import attrs
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import remora.worker.source_identity as identity
from remora.domain import SourceRecord
from remora.domain.fold import Quarantined
from remora.domain.records import QuarantineEntry, QuarantineReason, SubjectState
from remora.source.cursor import FetchCursors
from remora.source.log import MemorySourceLog
from remora.testing.group_machine import GroupRunMachine
from remora.worker.group import Coordinator, GroupClient
from remora.worker.source_identity import check_source
from tests.stateful.group_checks import SHORT as GROUP_SHORT
from tests.stateful.group_failures import GroupFailureChecks
from tests.stateful.source_checks import (
    DomainChecks,
    LegacyStoreCheck,
    SourceLayoutChecks,
    SourceReadChecks,
)

SHORT = settings(GROUP_SHORT, max_examples=60)


def _keep_excluded(self: Coordinator, partition: int) -> None:
    """A stopped partition stays in the assignment (handed to the fresh lifetime)."""


def _never_lost(self: Any) -> bool:
    """A takeover by another worker reported as a failure."""
    return False


def _no_rotation(self: Coordinator, member: int) -> list[int]:
    """Shares that never rotate with the generation."""
    members = sorted(self._live)
    if member not in members:
        return []
    return [
        p
        for i, p in enumerate(self.partitions)
        if members[i % len(members)] == member and p not in self.excluded
    ]


def _revoke_silently(self: GroupClient) -> None:
    """A rebalance that forgets to revoke the lifetime's assignment (no barrier)."""
    self.partitions = []
    self.cursors.clear()


def _late_rebalance(self: Coordinator, records: int) -> None:
    """A rebalance one record later than ``rebalance_every`` (``>`` for ``>=``)."""
    with self._cond:
        self._since += records
        if self.rebalance_every and self._since > self.rebalance_every:
            self._next_generation()
            self.rebalances += 1


def _no_digit_limit(name: str) -> Any:
    import re

    return re.match(r"^partition-([0-9]+)\.jsonl$", name)


def _fill_first(self: FetchCursors, partitions: Sequence[int], max_records: int) -> list[Any]:
    """Not round robin: each partition drained before the next."""
    out: list[Any] = []
    for partition in partitions:
        if self.position(partition) is None:
            continue
        while len(out) < max_records and (record := self.fetch(partition)) is not None:
            out.append(record)
    return out


def _end_at_last(self: MemorySourceLog, partition: int) -> int:
    """``end`` one short: the last offset instead of one past it."""
    offsets = self._offsets.get(partition, [])
    return offsets[-1] if offsets else 0


def _skip_invisible_wrongly(self: MemorySourceLog, partition: int, position: int) -> Any:
    """``next_visible`` that starts one record late when ``position`` is an exact offset."""
    recs = self._records.get(partition, [])
    i = bisect.bisect_right(self._offsets.get(partition, []), position)
    while i < len(recs):
        if recs[i].visible:
            return recs[i]
        i += 1
    return None


def _quarantine_at_revision_one(
    record: SourceRecord,
    subject: str | None,
    current: SubjectState | None,
    reason: QuarantineReason,
    detail: str,
) -> Quarantined:
    """The blocked state of a subject never seen before starts at revision 1."""
    blocked = None
    if subject is not None:
        base = current or SubjectState(subject=subject, revision=1, status="absent", blocked=False)
        blocked = attrs.evolve(base, blocked=True)
    entry = QuarantineEntry(record.partition, record.offset, subject, reason, detail)
    return Quarantined(entry=entry, subject=blocked)


def _numbers_without_intent(decision: Any) -> list[tuple[str, int]]:
    """The range check forgets the intent's version."""
    out: list[tuple[str, int]] = []
    if hasattr(decision, "intent"):
        out.append(("version", decision.entry.version))
    if decision.subject is not None:
        out.append(("revision", decision.subject.revision))
    return out


def _texts_without_detail(decision: Any) -> list[tuple[str, str | None]]:
    """The storable check forgets a quarantine's detail."""
    e = decision.entry
    out: list[tuple[str, str | None]] = [("subject", e.subject)]
    if hasattr(decision, "intent"):
        out += [("op", e.op), ("body", e.body)]
        if decision.intent is not None:
            out += [("intent subject", decision.intent.subject)]
            out += [("intent body", decision.intent.body)]
    if decision.subject is not None:
        out += [("state subject", decision.subject.subject), ("state body", decision.subject.body)]
    return out


def _silent_legacy(store: Any, log: Any, **kwargs: Any) -> None:
    """check_source that does not tell about a store made before sources were recorded."""
    kwargs["say"] = lambda _line: None
    check_source(store, log, **kwargs)


class Failures(GroupFailureChecks, GroupRunMachine):
    """The rules under test only (the suite's machine mixes them all in, each run less often)."""


class Layouts(SourceLayoutChecks, GroupRunMachine):
    pass


class Reads(SourceReadChecks, GroupRunMachine):
    pass


class Legacy(LegacyStoreCheck, GroupRunMachine):
    pass


class Domain(DomainChecks, GroupRunMachine):
    pass


def _rerecord_always(store: Any, log: Any, partitions: Any = None) -> None:
    """record_source that re-records every identity from the log, marks at the frontier
    or not (so a changed first record moves the first mark)."""
    mine = set(log.partitions if partitions is None else partitions)
    for summary in store.backend.partition_summaries():
        if summary.frontier and summary.partition in mine:
            current = identity._identity(log, summary.partition, summary.frontier)
            if current is not None:
                store.backend.record_source_identity(current)


def _keep_open(self: Any) -> None:
    """``close`` that leaves the partition file open."""


PLANTED: list[tuple[str, Any, type[GroupRunMachine]]] = [
    ("remora.worker.group.Coordinator.exclude", _keep_excluded, Failures),
    ("remora.worker.group.PartitionFailure.lost", property(_never_lost), Failures),
    ("remora.worker.group.Coordinator._assignment", _no_rotation, Failures),
    ("remora.worker.group.Coordinator.progress", _late_rebalance, Failures),
    ("remora.worker.group.GroupClient._revoke", _revoke_silently, Failures),
    ("remora.source.files.MAX_PARTITION", 2**40, Layouts),
    ("remora.source.cursor.FetchCursors.fetch_round_robin", _fill_first, Reads),
    ("remora.source.log.MemorySourceLog.end", _end_at_last, Reads),
    ("remora.source.files._PartitionFile.close", _keep_open, Reads),
    ("remora.source.log.MemorySourceLog.next_visible", _skip_invisible_wrongly, Reads),
    ("tests.stateful.source_checks.check_source", _silent_legacy, Legacy),
    ("tests.stateful.source_checks.record_source", _rerecord_always, Legacy),
    ("remora.domain.fold._quarantine", _quarantine_at_revision_one, Domain),
    ("remora.domain.processing._numbers", _numbers_without_intent, Domain),
    ("remora.domain.processing._texts", _texts_without_detail, Domain),
]


@pytest.mark.parametrize(
    ("target", "bug", "machine"),
    PLANTED,
    ids=[t.rsplit(".", 2)[-2] + "." + t.rsplit(".", 1)[1] for t, _, _ in PLANTED],
)
def test_the_group_machine_catches(target: str, bug: Any, machine: type[GroupRunMachine]) -> None:
    with mock.patch(target, bug), pytest.raises(AssertionError):
        run_state_machine_as_test(machine, settings=SHORT)


@pytest.mark.parametrize("machine", [Failures, Layouts, Reads, Legacy, Domain])
def test_the_rules_pass_unpatched(machine: type[GroupRunMachine]) -> None:
    run_state_machine_as_test(machine, settings=SHORT)
