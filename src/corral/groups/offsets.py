"""Committed offsets: commit, fetch, delete and expiry, for every group type. Owns the offset map
(`corral._core.OffsetMap`, one per process: each shard's `Offsets` reads and writes its own
groups' entries).

Decisions ask the group through the `Group` interface (group.py) and write records; the map
changes only in `replay_*`, once those records are durable (or when they are loaded).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from corral import _core
from corral.errors import ErrorCode
from corral.groups.group import Group
from corral.groups.metrics import GroupMetrics
from corral.groups.storage.records import OffsetCommits, OffsetTombstones, PartitionCommit
from corral.groups.storage.txn_records import TxnOffsetCommits
from corral.groups.storage.writer import CoordinatorLog
from corral.groups.txn_offsets import PendingOffsets
from corral.later import Later, first_error
from corral.observability.log_lines import fields

if TYPE_CHECKING:
    from corral.config.settings import Settings

log = logging.getLogger("corral.groups")

TopicCommits = list[tuple[str, list[PartitionCommit]]]


class Offsets:
    record_types = (OffsetCommits, OffsetTombstones)

    def __init__(
        self,
        settings: Settings,
        groups: Mapping[str, Group],
        log_: CoordinatorLog,
        remove_group: Callable[[Group, list[tuple[str, int]]], Later],
        metrics: GroupMetrics,
        offset_map: _core.OffsetMap | None = None,
        new_group: Callable[[str], object] = lambda group_id: None,
    ):
        # The process's offset map, shared by its shards and the network thread's commit path.
        self.map = offset_map if offset_map is not None else _core.OffsetMap()
        self.metrics = metrics
        self.groups = groups
        self.log = log_
        # The coordinator's deletion of a group with the given offset tombstones (expiry).
        self._remove_group = remove_group
        # Commits replayed for a group nobody has made yet make it (Kafka's "simple" group).
        self._new_group = new_group
        self.metadata_max_bytes = settings["offset.metadata.max.bytes"]
        self.retention_ms = settings["offsets.retention.minutes"] * 60_000
        # TxnOffsetCommit's offsets until their transaction ends (a replayer of its own).
        self.pending = PendingOffsets(
            self.map, log_, new_group, lambda group_id: group_id in groups
        )

    # -- commit ----------------------------------------------------------------------------------

    def commit_error(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        version: int,
        partitions: Callable[[], Iterable[tuple[bytes, int]]] = lambda: (),
    ) -> ErrorCode:
        """Kafka's OffsetMetadataManager.validateOffsetCommit, with its per-partition validator
        over `partitions` (the (topic id, partition) pairs the commit writes), which fails the
        whole commit as Kafka's does."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # Commits from outside group management create a "simple" group (at replay).
                return ErrorCode.NONE
            return ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
        return group.validate_offset_commit(
            member_id, instance_id, generation_id, version, partitions
        )

    def txn_commit_error(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        version: int,
        partitions: Callable[[], Iterable[tuple[bytes, int]]] = lambda: (),
    ) -> ErrorCode:
        """OffsetMetadataManager.validateTransactionalOffsetCommit (`version`: TxnOffsetCommit's).
        Before v6 a stale member epoch is ILLEGAL_GENERATION, as Kafka answers older clients."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return ErrorCode.NONE  # a "simple" group, made at replay
            return ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.ILLEGAL_GENERATION
        error = group.validate_offset_commit(
            member_id, instance_id, generation_id, version, partitions, transactional=True
        )
        if error == ErrorCode.STALE_MEMBER_EPOCH and version < 6:
            return ErrorCode.ILLEGAL_GENERATION
        return error

    def txn_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        topics: TopicCommits,
        commit_ms: int,
    ) -> Later:
        """Writes a TxnOffsetCommit's offsets: pending for the producer once durable."""
        self.metrics.offset_commits += sum(len(partitions) for _, partitions in topics)
        record = TxnOffsetCommits(group_id, producer_id, producer_epoch, topics, commit_ms, -1)
        return self.log.write(group_id, [record])

    def commit(self, group_id: str, topics: TopicCommits, commit_ms: int, expire_ms: int) -> Later:
        """Writes the commits; visible (replayed) and answered once durable."""
        self.metrics.offset_commits += sum(len(partitions) for _, partitions in topics)
        return self.log.write(group_id, [OffsetCommits(group_id, topics, commit_ms, expire_ms)])

    # -- fetch -----------------------------------------------------------------------------------

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Whether this fetch may read the group's offsets (v9+ names a member and its epoch)."""
        group = self.groups.get(group_id)
        return (
            ErrorCode.NONE
            if group is None
            else group.validate_offset_fetch(member_id, member_epoch)
        )

    def fetch(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool = False,
    ) -> list[tuple[str, list[PartitionCommit]]]:
        """[(topic, [(partition, offset, leader_epoch, metadata)])]; None asks for everything.
        Pending transactional offsets are not seen; with `require_stable` (OffsetFetch v7+) a
        partition that has some answers (partition, -1, -1, "", UNSTABLE_OFFSET_COMMIT)."""
        if topics is None:
            result = self.map.fetch_all(group_id)
        else:
            result = []
            for topic, partitions in topics:
                found = self.map.fetch(group_id, topic, partitions)
                result.append((topic, [(p, *f) for p, f in zip(partitions, found)]))
        if require_stable and self.pending.has_open(group_id):
            unstable = self.pending.unstable
            result = [
                (
                    topic,
                    [
                        (c[0], -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)  # type: ignore[misc]
                        if unstable(group_id, topic, c[0])
                        else c
                        for c in commits
                    ],
                )
                for topic, commits in result
            ]
        return result

    # -- delete ----------------------------------------------------------------------------------

    def delete(
        self, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]], Later]:
        """OffsetDelete: (group error, per-partition errors, the write of the tombstones)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, [], Later.of(ErrorCode.NONE)
        error = group.validate_offset_delete()
        if error:
            return error, [], Later.of(ErrorCode.NONE)
        result: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
        tombstones: list[tuple[str, int]] = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                result.append(
                    (topic, [(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions])
                )
                continue
            tombstones.extend((topic, p) for p in partitions)
            result.append((topic, [(p, ErrorCode.NONE) for p in partitions]))
        if not tombstones:
            return ErrorCode.NONE, result, Later.of(ErrorCode.NONE)
        self.metrics.offset_deletions += len(tombstones)
        return (
            ErrorCode.NONE,
            result,
            self.log.write(group_id, [OffsetTombstones(group_id, tombstones)]),
        )

    def all_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """The group's committed and pending offsets' partitions (Kafka's deleteAllOffsets)."""
        committed = [
            (topic, p) for topic, partitions in self.map.fetch_all(group_id) for p, *_ in partitions
        ]
        known = set(committed)
        return committed + [tp for tp in self.pending.partitions(group_id) if tp not in known]

    # -- expiry ----------------------------------------------------------------------------------

    def expire(self, now_ms: int) -> Later:
        """Kafka's cleanupGroupMetadata: tombstones for expired offsets, and a group's deletion
        when it is empty and loses its last offset. Returns their writes (the first failure)."""
        writes = []
        for group in list(self.groups.values()):
            may_expire, base = group.offset_expiry_base()
            group_id = group.group_id
            # A write in flight may commit what expiry would remove: decide at the next check.
            if not may_expire or self.log.writing(group_id):
                continue
            expired = self.map.expired(
                group_id, now_ms, self.retention_ms, base, list(group.offset_expiry_kept_topics())
            )
            open_txn = self.pending.has_open(group_id)
            if open_txn:
                # Kafka's cleanupExpiredOffsets: a partition with pending offsets stays.
                expired = [tp for tp in expired if not self.pending.unstable(group_id, *tp)]
            self.metrics.offset_expirations += len(expired)
            if expired:
                log.debug(
                    "group %s: %d offsets expired", group_id, len(expired), extra=fields(group_id)
                )
            if not open_txn and group.is_empty() and len(expired) == self.map.count(group_id):
                writes.append(self._remove_group(group, expired))
            elif expired:
                writes.append(self.log.write(group_id, [OffsetTombstones(group_id, expired)]))
        return first_error(writes)

    # -- replay ----------------------------------------------------------------------------------

    def replay(self, record: OffsetCommits | OffsetTombstones, loading: bool) -> None:
        if isinstance(record, OffsetCommits):
            if record.group_id not in self.groups:
                self._new_group(record.group_id)
            self.replay_commits(record)
        else:
            self.replay_tombstones(record)

    def replay_commits(self, record: OffsetCommits) -> None:
        for topic, partitions in record.topics:
            self.map.commit(record.group_id, topic, partitions, record.commit_ms, record.expire_ms)
        if self.pending.has_open(record.group_id):
            self.pending.committed(
                record.group_id, ((t, c[0]) for t, cs in record.topics for c in cs)
            )

    def replay_tombstones(self, record: OffsetTombstones) -> None:
        self.pending.deleted(record.group_id, record.partitions)
        by_topic: dict[str, list[int]] = {}
        for topic, p in record.partitions:
            by_topic.setdefault(topic, []).append(p)
        for topic, partitions in by_topic.items():
            self.map.delete(record.group_id, topic, partitions)
