"""Consumer groups: the coordinator, its classic groups, offsets, deadlines and storage
(docs/architecture.md walks through the rooms).

`coordinator_for(broker)` builds the broker's coordinator and makes sure `__consumer_offsets`
exists (internal, `offsets.topic.num.partitions` partitions) so Metadata shows it as Kafka does.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from corral import _core
from corral.cluster.replication import ReplicatedLog
from corral.groups.coordinator import GroupCoordinator
from corral.groups.storage import snapshot
from corral.groups.storage.placement import OFFSETS_TOPIC, partition_for
from corral.groups.storage.writer import CoordinatorLog, DurableLog

if TYPE_CHECKING:
    from corral.broker import Broker
    from corral.topics.registry import TopicStore

# corral has no log compaction: the coordinator's snapshots (every
# corral.coordinator.snapshot.interval.ms) hold everything older, so segments may go after a week
# (Kafka's default retention). A classic group's record holds every member, so it may be far
# above the 1 MB default batch size.
OFFSETS_TOPIC_CONFIGS = {
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "max.message.bytes": str(100 << 20),
}


def coordinator_for(broker: Broker) -> GroupCoordinator:
    """The broker's coordinator, rebuilt from `__consumer_offsets` (created when missing)."""
    topic = broker.topics.get(OFFSETS_TOPIC)
    if topic is None:
        topic = broker.topics.create_at_startup(
            OFFSETS_TOPIC,
            broker.settings["offsets.topic.num.partitions"],
            OFFSETS_TOPIC_CONFIGS,
            internal=True,
        )
    settings = broker.settings
    durable = (
        DurableLog(broker.logs, topic)
        if broker.cluster is None
        else ReplicatedLog(broker.logs, topic, broker.cluster.engine)
    )
    coordinator = GroupCoordinator(
        settings, durable, broker.data_dir / snapshot.FILE_NAME, broker.topics
    )
    # With ACLs, the network thread takes a connection's commits once Python authorized their
    # group and topics on it.
    if settings["corral.group.offset.commit.short.path.enable"]:
        durable.core_commits = _core.CommitPath(
            broker.logs.store,
            topic.name,
            topic.partitions,
            coordinator.offsets.map,
            settings["log.flush.interval.messages"],
            settings["offset.metadata.max.bytes"],
        )
        path = durable.core_commits
        assert path is not None, "made just above"
        settings.on_change.append(
            lambda _names: path.set_flush_messages(settings["log.flush.interval.messages"])
        )
        for partition in range(topic.partitions):
            broker.logs.open(topic, partition)  # the network thread appends only to open ones
        broker.topics.on_change.append(lambda names: _mirror_topics(broker.topics, path, names))
        _mirror_topics(broker.topics, path, set(broker.topics.by_name))
    broker.topics.on_change.append(coordinator.on_topics_changed)
    coordinator.authorize_regexes = broker.authorizer is not None
    coordinator.group_configs = broker.dynamic_configs
    broker.dynamic_configs.on_group_change.append(coordinator.group_configs_changed)
    for group_id in broker.dynamic_configs.groups:
        coordinator.group_configs_changed(group_id)
    if broker.cluster is not None:
        # Shards are loaded from the engine as their leases are taken (cluster/node.py).
        assert isinstance(durable, ReplicatedLog)
        coordinator.start_unloaded()
        broker.cluster.attach(coordinator, durable)
        return coordinator
    started = time.monotonic()
    loaded = coordinator.load()
    if loaded["snapshot_records"] or loaded["log_records"]:
        logger.info(
            "loaded %d groups and %d offsets in %.2fs: %d records from the snapshot, %d from %s",
            loaded["groups"],
            loaded["offsets"],
            time.monotonic() - started,
            loaded["snapshot_records"],
            loaded["log_records"],
            OFFSETS_TOPIC,
        )
    return coordinator


def _mirror_topics(topics: TopicStore, core_commits: _core.CommitPath, names: set[str]) -> None:
    """The topics as requests see them, for the network thread's commits."""
    for name in names:
        topic = topics.get(name)
        core_commits.set_topic(name, topic.partitions if topic is not None else 0)


logger = logging.getLogger("corral.groups")

__all__ = [
    "CoordinatorLog",
    "DurableLog",
    "GroupCoordinator",
    "OFFSETS_TOPIC",
    "coordinator_for",
    "partition_for",
]
