"""Keeping `__share_group_state` bounded (Kafka's share coordinator does the same): every
`share.coordinator.cold.partition.snapshot.interval.ms` the share partitions not written since the
last pass get a fresh snapshot, and every `share.coordinator.state.topic.prune.interval.ms` each
partition of the topic deletes (DeleteRecords) what lies before the oldest latest-snapshot of the
share partitions it holds. A restart then reads about one snapshot and its tail per share
partition."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from corral.later import Later
from corral.partitions.store import StorageError, storage_warning

if TYPE_CHECKING:
    from corral.shares.manager import SharePartitions

log = logging.getLogger("corral.shares")


class StatePruner:
    def __init__(self, shares: SharePartitions):
        self.shares = shares
        self.settings = shares.settings

    async def run(self) -> None:
        cold_s = self.settings["share.coordinator.cold.partition.snapshot.interval.ms"] / 1000
        prune_s = self.settings["share.coordinator.state.topic.prune.interval.ms"] / 1000
        next_cold = trio.current_time() + cold_s
        next_prune = trio.current_time() + prune_s
        while True:
            await trio.sleep_until(min(next_cold, next_prune))
            now = trio.current_time()
            if now >= next_cold:
                self.snapshot_cold()
                next_cold = now + cold_s
            if now >= next_prune:
                await self.prune()
                next_prune = now + prune_s

    def snapshot_cold(self) -> list[Later]:
        """A snapshot for every share partition not written since the last pass."""
        shares, state_log = self.shares, self.shares.log
        written, state_log.written = state_log.written, set()
        writes = []
        for key, sp in list(shares.partitions.items()):
            if key not in written:
                writes.append(sp.persist([], shares.snapshot_every(), force=True))
        for key, stored in list(shares.stored.items()):
            if key not in written and key in state_log.snapshot_offsets:
                done = sum(b[1] - b[0] + 1 for b in stored.batches if b[2] in (2, 4))
                writes.append(state_log.write(key, [state_log.snapshot_record(key, stored, done)]))
        return writes

    async def prune(self) -> int:
        """Deletes each partition's records below its share partitions' oldest latest snapshot
        (or all of them when it holds none); how many partitions moved their start."""
        state_log = self.shares.log
        topic = state_log.topic
        if topic is None:
            return 0
        oldest: dict[int, int] = {}
        for key, offset in state_log.snapshot_offsets.items():
            partition = state_log.partition_for(key)
            oldest[partition] = min(offset, oldest.get(partition, offset))
        logs = self.shares.broker.logs
        moved = 0
        for partition in range(topic.partitions):
            start, end = logs.offsets(topic, partition)
            upto = oldest.get(partition, end)
            if upto <= start:
                continue
            try:
                await trio.to_thread.run_sync(logs.delete_records, topic, partition, upto)
            except (StorageError, KeyError) as e:
                storage_warning("shares", "pruning __share_group_state-%d failed: %s", partition, e)
                continue
            moved += 1
        if moved:
            log.info("pruned %d partitions of __share_group_state", moved)
        return moved
