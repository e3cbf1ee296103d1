"""One topic registry for the cluster (cluster/topics.py), in process on the memory engine: two
nodes' registries follow the engine's (the same ids, partitions, configs), a name taken by
another node answers TOPIC_ALREADY_EXISTS, partitions are given to the live nodes round robin
and keep their leader, and a node leads exactly the partitions given to it."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from pathlib import Path

import pytest
import trio
from memory_engine import MemoryEngine

from corral.broker import Broker
from corral.cluster.engine import Node
from corral.cluster.topics import assign_leaders
from corral.config.settings import Settings
from corral.errors import ErrorCode
from corral.topics.registry import TopicError


@pytest.mark.parametrize("nodes", [[1], [1, 2], [3, 1, 2], [1, 2, 3, 4], [5, 9, 2, 7, 11]])
@pytest.mark.parametrize("partitions", [1, 7, 12])
def test_partitions_are_spread_round_robin_and_the_same_on_every_node(
    nodes: list[int], partitions: int
) -> None:
    leaders = assign_leaders("orders", range(partitions), nodes)
    assert leaders == assign_leaders("orders", range(partitions), sorted(nodes))
    counts = Counter(leaders)
    assert set(counts) <= set(nodes)
    assert max(counts.values()) - min(counts.get(n, 0) for n in nodes) <= 1
    # Growing keeps the old leaders and goes on round robin.
    grown = leaders + assign_leaders("orders", range(partitions, partitions + 3), nodes)
    assert grown == assign_leaders("orders", range(partitions + 3), nodes)


def node(tmp_path: Path, node_id: int, engine: MemoryEngine) -> Broker:
    settings = Settings(
        {"log.dirs": str(tmp_path / f"n{node_id}"), "node.id": node_id, "corral.cluster.url": "m:"}
    )
    broker = Broker(settings, engine=engine)
    assert broker.cluster is not None
    broker.cluster.node = Node(node_id, "127.0.0.1", 9000 + node_id)
    broker.cluster.nodes = {n: Node(n, "127.0.0.1", 9000 + n) for n in (1, 2)}
    return broker


def test_two_nodes_share_one_registry(tmp_path: Path) -> None:
    engine = MemoryEngine()
    one, two = node(tmp_path, 1, engine), node(tmp_path, 2, engine)
    assert one.cluster is not None and two.cluster is not None
    shared_one, shared_two = one.cluster.topics, two.cluster.topics
    assert shared_one is not None and shared_two is not None

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one.topics.run)
            nursery.start_soon(two.topics.run)
            created = await one.topics.create("orders", 4, {"retention.ms": "1000"})
            await shared_two.sync()
            mirrored = two.topics.get("orders")
            assert mirrored is not None
            assert (mirrored.id, mirrored.partitions, mirrored.configs) == (
                created.id,
                4,
                {"retention.ms": "1000"},
            )
            with pytest.raises(TopicError) as refused:
                await two.topics.create("orders", 1)
            assert refused.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
            # Each partition is led by exactly one of the two nodes, the same on both.
            for p in range(4):
                assert one.leads(created, p) != two.leads(mirrored, p)
                assert shared_one.leader("orders", p) == shared_two.leader("orders", p)
            await two.topics.add_partitions(mirrored, 6)
            await two.topics.set_configs(mirrored, {"retention.ms": "2000"})
            await shared_one.sync()
            assert (created.partitions, created.configs) == (6, {"retention.ms": "2000"})
            leaders = [shared_one.leader("orders", p) for p in range(6)]
            assert leaders == assign_leaders("orders", range(6), [1, 2])
            await one.topics.delete(created)
            await shared_two.sync()
            assert one.topics.get("orders") is None and two.topics.get("orders") is None
            # A topic only one node has (from before the cluster) is not the cluster's: removed.
            await two.topics.create("stray", 1, mirrored=True)
            await shared_two.sync()
            assert two.topics.get("stray") is None
            nursery.cancel_scope.cancel()

    trio.run(scenario)
    for broker in (one, two):
        broker.logs.close()
        os.close(broker._lock_fd)


def test_a_data_dir_that_ran_alone_brings_its_topics_into_the_cluster(tmp_path: Path) -> None:
    """Its topics become the cluster's, led by its node (their records are there); a name the
    cluster has already stays the cluster's."""
    engine = MemoryEngine()
    alone = Broker(Settings({"log.dirs": str(tmp_path / "n1")}))

    async def run_alone() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(alone.topics.run)
            await alone.topics.create("legacy", 3)
            await alone.topics.create("clash", 1)
            nursery.cancel_scope.cancel()

    trio.run(run_alone)
    legacy_id = alone.topics.get("legacy").id  # type: ignore[union-attr]
    alone.logs.close()
    os.close(alone._lock_fd)
    theirs = {"name": "clash", "id": str(uuid.uuid4()), "partitions": 2, "configs": {}}
    engine.put_meta("topics/clash", json.dumps({**theirs, "leaders": [2, 2]}).encode(), None)
    one, two = node(tmp_path, 1, engine), node(tmp_path, 2, engine)
    assert one.cluster is not None and two.cluster is not None
    shared_one, shared_two = one.cluster.topics, two.cluster.topics
    assert shared_one is not None and shared_two is not None

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one.topics.run)
            nursery.start_soon(two.topics.run)
            await shared_one.sync()
            await shared_two.sync()
            for broker in (one, two):
                legacy = broker.topics.get("legacy")
                assert legacy is not None and legacy.id == legacy_id
                clash = broker.topics.get("clash")
                assert clash is not None and clash.partitions == 2
            assert [shared_two.leader("legacy", p) for p in range(3)] == [1, 1, 1]
            nursery.cancel_scope.cancel()

    trio.run(scenario)
    assert shared_one.joined_marker.exists()
    for broker in (one, two):
        broker.logs.close()
        os.close(broker._lock_fd)
