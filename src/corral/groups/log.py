"""Where the coordinator's records go: the `__consumer_offsets` topic in the broker's log store.

The state machine is synchronous. A change that must be durable before it is acknowledged hands
its records over with a callback (`write_group`, `write_tombstones`), or awaits `append_offsets`;
either way the answer waits for the write and its fsync. Writes are group-committed: the writer
task takes everything queued since its last pass, appends one batch per partition, and waits for
one fsync pass (the log store's flusher) that covers them all.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

import trio

from .. import _core
from ..errors import ErrorCode
from . import records
from .placement import partition_for

if TYPE_CHECKING:
    from ..log import PartitionLogs
    from ..topics import Topic
    from .classic import ClassicGroup

Done = Callable[[ErrorCode], None] | None
Record = tuple[bytes, bytes | None]
# Kafka maps a failed coordinator append (KAFKA_STORAGE_ERROR) to NOT_COORDINATOR.
WRITE_FAILED = ErrorCode.NOT_COORDINATOR


def group_records(group: "ClassicGroup") -> list[Record]:
    """The group's GroupMetadata record as of now (members with their assignments)."""
    protocol = group.protocol_name
    value = records.GroupValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id,
        protocol=protocol, leader=group.leader_id if group.members else None,
        state_timestamp_ms=group.state_timestamp_ms or -1,
        members=[records.MemberValue(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.session_timeout_ms, m.metadata(protocol) if protocol else b"", m.assignment)
            for m in group.members.values()])
    return [(records.group_key(group.group_id), records.group_value(value))]


def tombstone_records(group_id: str, offsets: list[tuple[str, int]], group_too: bool) -> list[Record]:
    out: list[Record] = [(records.offset_key(group_id, t, p), None) for t, p in offsets]
    if group_too:
        out.append((records.group_key(group_id), None))
    return out


class CoordinatorLog:
    def write_group(self, group: "ClassicGroup", done: Done) -> None:
        raise NotImplementedError

    def write_tombstones(self, group_id: str, offsets: list[tuple[str, int]], done: Done,
                         group_too: bool = True) -> None:
        raise NotImplementedError

    async def append_offsets(self, group_id: str,
                             topics: list[tuple[str, list[tuple[int, int, int, str]]]],
                             commit_ms: int, expire_ms: int) -> ErrorCode:
        raise NotImplementedError

    async def run(self) -> None:
        """The writer task, for logs that have one."""


class DurableLog(CoordinatorLog):
    def __init__(self, logs: "PartitionLogs", topic: "Topic"):
        self.logs = logs
        self.topic = topic
        self._queue: list[tuple[int, list[Record], Done]] = []
        self._wanted = trio.Event()

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.topic.partitions)

    def write_group(self, group, done):
        self._enqueue(group.group_id, group_records(group), done)

    def write_tombstones(self, group_id, offsets, done, group_too=True):
        self._enqueue(group_id, tombstone_records(group_id, offsets, group_too), done)

    def _enqueue(self, group_id: str, recs: list[Record], done: Done) -> None:
        self._queue.append((self.partition_of(group_id), recs, done))
        self._wanted.set()

    async def append_offsets(self, group_id, topics, commit_ms, expire_ms):
        recs = [(records.offset_key(group_id, topic, p),
                 records.offset_value(offset, epoch, metadata, commit_ms, expire_ms))
                for topic, partitions in topics for p, offset, epoch, metadata in partitions]
        batch = _core.build_batch(recs, commit_ms)
        error, *_, needs_flush = self.logs.append(self.topic, self.partition_of(group_id), batch)
        if error:
            return WRITE_FAILED
        if needs_flush:
            try:
                await self.logs.flushed()
            except Exception:
                return WRITE_FAILED
        return ErrorCode.NONE

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            queue, self._queue = self._queue, []
            by_partition: dict[int, list[Record]] = {}
            for partition, recs, _ in queue:
                by_partition.setdefault(partition, []).extend(recs)
            error = await self._write(by_partition)
            for _, _, done in queue:
                if done is not None:
                    done(error)

    async def _write(self, by_partition: dict[int, list[Record]]) -> ErrorCode:
        now = int(time.time() * 1000)
        flush = False
        for partition, recs in by_partition.items():
            code, *_, needs_flush = self.logs.append(self.topic, partition,
                                                     _core.build_batch(recs, now))
            if code:
                return WRITE_FAILED
            flush = flush or needs_flush
        if flush:
            try:
                await self.logs.flushed()
            except Exception:
                return WRITE_FAILED
        return ErrorCode.NONE

    def replay(self):
        """Every record of the topic, partition by partition: (key, value or None)."""
        for partition in range(self.topic.partitions):
            start, end = self.logs.offsets(self.topic, partition)
            offset = start
            while offset < end:
                data, _, _ = self.logs.read(self.topic, partition, offset, 8 << 20, True)
                if not data:
                    break
                for rec_offset, _, key, value in _core.decode_batches(data):
                    offset = rec_offset + 1
                    if key is not None:
                        yield key, value
