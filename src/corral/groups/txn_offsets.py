"""Pending transactional offsets of one coordinator shard, as Kafka's OffsetMetadataManager keeps
them (`pendingTransactionalOffsets`, `openTransactions`, `replayEndTransactionMarker`).

A TxnOffsetCommit's offsets are written (storage/txn_records.py) and, once replayed, wait here per
producer id: OffsetFetch does not see them (RequireStable answers UNSTABLE_OFFSET_COMMIT for their
partitions), expiry leaves their partitions and their group alone. The producer's marker in the
shard's partition ends them: COMMIT moves each into the offset map unless a commit replayed after
it already replaced that partition's offset (Kafka compares record offsets; replay follows log
order, so a replay counter is the same order), ABORT drops them. An offset tombstone (OffsetDelete,
DeleteGroups, expiry) drops the pending offsets of its partition too.

While a group has pending offsets the network thread's commit path takes none of its commits
(`CoordinatorLog.hold_commits`): every plain commit of the group is replayed here first, which is
how a later plain commit wins over an older pending one.

Snapshots hold no pending offset: the shard's snapshot position never passes the first offset of
an open transaction in its partition (`first_open_offset`), so a restart replays the transaction's
records from the log and they are pending again until their marker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from corral import _core
from corral.groups.storage.records import PartitionCommit
from corral.groups.storage.txn_records import TxnMarker, TxnOffsetCommits
from corral.groups.storage.writer import CoordinatorLog

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class Pending:
    commit: PartitionCommit  # (partition, offset, leader epoch, metadata)
    commit_ms: int
    expire_ms: int
    order: int  # replay order, the record offset's stand-in
    replaced: bool = False  # a commit replayed after it set the partition's offset


class PendingOffsets:
    record_types = (TxnOffsetCommits, TxnMarker)

    def __init__(
        self,
        offset_map: _core.OffsetMap,
        log_: CoordinatorLog,
        new_group: Callable[[str], object],
        has_group: Callable[[str], bool],
    ):
        self.map = offset_map
        self.log = log_
        self._new_group = new_group
        self._has_group = has_group
        # producer id -> group -> (topic, partition) -> its pending offset
        self.by_producer: dict[int, dict[str, dict[TopicPartition, Pending]]] = {}
        # group -> (topic, partition) -> producer ids with a pending offset for it
        self.open: dict[str, dict[TopicPartition, set[int]]] = {}
        # producer id -> log offset of its first pending record in the shard's partition
        self.first_offset: dict[int, int] = {}
        self._order = 0

    # -- questions -------------------------------------------------------------------------------

    def unstable(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether the partition has an offset pending in an open transaction."""
        partitions = self.open.get(group_id)
        return partitions is not None and (topic, partition) in partitions

    def has_open(self, group_id: str) -> bool:
        return group_id in self.open

    def partitions(self, group_id: str) -> list[TopicPartition]:
        return list(self.open.get(group_id, ()))

    def first_open_offset(self) -> int | None:
        """Where the log holds the first record of a transaction still open in this shard."""
        known = [o for o in self.first_offset.values() if o >= 0]
        return min(known) if known else None

    # -- replay ----------------------------------------------------------------------------------

    def replay(self, record: TxnOffsetCommits | TxnMarker, loading: bool) -> None:
        if isinstance(record, TxnMarker):
            self.end_transaction(record.producer_id, record.commit)
        else:
            self.add(record)

    def add(self, record: TxnOffsetCommits) -> None:
        group_id, pid = record.group_id, record.producer_id
        if not self._has_group(group_id):
            self._new_group(group_id)  # as a plain commit, a "simple" classic group
        self._order += 1
        groups = self.by_producer.setdefault(pid, {})
        pending = groups.setdefault(group_id, {})
        if group_id not in self.open:
            self.log.hold_commits(group_id)
        open_ = self.open.setdefault(group_id, {})
        for topic, commits in record.topics:
            for commit in commits:
                key = (topic, commit[0])
                pending[key] = Pending(commit, record.commit_ms, record.expire_ms, self._order)
                open_.setdefault(key, set()).add(pid)
        if pid not in self.first_offset or self.first_offset[pid] < 0:
            self.first_offset[pid] = record.offset

    def committed(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """A plain commit of these partitions was replayed: it is newer than their pending
        offsets, which a COMMIT marker then leaves unapplied."""
        open_ = self.open.get(group_id)
        if open_ is None:
            return
        for key in partitions:
            for pid in open_.get(key, ()):
                self.by_producer[pid][group_id][key].replaced = True

    def deleted(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Offset tombstones drop the partitions' pending offsets too."""
        open_ = self.open.get(group_id)
        if open_ is None:
            return
        for key in partitions:
            for pid in open_.pop(key, ()):
                groups = self.by_producer[pid]
                groups[group_id].pop(key, None)
                if not groups[group_id]:
                    del groups[group_id]
                if not groups:
                    self._producer_done(pid)
        if not open_:
            self._close_group(group_id)

    def end_transaction(self, pid: int, commit: bool) -> None:
        """The marker of `pid`'s transaction: its pending offsets are committed or dropped."""
        groups = self.by_producer.pop(pid, {})
        self.first_offset.pop(pid, None)
        for group_id, pending in groups.items():
            open_ = self.open[group_id]
            for key, entry in pending.items():
                others = open_[key]
                others.discard(pid)
                if commit and not entry.replaced:
                    topic, _ = key
                    self.map.commit(
                        group_id, topic, [entry.commit], entry.commit_ms, entry.expire_ms
                    )
                    # Older pending offsets of other producers lose to this one.
                    for other in others:
                        older = self.by_producer[other][group_id][key]
                        if older.order < entry.order:
                            older.replaced = True
                if not others:
                    del open_[key]
            if not open_:
                self._close_group(group_id)

    def clear(self) -> None:
        """The shard unloads: everything pending goes (its load reads it from the log again)."""
        for group_id in self.open:
            self.log.release_commits(group_id)
        self.open.clear()
        self.by_producer.clear()
        self.first_offset.clear()

    def _producer_done(self, pid: int) -> None:
        del self.by_producer[pid]
        self.first_offset.pop(pid, None)

    def _close_group(self, group_id: str) -> None:
        del self.open[group_id]
        self.log.release_commits(group_id)
