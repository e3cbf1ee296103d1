"""Where the coordinator's records go: the `__consumer_offsets` topic in the broker's log store.

The one write path of the groups layer. A handler decides and hands its records to `write`, which
appends them at once (one RecordBatch) and returns a `Later`. Once the fsync covering them is
done, the records are applied to memory by the coordinator's `replay`, the very function loading
uses, and then the Later resolves (NONE, or NOT_COORDINATOR when the append or its fsync failed:
then nothing is applied). Writes complete in the order they were appended, so memory follows the
log's order exactly and never runs ahead of it. fsyncs are group-committed by the log store's
flusher: every write waiting when a pass starts is covered by it.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import trio

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.storage.placement import partition_for
from corral.groups.storage.records import (
    GroupTombstone,
    LogEntry,
    OffsetCommits,
    OffsetTombstones,
    Record,
    encode_batch,
)
from corral.groups.storage.txn_records import TxnMarker, TxnOffsetCommits, log_records
from corral.later import Later
from corral.partitions.store import StorageError, storage_warning

if TYPE_CHECKING:
    from corral.partitions.store import PartitionLogs
    from corral.topics.registry import Topic

log = logging.getLogger("corral.groups")

# Kafka maps a failed coordinator append (KAFKA_STORAGE_ERROR) to NOT_COORDINATOR.
WRITE_FAILED = ErrorCode.NOT_COORDINATOR

Replay = Callable[[Record], None]


class CoordinatorLog:
    """What the coordinator writes to and loads from. `replay` is set by the coordinator."""

    replay: Replay

    @property
    def partitions(self) -> int:
        """The log's partitions: one coordinator shard each."""
        return 1

    # Bumped on every append: lets the snapshotter skip a pass when nothing changed.
    appends = 0
    # The network thread's OffsetCommit writer (rust/short_paths/commit_path.rs), if this log has
    # one.
    core_commits: _core.CommitPath | None = None

    def write(
        self,
        group_id: str,
        records: list[Record],
        applied: bool = False,
        batch: bytes | None = None,
    ) -> Later:
        """Appends `records` (all of one group) now; once durable replays them and resolves the
        returned Later with NONE, or with WRITE_FAILED (nothing replayed). `applied`: the
        caller replayed them already (consumer groups, whose next request must see them).
        `batch`: their RecordBatch, when the caller encoded them (in a worker thread)."""
        return self._write(group_id, records, applied, batch)

    def _write(
        self, group_id: str, records: list[Record], applied: bool, batch: bytes | None
    ) -> Later:
        raise NotImplementedError

    def write_marker(self, marker: TxnMarker) -> Later:
        """Appends the control batch ending a producer's transaction in `marker.partition`; once
        durable replays it and resolves with NONE, else with the log's refusal (a fenced
        coordinator or producer epoch) or WRITE_FAILED."""
        return self._write(marker.group_id, [marker], False, None)

    def hold_commits(self, group_id: str) -> None:
        """The group has pending transactional offsets: its plain commits must be replayed here
        (a commit marker moves a pending offset only if no later plain commit replaced it), so
        the network thread's commit path takes none until `release_commits`. Counted."""

    def release_commits(self, group_id: str) -> None:
        """The group's last pending transactional offset was committed or aborted."""

    def writing(self, group_id: str) -> bool:
        """Whether writes of the group are appended but not applied yet."""
        return False

    def after_core_commits(self, group_id: str, then: Callable[[], Later]) -> Later:
        """`then()`, once commits of the group written outside Python are applied."""
        return then()

    def partition_of(self, group_id: str) -> int:
        return 0

    def pending_in(self, partition: int) -> bool:
        """Whether writes to `partition` await their fsync."""
        return False

    def hold_group(self, group_id: str) -> None:
        """While a shard loads the group (`release_group` after): the network thread takes none
        of its commits or member moves, which would be applied to memory while older records
        of the group are still being replayed over them."""

    def release_group(self, group_id: str) -> None:
        """The group is loaded: the network thread may take its commits and moves again."""

    def positions(self) -> dict[int, int]:
        """Per partition, where replay must start for a snapshot of the current state."""
        return {}

    def read(
        self, positions: dict[int, int] | None = None, only: int | None = None
    ) -> Iterator[LogEntry]:
        """The records from `positions` (default: the log start), of every partition or of
        partition `only` (a transactional batch's with its facts: records.LogEntry)."""
        return iter(())

    async def run(self) -> None:
        """The writer task, for logs that have one."""


# Records whose replay changes the offset map. A TxnOffsetCommits' pending offsets reach it at
# their marker, which compares them with the commits after them: from its append on, the group's
# commits go through Python (held until the marker: txn_offsets.py).
_OFFSET_RECORDS = (OffsetCommits, OffsetTombstones, GroupTombstone, TxnOffsetCommits)


class PendingWrite:
    """One appended write waiting for its fsync."""

    __slots__ = (
        "group_id",
        "partition",
        "base",
        "records",
        "done",
        "durable",
        "error",
        "touches_offsets",
    )

    def __init__(
        self,
        group_id: str,
        partition: int,
        base: int,
        records: list[Record],
        done: Later,
        touches_offsets: bool,
    ):
        self.group_id = group_id
        self.partition = partition
        self.base = base
        self.records = records  # empty when the caller applied them already
        self.done = done
        self.durable = False
        self.error: BaseException | None = None
        self.touches_offsets = touches_offsets


class DurableLog(CoordinatorLog):
    def __init__(self, logs: PartitionLogs, topic: Topic):
        self.logs = logs
        self.topic = topic
        self._pending: collections.deque[PendingWrite] = collections.deque()
        # Per group, how many of its writes are pending.
        self._groups_pending: dict[str, int] = {}
        self._partition_of: dict[str, int] = {}
        # `core_commits` takes a group's commits only while no write of ours touching its
        # offsets is pending, so the offset map is applied in log order (counted here).
        self._offset_writes: dict[str, int] = {}

    @property
    def partitions(self) -> int:
        return self.topic.partitions

    def pending_in(self, partition: int) -> bool:
        if any(write.partition == partition for write in self._pending):
            return True
        return self.core_commits is not None and partition in dict(
            self.core_commits.oldest_in_flight()
        )

    def partition_of(self, group_id: str) -> int:
        # Java's String.hashCode in Python is costly per commit: remember each group's partition.
        partition = self._partition_of.get(group_id)
        if partition is None:
            partition = self._partition_of[group_id] = partition_for(
                group_id, self.topic.partitions
            )
        return partition

    def _write(
        self, group_id: str, records: list[Record], applied: bool, batch: bytes | None
    ) -> Later:
        done = Later()
        partition = self.write_partition(group_id, records)
        # Flagged before the append: a network-thread commit of the group is then either
        # appended before ours or not taken at all.
        touches_offsets = self.core_commits is not None and any(
            isinstance(record, _OFFSET_RECORDS) for record in records
        )
        if touches_offsets:
            self._offset_write_begins(group_id)
        marker = records[0] if isinstance(records[0], TxnMarker) else None
        try:
            if marker is not None:
                # The store writes the control batch: it also ends the producer's transaction
                # in its state (the partition's last stable offset), as on any partition.
                result, needs_flush = self.logs.write_marker(
                    self.topic,
                    partition,
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.commit,
                    marker.coordinator_epoch,
                )
            else:
                if batch is None:
                    batch = encode_batch(records, wall_ms(), self._sequence(partition, records))
                result, needs_flush = self.logs.append(self.topic, partition, batch)
        except StorageError as e:
            storage_warning(
                "coordinator",
                "write to %s-%d failed, answered NOT_COORDINATOR: %s",
                self.topic.name,
                partition,
                e,
            )
            result = None
        if result is None or result.error_code:
            if touches_offsets:
                self._offset_write_ends(group_id)
            if result is not None and isinstance(records[0], (TxnMarker, TxnOffsetCommits)):
                # A refused transactional write answers the store's reason (fenced epochs).
                done.resolve(ErrorCode(result.error_code))
            else:
                done.resolve(WRITE_FAILED)
            return done
        self.appends += 1
        if isinstance(records[0], TxnOffsetCommits):
            records[0].offset = result.base_offset
        pending = PendingWrite(
            group_id,
            partition,
            result.base_offset,
            [] if applied else records,
            done,
            touches_offsets,
        )
        self._pending.append(pending)
        self._groups_pending[group_id] = self._groups_pending.get(group_id, 0) + 1
        if needs_flush:
            self.logs.after_flush(lambda error: self._flushed(pending, error))
        else:
            self._flushed(pending, None)
        return done

    def _flushed(self, pending: PendingWrite, error: BaseException | None) -> None:
        pending.durable, pending.error = True, error
        self._apply_durable()

    def _apply_durable(self) -> None:
        """Replays and answers the durable writes at the head of the queue, in append order."""
        pending = self._pending
        while pending and pending[0].durable:
            write = pending.popleft()
            left = self._groups_pending.pop(write.group_id) - 1
            if left:
                self._groups_pending[write.group_id] = left
            if write.error is not None:
                if write.touches_offsets:
                    self._offset_write_ends(write.group_id)
                write.done.resolve(WRITE_FAILED)
                continue
            try:
                for record in write.records:
                    self.replay(record)
            except Exception:
                # A bug in replay: memory may be off; say so loudly, keep serving the rest.
                log.exception("replaying a durable coordinator write failed")
            if write.touches_offsets:
                self._offset_write_ends(write.group_id)  # applied: the network thread may write
            write.done.resolve(ErrorCode.NONE)

    async def run(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            if self.core_commits is not None:
                self.core_commits.close()  # its thread answers what waits, then ends

    def write_partition(self, group_id: str, records: list[Record]) -> int:
        """The partition a write goes to: its group's, or a marker's own."""
        first = records[0] if records else None
        return first.partition if isinstance(first, TxnMarker) else self.partition_of(group_id)

    def _sequence(self, partition: int, records: list[Record]) -> int:
        """The base sequence of a TxnOffsetCommit's batch: Kafka writes 0 and its log skips
        sequence checks for the coordinator's appends; this store checks every producer batch
        (a second commit of the transaction at 0 would be a duplicate, or out of order), so the
        batch continues the producer's sequence in the partition."""
        record = records[0]
        if not isinstance(record, TxnOffsetCommits):
            return 0
        state = self.logs.producer(self.topic, partition, record.producer_id)
        if state is None or state[0] != record.producer_epoch or state[1] < 0:
            return 0
        return (state[1] + 1) % (1 << 31)

    def hold_commits(self, group_id: str) -> None:
        if self.core_commits is not None:
            self._offset_write_begins(group_id)

    def release_commits(self, group_id: str) -> None:
        if self.core_commits is not None:
            self._offset_write_ends(group_id)

    def hold_group(self, group_id: str) -> None:
        if self.core_commits is not None:
            self._offset_write_begins(group_id)
            self.core_commits.python_writing_group(group_id, True)

    def release_group(self, group_id: str) -> None:
        if self.core_commits is not None:
            self._offset_write_ends(group_id)
            self.core_commits.python_writing_group(group_id, False)

    def _offset_write_begins(self, group_id: str) -> None:
        count = self._offset_writes.get(group_id, 0)
        if not count:
            assert self.core_commits is not None, "only writes that touch its offsets count"
            self.core_commits.python_writing(group_id, True)
        self._offset_writes[group_id] = count + 1

    def _offset_write_ends(self, group_id: str) -> None:
        count = self._offset_writes.pop(group_id) - 1
        if count:
            self._offset_writes[group_id] = count
        else:
            assert self.core_commits is not None, "only writes that touch its offsets count"
            self.core_commits.python_writing(group_id, False)

    def writing(self, group_id: str) -> bool:
        return group_id in self._groups_pending or self.core_commits_in_flight(group_id)

    def core_commits_in_flight(self, group_id: str) -> bool:
        """Whether the network thread appended commits of the group not applied yet."""
        return self.core_commits is not None and self.core_commits.in_flight(group_id) > 0

    def after_core_commits(self, group_id: str, then: Callable[[], Later]) -> Later:
        """`then()` once the network thread's commits of the group are applied (tombstones are
        computed from the map: one in flight would come back after them)."""
        if not self.core_commits_in_flight(group_id):
            return then()
        done = Later()
        # A pass that starts after this call covers them; the path applies them inside it.
        self.logs.after_flush(
            lambda _error: self.after_core_commits(group_id, then).then(done.resolve)
        )
        return done

    def positions(self) -> dict[int, int]:
        # Memory holds exactly the writes before the oldest pending one of each partition.
        oldest: dict[int, int] = (
            dict(self.core_commits.oldest_in_flight()) if self.core_commits else {}
        )
        for write in self._pending:
            if write.base < oldest.get(write.partition, write.base + 1):
                oldest[write.partition] = write.base
        return {
            partition: oldest.get(partition, self.logs.offsets(self.topic, partition)[1])
            for partition in range(self.topic.partitions)
        }

    def read(
        self, positions: dict[int, int] | None = None, only: int | None = None
    ) -> Iterator[LogEntry]:
        """The topic's records from `positions` (default: the log start), partition by partition
        (or of partition `only`): (key, value or None), and a transactional batch's facts."""
        for partition in range(self.topic.partitions) if only is None else (only,):
            start, end = self.logs.offsets(self.topic, partition)
            offset = start
            if positions is not None and partition in positions:
                if positions[partition] < start:
                    log.error(
                        "%s-%d starts at %d but the snapshot needs records from %d: the "
                        "records in between are lost",
                        self.topic.name,
                        partition,
                        start,
                        positions[partition],
                    )
                offset = max(start, positions[partition])
            while offset < end:
                data = self.logs.read(self.topic, partition, offset, 8 << 20, True).data
                if not data:
                    break
                for rec_offset, key, value, pid, epoch, control in log_records(data):
                    if rec_offset < offset:
                        continue  # the batch holding `offset` starts before it
                    offset = rec_offset + 1
                    if key is None:
                        continue
                    if pid >= 0 or control:
                        yield key, value, (partition, rec_offset, pid, epoch, control)
                    else:
                        yield key, value
