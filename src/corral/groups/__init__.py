"""Consumer groups: the coordinator, its classic groups, offsets, deadlines and log.

`coordinator_for(broker)` builds the broker's coordinator and makes sure `__consumer_offsets`
exists (internal, `offsets.topic.num.partitions` partitions) so Metadata shows it as Kafka does.
"""

from __future__ import annotations

import logging
import time

from .coordinator import GroupCoordinator
from .log import CoordinatorLog, DurableLog
from .placement import OFFSETS_TOPIC, partition_for


# corral has no log compaction yet: the coordinator log is kept whole (no retention), and a
# classic group's record holds every member, so it may be far above the 1 MB default.
OFFSETS_TOPIC_CONFIGS = {"retention.ms": "-1", "max.message.bytes": str(100 << 20)}


def coordinator_for(broker) -> GroupCoordinator:
    """The broker's coordinator, rebuilt from `__consumer_offsets` (created when missing)."""
    topic = broker.topics.get(OFFSETS_TOPIC)
    if topic is None:
        topic = broker.topics.create(OFFSETS_TOPIC, broker.settings["offsets.topic.num.partitions"],
                                     OFFSETS_TOPIC_CONFIGS, internal=True)
    durable = DurableLog(broker.logs, topic)
    coordinator = GroupCoordinator(broker.settings, durable)
    started = time.monotonic()
    groups, offsets = coordinator.load(durable.replay())
    if groups:
        logger.info("loaded %d groups and %d offsets from %s in %.2fs", groups, offsets,
                 OFFSETS_TOPIC, time.monotonic() - started)
    return coordinator


logger = logging.getLogger("corral.groups")

__all__ = ["CoordinatorLog", "DurableLog", "GroupCoordinator", "OFFSETS_TOPIC", "coordinator_for", "partition_for"]
