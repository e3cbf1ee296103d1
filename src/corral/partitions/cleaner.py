"""The log cleaner's schedule: every `log.cleaner.backoff.ms`, each open partition of a topic
whose cleanup.policy includes `compact` is offered to the compiled cleaner (rust/log/compaction/),
which cleans it if it is due (its dirty ratio past min.cleanable.dirty.ratio, or a record older
than max.compaction.lag.ms). A pass runs in a worker thread, one partition at a time, so neither
the event loop nor more than one core is taken; after each pass the cleaner waits long enough to
keep its reads and writes under `log.cleaner.io.max.bytes.per.second`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from corral.clock import wall_ms
from corral.partitions.store import StorageError, storage_warning

if TYPE_CHECKING:
    from corral._core import CleanResult
    from corral.partitions.store import PartitionLogs
    from corral.topics.registry import Topic

log = logging.getLogger("corral.cleaner")


def compacted(logs: PartitionLogs, topic: Topic) -> bool:
    return "compact" in logs.topics.config(topic, "cleanup.policy").split(",")


async def run_cleaner(logs: PartitionLogs) -> None:
    settings = logs.settings
    if not settings["log.cleaner.enable"]:
        return
    while True:
        await trio.sleep(settings["log.cleaner.backoff.ms"] / 1000)
        for name, partition in sorted(logs.open_partitions()):
            topic = logs.topics.get(name)
            if topic is None or not compacted(logs, topic):
                continue
            try:
                result = await trio.to_thread.run_sync(clean_partition, logs, topic, partition)
            except (StorageError, KeyError) as e:  # KeyError: the topic went meanwhile
                storage_warning("cleaner", "cleaning %s-%d failed: %s", name, partition, e)
                continue
            if result is None:
                continue
            log.info(
                "cleaned %s-%d: %d -> %d bytes, %d records removed, %d -> %d segments",
                name,
                partition,
                result.bytes_before,
                result.bytes_after,
                result.records_removed,
                result.segments_before,
                result.segments_after,
            )
            rate = settings["log.cleaner.io.max.bytes.per.second"]
            await trio.sleep((result.bytes_read + result.bytes_after) / rate)


def clean_partition(logs: PartitionLogs, topic: Topic, partition: int) -> CleanResult | None:
    """One pass over one partition (blocks on I/O: from a worker thread)."""
    cfg = logs.topics.config
    return logs.store.clean(
        topic.name,
        partition,
        wall_ms(),
        float(cfg(topic, "min.cleanable.dirty.ratio")),
        int(cfg(topic, "delete.retention.ms")),
        int(cfg(topic, "min.compaction.lag.ms")),
        int(cfg(topic, "max.compaction.lag.ms")),
        int(logs.settings["log.cleaner.dedupe.buffer.size"]),
        int(cfg(topic, "max.message.bytes")),
    )
