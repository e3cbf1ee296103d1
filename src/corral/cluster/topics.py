"""The topics of a cluster: one registry for every node, kept in the engine (docs/cluster.md).

A topic's definition is the engine's metadata key `topics/<name>`: its id, partition count,
configs and the node leading each partition. Every change (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs, auto-creation) is made there first, by compare-and-set: a name
another node created meanwhile answers TOPIC_ALREADY_EXISTS, as Kafka does. Each node mirrors
the definitions into its own topic registry (the same ids: KIP-848 assigns by topic id), about
once a second and right after a change it made, so that the request returns once its own node
shows the change; the others follow within a second, as Kafka's brokers follow the controller.

Partition i of a topic is led by one node, chosen at creation (round robin over the live nodes
from a point derived from the name) and kept: its data lives on that node's disk (replication
factor 1). While that node is down the partition is offline (Metadata: LEADER_NOT_AVAILABLE), as
in Kafka with a single replica; Produce, Fetch, ListOffsets and DeleteRecords for a partition a
node does not lead answer NOT_LEADER_OR_FOLLOWER, and clients go to the leader.

The node's own internal topics are not shared: `__consumer_offsets` partition p is led by the
owner of coordinator shard p (node.py), `__corral_analytics` by whichever node answers.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio

from corral.cluster.engine import Engine, EngineError
from corral.errors import ErrorCode
from corral.topics.registry import Topic, TopicError
from corral.uuids import random_uuid

if TYPE_CHECKING:
    from corral.cluster.node import ClusterNode
    from corral.topics.registry import TopicStore

log = logging.getLogger("corral.cluster")

PREFIX = "topics/"
MIRROR_INTERVAL_S = 1.0


def assign_leaders(name: str, partitions: range, nodes: Sequence[int], first: int = 0) -> list[int]:
    """The leading node of each of `partitions` (new ones start at index `first`): round robin
    over the live nodes by id, from a point the topic's name gives, so topics spread."""
    ordered = sorted(nodes)
    start = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "big")
    return [ordered[(start + p) % len(ordered)] for p in partitions]


class ClusterTopics:
    def __init__(self, engine: Engine, store: TopicStore, node: ClusterNode):
        self.engine = engine
        self.store = store
        self.node = node
        # name -> definition (JSON) as last read from the engine
        self.definitions: dict[str, dict[str, Any]] = {}
        self._raw: dict[str, bytes] = {}
        self._sync_lock = trio.Lock()
        # Written once this data dir's registry first followed the cluster's: until then its
        # topics are its own (a corral that ran alone joining), and are brought into the cluster
        # instead of removed.
        self.joined_marker = store.path.with_name("cluster-member")

    # What requests ask

    def leader(self, name: str, partition: int) -> int | None:
        """The node leading `partition` of topic `name` (None: unknown)."""
        definition = self.definitions.get(name)
        if definition is None or not 0 <= partition < len(definition["leaders"]):
            return None
        leader: int = definition["leaders"][partition]
        return leader

    def leads(self, topic: Topic, partition: int) -> bool:
        """Whether this node leads the partition (a node's internal topics: it does)."""
        if topic.internal:
            return True
        return self.leader(topic.name, partition) == self.node.node.node_id

    # Changes, made in the engine first

    async def _cas(self, name: str, value: bytes | None, expected: bytes | None) -> bool:
        done: bool = await trio.to_thread.run_sync(
            self.engine.put_meta, PREFIX + name, value, expected
        )
        return done

    async def _current(self, name: str) -> bytes | None:
        found: dict[str, bytes] = await trio.to_thread.run_sync(self.engine.get_meta, PREFIX + name)
        return found.get(PREFIX + name)

    async def create(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        nodes = [n.node_id for n in self.node.live_nodes()]
        definition = Topic(name, random_uuid(), partitions, configs).as_json()
        definition["leaders"] = assign_leaders(name, range(partitions), nodes)
        try:
            created = await self._cas(name, json.dumps(definition).encode(), None)
        except EngineError as e:
            raise OSError(f"the cluster's engine: {e}") from e
        if not created:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        await self.sync()
        topic = self.store.get(name)
        if topic is None:
            raise OSError(f"topic {name} was created in the engine but not here")
        return topic

    async def _update(self, name: str, change: Any) -> None:
        """Applies `change(definition) -> definition or None (delete)` by compare-and-set,
        again on the latest value until it holds; then mirrors it here."""
        try:
            while True:
                raw = await self._current(name)
                if raw is None:
                    break  # gone already
                new = change(json.loads(raw))
                if await self._cas(name, None if new is None else json.dumps(new).encode(), raw):
                    break
        except EngineError as e:
            raise OSError(f"the cluster's engine: {e}") from e
        await self.sync()

    async def delete(self, topic: Topic) -> None:
        await self._update(topic.name, lambda definition: None)

    async def grow(self, topic: Topic, count: int) -> None:
        nodes = [n.node_id for n in self.node.live_nodes()]

        def grown(definition: dict[str, Any]) -> dict[str, Any]:
            have = definition["partitions"]
            if count > have:
                definition["leaders"] += assign_leaders(topic.name, range(have, count), nodes)
                definition["partitions"] = count
            return definition

        await self._update(topic.name, grown)

    async def reconfigure(self, topic: Topic, configs: dict[str, str]) -> None:
        def reconfigured(definition: dict[str, Any]) -> dict[str, Any]:
            definition["configs"] = configs
            return definition

        await self._update(topic.name, reconfigured)

    # The mirror

    async def run(self) -> None:
        while True:
            try:
                await self.sync()
            except EngineError as e:
                log.warning("reading the cluster's topics failed (retrying): %s", e)
            except Exception:
                log.exception("mirroring the cluster's topics failed (retrying)")
            await trio.sleep(MIRROR_INTERVAL_S)

    async def sync(self) -> None:
        """Makes the local registry the engine's: topics created, grown, reconfigured, deleted
        (a topic the engine no longer has is removed: the engine is the truth once joined)."""
        async with self._sync_lock:
            if not self.joined_marker.exists():
                await self._bring_own_topics()
            raw = await trio.to_thread.run_sync(self.engine.get_meta, PREFIX)
            definitions = {key[len(PREFIX) :]: json.loads(value) for key, value in raw.items()}
            self.definitions = definitions
            store = self.store
            for name, definition in definitions.items():
                local = store.get(name)
                if local is not None and str(local.id) != definition["id"]:
                    await store.delete(local, mirrored=True)  # the name was deleted and reused
                    local = None
                if local is None:
                    await store.create(
                        name,
                        definition["partitions"],
                        definition["configs"],
                        topic_id=definition["id"],
                        mirrored=True,
                    )
                    continue
                if definition["partitions"] > local.partitions:
                    await store.add_partitions(local, definition["partitions"], mirrored=True)
                if definition["configs"] != local.configs:
                    await store.set_configs(local, definition["configs"], mirrored=True)
            for topic in list(store.by_name.values()):
                if not topic.internal and topic.name not in definitions:
                    log.info("topic %s was deleted in the cluster: removed here", topic.name)
                    await store.delete(topic, mirrored=True)

    async def _bring_own_topics(self) -> None:
        """A data dir joining the cluster for the first time: its topics become the cluster's,
        led by this node (their records are here), unless the cluster has the name already
        (then the cluster's wins, and the local one is removed by the sync)."""
        me = self.node.node.node_id
        for topic in list(self.store.by_name.values()):
            if topic.internal:
                continue
            definition = topic.as_json()
            definition["leaders"] = [me] * topic.partitions
            if await self._cas(topic.name, json.dumps(definition).encode(), None):
                log.info("topic %s of this data dir joined the cluster, led here", topic.name)
            else:
                log.warning(
                    "topic %s of this data dir is replaced by the cluster's of that name",
                    topic.name,
                )
        await trio.to_thread.run_sync(self.joined_marker.touch)
