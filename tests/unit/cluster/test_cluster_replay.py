"""A shard's state lives in the cluster's engine: random group operations on one node, answered
only once the engine holds them, are exactly what another node with an empty data dir loads
from the engine, from a snapshot uploaded midway plus the batches after it, and from the batches
alone. The node that lost its shards has its next write refused by fencing (NOT_COORDINATOR) and
steps down. In process, on the in-memory engine (the same rules as etcd's and PostgreSQL's;
tests/unit/cluster/test_engines.py runs those on the real engines)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import trio
from harness import FakeClock, patched_clock
from memory_engine import MemoryEngine
from random_groups import RandomGroups, durable_state, readable

from corral.broker import Broker
from corral.clock import wall_ms
from corral.cluster.engine import Node
from corral.config.settings import Settings
from corral.groups.shard import ShardState
from corral.groups.storage import records
from corral.groups.storage.writer import WRITE_FAILED

SHARDS = 3
SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": SHARDS,
    "offsets.retention.minutes": 1,
    "offsets.retention.check.interval.ms": 1 << 40,
    "corral.coordinator.snapshot.interval.ms": 1 << 40,
    "corral.cluster.url": "memory:",
    "corral.cluster.lease.ms": 600_000,  # nothing expires unless the test says so
}


def node(data_dir: Path, node_id: int, engine: MemoryEngine) -> Broker:
    settings = Settings({**SETTINGS, "log.dirs": str(data_dir), "node.id": node_id})
    broker = Broker(settings, engine=engine)
    assert broker.cluster is not None
    broker.cluster.node = Node(node_id, "127.0.0.1", 9000 + node_id)
    return broker


def stop(broker: Broker) -> None:
    broker.logs.close()
    os.close(broker._lock_fd)


async def until(condition, what: str, seconds: float = 10) -> None:
    with trio.fail_after(seconds):
        while not condition():
            await trio.sleep(0.005)


def serving_all(broker: Broker) -> bool:
    return all(s.state is ShardState.LOADED for s in broker.groups.shards)


async def run_node(broker: Broker, nursery: trio.Nursery) -> None:
    assert broker.cluster is not None
    nursery.start_soon(broker.logs.run)
    nursery.start_soon(broker.groups.writer.run)
    nursery.start_soon(broker.cluster.run)
    await until(lambda: serving_all(broker), "the node took every shard")


def play_on(broker: Broker, engine: MemoryEngine, clock: FakeClock, seed: int, snapshot: bool):
    """Random operations on `broker`'s groups (a snapshot uploaded midway if `snapshot`); returns
    the durable state once every write is answered, and the operation counts."""
    rng = random.Random(seed)

    async def play() -> tuple[list, dict]:
        async with trio.open_nursery() as nursery:
            await run_node(broker, nursery)
            loaded = durable_state(broker)
            player = RandomGroups(broker, clock, rng)
            for i in range(1200):
                player.step()
                if rng.random() < 0.15:
                    await player.settle()
                if snapshot and i == 600:
                    uploaded = dict(engine.snapshots)
                    await broker.groups.take_snapshot()
                    await until(lambda: engine.snapshots != uploaded, "snapshots uploaded")
            await player.settle()
            nursery.cancel_scope.cancel()
        return loaded, durable_state(broker), player.counts

    return trio.run(play)


@pytest.mark.parametrize("snapshot", [True, False], ids=["snapshot+batches", "batches"])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_state_follows_its_shards_through_two_takeovers(
    tmp_path: Path, seed: int, snapshot: bool
) -> None:
    """Node 1 plays, node 2 (empty data dir) takes every shard from the engine and plays on,
    node 3 takes them from node 2: each loads exactly what the one before acknowledged. Node 2's
    snapshot lies after the batches it adopted from epoch 1, so uploading it drops those."""
    engine = MemoryEngine()
    with patched_clock(FakeClock()) as clock:
        before: list = []
        kinds: set[str] = set()
        for node_id in (1, 2, 3):
            engine.leases.clear()  # the previous node is gone: its leases expired
            broker = node(tmp_path / f"n{node_id}", node_id, engine)
            loaded, live, counts = play_on(broker, engine, clock, seed + node_id, snapshot)
            stop(broker)
            assert readable(loaded) == readable(before), f"node {node_id} loaded"
            assert min(counts.values()) > 10, counts
            before = live
            kinds |= {type(records.decode(k, v)).__name__ for k, v in live}
    assert kinds == {"OffsetCommits", "GroupMetadata"}, kinds
    assert engine.epochs == {shard: 3 for shard in range(SHARDS)}
    if snapshot:
        # Only node 3's batches after its snapshot and nothing older stay in the engine.
        assert all(at[0] == 3 for log in engine.batches.values() for at in log)


def test_a_node_whose_shard_was_taken_is_fenced_and_steps_down(tmp_path: Path) -> None:
    engine = MemoryEngine()
    with patched_clock(FakeClock()):
        first = node(tmp_path / "n1", 1, engine)

        async def scenario() -> None:
            async with trio.open_nursery() as nursery:
                await run_node(first, nursery)
                offsets = first.groups.offsets
                done = offsets.commit("g", [("t", [(0, 5, -1, "")])], wall_ms(), -1)
                await until(lambda: done.resolved, "the commit answered")
                assert done.value == 0
                # Another node takes the group's shard (the first one paused past its lease).
                shard = first.groups.writer.partition_of("g")
                taken = engine.acquire(shard, 2, 600_000) if engine.leases.pop(shard) else None
                assert taken is not None and taken.epoch == 2
                refused = offsets.commit("g", [("t", [(0, 6, -1, "")])], wall_ms(), -1)
                await until(lambda: refused.resolved, "the fenced commit answered")
                assert refused.value == WRITE_FAILED
                await until(
                    lambda: first.groups.shards[shard].state is ShardState.UNLOADED, "stepped down"
                )
                assert first.groups.shards[shard].availability() != 0
                # Nothing of the refused write reached the engine.
                assert all(at[0] == 1 for at in engine.batches[shard])
                nursery.cancel_scope.cancel()

        trio.run(scenario)
        stop(first)


def test_a_write_is_answered_only_once_the_engine_holds_it(tmp_path: Path) -> None:
    """While the engine is unreachable a commit waits (retried, not failed); once it is back
    the commit is in the engine, then answered."""
    engine = MemoryEngine()
    with patched_clock(FakeClock()):
        first = node(tmp_path / "n1", 1, engine)

        async def scenario() -> None:
            async with trio.open_nursery() as nursery:
                await run_node(first, nursery)
                shard = first.groups.writer.partition_of("g")
                engine.down = True
                done = first.groups.offsets.commit("g", [("t", [(0, 7, -1, "")])], wall_ms(), -1)
                await trio.sleep(0.5)
                assert not done.resolved, "answered while the engine could not hold it"
                assert not engine.batches.get(shard)
                engine.down = False
                await until(lambda: done.resolved, "answered once the engine is back")
                assert done.value == 0
                assert len(engine.batches[shard]) == 1
                nursery.cancel_scope.cancel()

        trio.run(scenario)
        stop(first)
