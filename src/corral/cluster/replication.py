"""The coordinator's write path in cluster mode: a write is answered once the engine holds it.

`ReplicatedLog` is the one-process `DurableLog` (groups/storage/writer.py) with one step more.
The node's local `__consumer_offsets` partition is only a cache of its shard; the engine is the
source of truth. A write is appended locally as before, then the shipper sends the partition's
new bytes (whole RecordBatches, up to ~1 MiB a piece) to the engine under the shard's lease, at
position (lease epoch, local offset); only then is it replayed and answered, in append order as
before. Everything appended while a piece is on its way goes in the next: the engine's round
trip is group-committed as the fsync is. The local fsync no longer decides anything.

A write the engine refuses because another node took the shard (`Fenced`) fails with the
partition's other pending writes (NOT_COORDINATOR: clients look for the coordinator again) and
the node steps down from the shard. While the engine cannot be reached, shipping is retried and
the writes wait, as they would on a slow disk; the lease loop (node.py) steps down when the
lease is lost meanwhile.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from corral.cluster.engine import Engine, EngineError, Fenced, Lease
from corral.groups.storage.writer import WRITE_FAILED, DurableLog, PendingWrite
from corral.later import Later

if TYPE_CHECKING:
    from corral.groups.storage.records import Record
    from corral.partitions.store import PartitionLogs
    from corral.topics.registry import Topic

log = logging.getLogger("corral.cluster")

# Bytes of RecordBatches sent in one engine write (etcd takes at most 1.5 MiB a request).
PIECE_BYTES = 1 << 20
RETRY_FIRST_S, RETRY_MAX_S = 0.05, 1.0


def whole_batches(data: bytes, end: int) -> tuple[int, int]:
    """(bytes, next offset) of the whole RecordBatches at the start of `data` below offset `end`
    (a read may end in a partial batch)."""
    pos, next_offset = 0, -1
    while pos + 27 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if base >= end or pos + 12 + length > len(data):
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        next_offset = base + last_delta + 1
        pos += 12 + length
    return pos, next_offset


class ReplicatedLog(DurableLog):
    def __init__(self, logs: PartitionLogs, topic: Topic, engine: Engine):
        super().__init__(logs, topic)
        self.engine = engine
        # The shards this node holds, with their leases (set by the node, node.py).
        self.leases: dict[int, Lease] = {}
        # Per held partition: the local offset below which the engine holds its bytes.
        self.shipped: dict[int, int] = {}
        # Called with a partition whose lease the engine refused (the node steps down).
        self.on_fenced: Callable[[int], None] = lambda _partition: None
        self._to_ship: set[int] = set()
        self._wake = trio.Event()

    def _write(
        self, group_id: str, records: list[Record], applied: bool, batch: bytes | None
    ) -> Later:
        if self.write_partition(group_id, records) not in self.leases:
            return Later.of(WRITE_FAILED)  # the shard is not (or no longer) ours
        return super()._write(group_id, records, applied, batch)

    def _flushed(self, pending: PendingWrite, error: BaseException | None) -> None:
        # The local fsync: a failure fails the write, as alone; success waits for the engine.
        if error is not None:
            super()._flushed(pending, error)
            return
        self._to_ship.add(pending.partition)
        self._wake.set()

    def adopt(self, lease: Lease, shipped: int) -> None:
        """The node holds the shard under `lease`; the engine has its local log below `shipped`."""
        self.leases[lease.shard] = lease
        self.shipped[lease.shard] = shipped

    def give_up(self, partition: int, why: str) -> None:
        """The node no longer holds the shard: its pending writes fail (NOT_COORDINATOR)."""
        self.leases.pop(partition, None)
        self.shipped.pop(partition, None)
        failed = 0
        for write in self._pending:
            if write.partition == partition and not write.durable:
                write.durable, write.error = True, Fenced(why)
                failed += 1
        if failed:
            log.warning("shard %d: %d pending writes failed (%s)", partition, failed, why)
        self._apply_durable()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(super().run)
            nursery.start_soon(self._ship_forever)

    async def _ship_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            partitions, self._to_ship = self._to_ship, set()
            async with trio.open_nursery() as nursery:
                for partition in partitions:
                    nursery.start_soon(self._ship, partition)

    async def _ship(self, partition: int) -> None:
        lease = self.leases.get(partition)
        if lease is None:
            return
        end = self.logs.offsets(self.topic, partition)[1]
        delay = RETRY_FIRST_S
        while self.leases.get(partition) is lease and self.shipped[partition] < end:
            start = self.shipped[partition]
            data = self.logs.read(self.topic, partition, start, PIECE_BYTES, True).data or b""
            size, next_offset = whole_batches(data, end)
            if not size:
                log.error("shard %d: no whole batch at local offset %d", partition, start)
                self.give_up(partition, "unreadable local log")
                self.on_fenced(partition)
                return
            try:
                await trio.to_thread.run_sync(
                    self.engine.append, lease, (lease.epoch, start), data[:size]
                )
            except Fenced:
                self.give_up(partition, f"fenced: epoch {lease.epoch} is no longer the shard's")
                self.on_fenced(partition)
                return
            except EngineError as e:
                log.warning("shard %d: engine write failed (retried): %s", partition, e)
                await trio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            delay = RETRY_FIRST_S
            if self.leases.get(partition) is not lease:
                return
            self.shipped[partition] = next_offset
            for write in self._pending:
                if write.partition == partition and write.base < next_offset:
                    write.durable = True
            self._apply_durable()
