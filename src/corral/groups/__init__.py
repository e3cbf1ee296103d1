"""Consumer groups: the coordinator, its classic groups, offsets, deadlines and log.

`coordinator_for(broker)` builds the broker's coordinator and makes sure `__consumer_offsets`
exists (internal, `offsets.topic.num.partitions` partitions) so Metadata shows it as Kafka does.
"""

from __future__ import annotations

from .coordinator import GroupCoordinator
from .log import CoordinatorLog, VolatileLog
from .placement import OFFSETS_TOPIC, partition_for


def coordinator_for(broker) -> GroupCoordinator:
    partitions = broker.settings["offsets.topic.num.partitions"]
    if broker.topics.get(OFFSETS_TOPIC) is None:
        broker.topics.create(OFFSETS_TOPIC, partitions,
                             {"cleanup.policy": "delete"}, internal=True)
    return GroupCoordinator(broker.settings, broker.topics, VolatileLog())


__all__ = ["CoordinatorLog", "GroupCoordinator", "OFFSETS_TOPIC", "coordinator_for", "partition_for"]
