"""One corral node of a cluster: its registration, the shards it leases, and what it tells
clients about the others (docs/cluster.md).

Every third of `corral.cluster.lease.ms` the node renews its registration and its leases, reads
the live nodes and the shards' owners, and moves toward the placement every node computes alike
(placement.py: rendezvous hashing over the live nodes):

- a shard it should own that nobody holds: it takes the lease (the epoch bumps), loads the
  shard's snapshot and log from the engine into its local `__consumer_offsets` partition, and
  loads the shard from there as a single broker would (`GroupCoordinator.load_shard`);
- a shard it holds that another live node should own: it unloads it and releases the lease,
  and that node takes it at its next round;
- a lease it lost (renewal refused, a write fenced, or no renewal for a whole lease: a paused
  process) makes it step down from the shard at once: its groups answer NOT_COORDINATOR and
  clients find the new coordinator. While the last renewal is older than the lease, requests
  are answered NOT_COORDINATOR even before the loop runs again (`serves`).

FindCoordinator answers the owner of the group's shard and Metadata lists the live nodes, from
what the last round read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from corral.cluster.engine import Engine, EngineError, Lease, Node, ShardImage
from corral.cluster.placement import preferred_owner, preferred_shards
from corral.groups.storage import snapshot
from corral.groups.storage.placement import OFFSETS_TOPIC

if TYPE_CHECKING:
    from corral.cluster.replication import ReplicatedLog
    from corral.cluster.topics import ClusterTopics
    from corral.groups.coordinator import GroupCoordinator
    from corral.topics.registry import Topic, TopicStore

log = logging.getLogger("corral.cluster")


class ClusterNode:
    def __init__(self, engine: Engine, node: Node, lease_ms: int):
        self.engine = engine
        self.node = node
        self.lease_ms = lease_ms
        # What the last round read: live nodes by id, shard owners.
        self.nodes: dict[int, Node] = {node.node_id: node}
        self.owners: dict[int, Lease] = {}
        # The shards this node holds (loaded or loading).
        self.held: dict[int, Lease] = {}
        # Local monotonic time of the last renewal the engine confirmed.
        self.renewed_at = -float("inf")
        # Per held shard: the local offset its adoption ended at (snapshots below it keep the
        # engine's older batches, see `_upload_snapshot`).
        self._adopted_at: dict[int, int] = {}
        self._coordinator: GroupCoordinator | None = None
        self._writer: ReplicatedLog | None = None
        self._nursery: trio.Nursery | None = None
        self._wake = trio.Event()
        self.topics: ClusterTopics | None = None
        # The cluster's id: the first node's own, agreed through the engine at the first round.
        self.cluster_id = ""
        self.on_cluster_id: Callable[[str], None] = lambda _cluster_id: None
        self._cluster_id_agreed = False

    def share_topics(self, store: TopicStore) -> ClusterTopics:
        """The cluster's topic registry, mirrored into `store` (topics.py)."""
        from corral.cluster.topics import ClusterTopics

        self.topics = ClusterTopics(self.engine, store, self)
        return self.topics

    def leads(self, topic: Topic, partition: int) -> bool:
        """Whether this node leads the partition: a shared topic's at creation, the offsets
        topic's where its shard is held, the analytics topic's always."""
        if topic.internal:
            if topic.name == OFFSETS_TOPIC:
                return partition in self.held
            return True
        return self.topics is not None and self.topics.leads(topic, partition)

    def leader_of(self, topic: Topic, partition: int) -> int | None:
        """The node leading the partition, live or not (None: none)."""
        if topic.internal:
            if topic.name == OFFSETS_TOPIC:
                lease = self.owners.get(partition)
                return None if lease is None else lease.node_id
            return self.node.node_id
        return None if self.topics is None else self.topics.leader(topic.name, partition)

    def attach(self, coordinator: GroupCoordinator, writer: ReplicatedLog) -> None:
        self._coordinator, self._writer = coordinator, writer
        writer.on_fenced = self._fenced
        coordinator.shared.serves = self.serves
        coordinator.on_snapshot.append(self._snapshot_written)

    # What clients are told

    def serves(self, shard: int) -> bool:
        """Whether this node may answer for `shard` now: it holds the lease and renewed it
        within the lease time (a process paused past it has lost it, whatever it remembers)."""
        return shard in self.held and time.monotonic() - self.renewed_at < self.lease_ms / 1000

    def owner_of(self, shard: int) -> Node | None:
        lease = self.owners.get(shard)
        return None if lease is None else self.nodes.get(lease.node_id)

    def live_nodes(self) -> list[Node]:
        return [self.nodes[n] for n in sorted(self.nodes)]

    # The loop

    async def run(self) -> None:
        coordinator, writer = self._coordinator, self._writer
        assert coordinator is not None and writer is not None, "attach first"
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.topics is not None:
                    nursery.start_soon(self.topics.run)
                while True:
                    try:
                        await self._round()
                    except EngineError as e:
                        log.warning("cluster engine unreachable (retrying): %s", e)
                    except Exception:
                        # A bug: say so loudly; the leases and fencing keep the others safe.
                        log.exception("cluster round failed (retrying)")
                    self._step_down_if_stale()
                    with trio.move_on_after(self.lease_ms / 3000):
                        await self._wake.wait()
                    self._wake = trio.Event()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await self._leave()

    async def _round(self) -> None:
        engine, ttl = self.engine, self.lease_ms
        if not self._cluster_id_agreed:
            await self._agree_on_cluster_id()
        asked = time.monotonic()
        await trio.to_thread.run_sync(engine.register, self.node, ttl)
        if self.held:
            kept = await trio.to_thread.run_sync(engine.renew, list(self.held.values()), ttl)
            for shard in set(self.held) - {lease.shard for lease in kept}:
                await self.step_down(shard, "its lease was lost")
        self.renewed_at = asked  # the leases last from before the request, not after
        nodes = await trio.to_thread.run_sync(engine.live_nodes)
        self.nodes = {n.node_id: n for n in nodes} | {self.node.node_id: self.node}
        self.owners = await trio.to_thread.run_sync(engine.owners)
        shards = len(self._shards())
        wanted = preferred_shards(shards, self.node.node_id, self.nodes)
        for shard in sorted(wanted - set(self.held)):
            if shard not in self.owners:
                await self._take(shard)
        for shard in sorted(set(self.held) - wanted):
            owner = preferred_owner(shard, self.nodes)
            if owner is not None and owner != self.node.node_id:
                await self._hand_over(shard)

    async def _agree_on_cluster_id(self) -> None:
        """Every node answers the same cluster id (Metadata, DescribeCluster): the first node's,
        stored in the engine by compare-and-set."""
        engine, proposed = self.engine, self.cluster_id.encode()
        await trio.to_thread.run_sync(engine.put_meta, "cluster_id", proposed, None)
        stored = await trio.to_thread.run_sync(engine.get_meta, "cluster_id")
        agreed = stored.get("cluster_id", proposed).decode()
        if agreed != self.cluster_id:
            log.info("joined cluster %s (this data dir's own id was %s)", agreed, self.cluster_id)
            self.cluster_id = agreed
        self.on_cluster_id(agreed)
        self._cluster_id_agreed = True

    def _shards(self) -> list[int]:
        assert self._coordinator is not None
        return [s.partition for s in self._coordinator.shards]

    def _step_down_if_stale(self) -> None:
        if self.held and time.monotonic() - self.renewed_at >= self.lease_ms / 1000:
            for shard in list(self.held):
                self._spawn(self.step_down, shard, "no renewal for a whole lease")

    def _spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)

    # Taking, handing over, stepping down

    async def _take(self, shard: int) -> None:
        lease = await trio.to_thread.run_sync(
            self.engine.acquire, shard, self.node.node_id, self.lease_ms
        )
        if lease is None:
            return
        started = time.monotonic()
        self.held[shard] = lease
        self.owners[shard] = lease
        try:
            image = await trio.to_thread.run_sync(self.engine.load, shard)
            await self._adopt(lease, image)
        except BaseException:
            self.held.pop(shard, None)
            assert self._writer is not None
            self._writer.give_up(shard, "loading from the engine failed")
            raise
        assert self._coordinator is not None
        groups = await self._coordinator.load_shard(shard)
        log.info(
            "took coordinator shard %d (epoch %d): %d groups in %.3fs",
            shard,
            lease.epoch,
            groups,
            time.monotonic() - started,
        )

    async def _adopt(self, lease: Lease, image: ShardImage) -> None:
        """Makes the local partition and snapshot file of the shard the engine's image: the
        snapshot file (replay from local offset 0), then the engine's batches after it appended
        to an emptied partition."""
        coordinator, writer = self._coordinator, self._writer
        assert coordinator is not None and writer is not None
        shard = lease.shard
        path = coordinator.snapshot_file(shard)
        records: list[tuple[bytes, bytes]] = []
        if image.snapshot is not None:
            records = list(snapshot.parse(image.snapshot)[1])

        def rewrite_local() -> int:
            snapshot.write(path, {shard: 0}, records)
            writer.logs.recreate(writer.topic, shard)
            for _position, data in image.batches:
                result, _ = writer.logs.append(writer.topic, shard, data)
                if result.error_code:
                    raise EngineError(f"the engine's batches of shard {shard} do not append")
            return writer.logs.offsets(writer.topic, shard)[1]

        end = await trio.to_thread.run_sync(rewrite_local)
        await writer.logs.flushed()
        self._adopted_at[shard] = end
        writer.adopt(lease, end)

    async def _hand_over(self, shard: int) -> None:
        """Gives the shard to the node that should own it: unloaded, its last writes in the
        engine, then the lease released."""
        lease = self.held.get(shard)
        if lease is None:
            return
        assert self._coordinator is not None and self._writer is not None
        await self._coordinator.unload_shard(shard)
        self._writer.give_up(shard, "handed over")
        self.held.pop(shard, None)
        self.owners.pop(shard, None)  # FindCoordinator: unknown until the next round reads it
        try:
            await trio.to_thread.run_sync(self.engine.release, lease)
        except EngineError:
            pass  # it expires instead
        log.info("handed coordinator shard %d over", shard)

    async def step_down(self, shard: int, why: str) -> None:
        if self.held.pop(shard, None) is None:
            return
        log.warning("stepping down from coordinator shard %d: %s", shard, why)
        self.owners.pop(shard, None)
        assert self._coordinator is not None and self._writer is not None
        self._writer.give_up(shard, why)
        await self._coordinator.unload_shard(shard)

    def _fenced(self, shard: int) -> None:
        self._spawn(self.step_down, shard, "the engine fenced its write")
        self._wake.set()

    async def _leave(self) -> None:
        """A clean shutdown: the shards released and the node deregistered, so that the others
        take them at their next round instead of after the lease."""
        for lease in list(self.held.values()):
            try:
                await trio.to_thread.run_sync(self.engine.release, lease)
            except EngineError:
                pass
        self.held.clear()
        try:
            await trio.to_thread.run_sync(self.engine.deregister, self.node.node_id)
        except EngineError:
            pass

    # Snapshots into the engine

    def _snapshot_written(self, shard: int, position: int) -> None:
        if shard in self.held and self._nursery is not None:
            self._nursery.start_soon(self._upload_snapshot, shard, position)

    async def _upload_snapshot(self, shard: int, position: int) -> None:
        """Stores the shard's new local snapshot in the engine, which drops the batches before
        it. A snapshot below the adoption point is not uploaded: the batches adopted from older
        epochs sit before it in the engine's order but after its position locally."""
        lease = self.held.get(shard)
        if lease is None or position < self._adopted_at.get(shard, 0):
            return
        assert self._coordinator is not None
        path = self._coordinator.snapshot_file(shard)
        try:
            data = await trio.to_thread.run_sync(path.read_bytes)
            # The file may be newer than the call: its own header says where it stands.
            position = snapshot.parse(data)[0].get(shard, position)
            await trio.to_thread.run_sync(
                self.engine.put_snapshot, lease, (lease.epoch, position), data
            )
        except OSError as e:
            log.warning("shard %d: reading its snapshot failed: %s", shard, e)
        except EngineError as e:
            log.warning("shard %d: storing its snapshot in the engine failed: %s", shard, e)
        except Exception as e:  # Fenced: the loop steps down
            log.warning("shard %d: snapshot refused: %s", shard, e)
            if self.held.get(shard) is lease:
                await self.step_down(shard, "the engine fenced its snapshot")
