"""Coordinator shards (src/corral/groups/shard.py): one per `__consumer_offsets` partition, each
unloaded and loaded again while the broker runs, as Kafka moves a coordinator. Meanwhile its
groups answer NOT_COORDINATOR (unloaded) as Kafka's do; loaded again from its snapshot and its
partition's log, every group, member, generation and committed offset is back, and real clients
(confluent-kafka and Java, classic and consumer protocol) carry on consuming.

The broker runs in this process (its coordinator is the test's to drive); the clients run in
child processes and reach it over TCP.
"""

from __future__ import annotations

import os
import time

import trio
from cgkit import CG_FAST, MemberProcess, committed, create_topics, members_of, wait_until
from cgkit import wait_stable as wait_consumer_group_stable
from confluent_kafka import Producer
from ownership import all_partitions, check_ownership, partitioned
from rawwire import RawClient
from wire_groups import commit, fetch, heartbeat, join, sync

from corral.config.settings import Settings
from corral.errors import ErrorCode
from corral.groups.storage import snapshot
from corral.network.apis import ApiKey
from corral.server import Server


class Served:
    """A broker served by the trio loop of this process, for a scenario running in a thread."""

    def __init__(self, server: Server, port: int):
        self.server, self.port = server, port
        self.bootstrap = f"127.0.0.1:{port}"

    @property
    def groups(self):
        return self.server.broker.groups

    def partition_of(self, group_id: str) -> int:
        return self.groups.writer.partition_of(group_id)

    def unload(self, partition: int) -> int:
        return trio.from_thread.run(self.groups.unload_shard, partition)

    def load(self, partition: int) -> int:
        return trio.from_thread.run(self.groups.load_shard, partition)


def serve(tmp_path, scenario, timeout: float, **settings) -> None:
    config = Settings(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "d"),
            "offsets.topic.num.partitions": 8,
            **settings,
        }
    )
    config.check_bounds()
    server = Server(config)

    async def main():
        with trio.fail_after(timeout):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(server.serve)
                try:
                    await trio.to_thread.run_sync(scenario, Served(server, port))
                finally:
                    nursery.cancel_scope.cancel()

    trio.run(main)
    # A process holds its data dir's lock until it exits; this one serves the dir again.
    os.close(server.broker._lock_fd)


def test_an_unloaded_shard_answers_not_coordinator_and_comes_back_whole(tmp_path):
    """Raw frames: a classic group with committed offsets; its shard unloaded, every group API
    answers NOT_COORDINATOR (and the network thread answers nothing for it); loaded again, the
    same member heartbeats at the same generation and the offsets are back. A group of another
    shard is served throughout."""

    def scenario(broker: Served) -> None:
        with RawClient(broker.port) as c:
            create = {
                "name": "t",
                "num_partitions": 2,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            c.call(ApiKey.CREATE_TOPICS, 5, {"topics": [create], "timeout_ms": 10000})
            groups = [f"g{i}" for i in range(40)]
            g = groups[0]
            other = next(x for x in groups if broker.partition_of(x) != broker.partition_of(g))
            joined = join(c, g, session_ms=30000)
            member, generation = joined["member_id"], joined["generation_id"]
            assert sync(c, g, generation, member, [(member, b"")])["error_code"] == 0
            assert commit(c, g, generation, member, [("t", 0, 41), ("t", 1, 42)]) == [0, 0]
            assert commit(c, other, -1, "", [("t", 0, 7)]) == [0]
            partition = broker.partition_of(g)

            assert broker.unload(partition) >= 1
            not_coordinator = ErrorCode.NOT_COORDINATOR
            assert heartbeat(c, g, generation, member) == not_coordinator
            assert commit(c, g, generation, member, [("t", 0, 99)]) == [not_coordinator]
            fetched = c.call(ApiKey.OFFSET_FETCH, 7, {"group_id": g, "topics": None})
            assert fetched["error_code"] == not_coordinator
            assert join(c, g, session_ms=30000)["error_code"] == not_coordinator
            described = c.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [g]})["groups"][0]
            assert described["error_code"] == not_coordinator
            listed = c.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})["groups"]
            assert g not in {x["group_id"] for x in listed}
            # Another shard's group is served meanwhile.
            assert [o for _, o, _ in fetch(c, other, "t", [0])] == [7]
            assert commit(c, other, -1, "", [("t", 0, 8)]) == [0]

            assert broker.load(partition) >= 1
            assert heartbeat(c, g, generation, member) == ErrorCode.NONE
            assert [o for _, o, _ in fetch(c, g, "t", [0, 1])] == [41, 42]
            assert commit(c, g, generation, member, [("t", 0, 43)]) == [0]
            assert [o for _, o, _ in fetch(c, g, "t", [0])] == [43]
            assert [o for _, o, _ in fetch(c, other, "t", [0])] == [8]

    serve(tmp_path, scenario, 60, **{"group.initial.rebalance.delay.ms": 0})


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> set:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    acked: set[tuple[str, int, int]] = set()

    def done(err, msg):
        assert err is None, err
        acked.add((msg.topic(), msg.partition(), msg.offset()))

    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p, on_delivery=done)
    assert producer.flush(30) == 0
    return acked


def consumed(members) -> set:
    return {r for m in members for r in m.records}


def test_real_clients_keep_consuming_across_an_unload_and_reload(tmp_path):
    """A classic group (confluent-kafka and Java, classic protocol) and a consumer group
    (confluent-kafka and Java, KIP-848) consume one topic; both groups' shards are unloaded and
    loaded again twice. The members carry on: every record produced before, between and after is
    consumed, the committed offsets end at the log end (none lost), and no partition was ever
    owned by two members of a group."""
    topic, partitions = "shards", 4
    classic = [
        {"name": f"k{i}", "protocol": "classic", "session_timeout_ms": 10000} for i in range(2)
    ]

    def scenario(broker: Served) -> None:
        bootstrap = broker.bootstrap
        create_topics(bootstrap, {topic: partitions})
        tps = all_partitions({topic: partitions})
        classic_procs = [
            MemberProcess("confluent", bootstrap, "shard-classic", [classic[0]], topics=[topic]),
            MemberProcess("java", bootstrap, "shard-classic", [classic[1]], topics=[topic]),
        ]
        consumer_procs = [
            MemberProcess("confluent", bootstrap, "shard-consumer", ["c0"], topics=[topic]),
            MemberProcess("java", bootstrap, "shard-consumer", ["j0"], topics=[topic]),
        ]
        classic_members, consumer_members = members_of(classic_procs), members_of(consumer_procs)
        try:
            wait_consumer_group_stable(bootstrap, "shard-consumer", consumer_procs, tps, timeout=60)
            wait_until(
                lambda: check_ownership(classic_members) >= 0 and partitioned(classic_members, tps),
                60,
                "the classic group owns every partition once",
            )
            expected = produce(bootstrap, topic, partitions, 10)
            for members in (classic_members, consumer_members):
                wait_until(lambda m=members: expected <= consumed(m), 30, "records consumed")

            shards = {broker.partition_of("shard-classic"), broker.partition_of("shard-consumer")}
            everyone = classic_members + consumer_members
            for _ in range(2):
                groups = ("shard-classic", "shard-consumer")
                offsets = {g: committed(bootstrap, g, tps) for g in groups}
                changes = {m.name: m.changes for m in everyone}
                for p in shards:
                    assert broker.unload(p) >= 1
                time.sleep(1.5)  # the members meet NOT_COORDINATOR and look for the coordinator
                expected |= produce(bootstrap, topic, partitions, 5)
                for p in shards:
                    assert broker.load(p) >= 1
                # Loaded whole: the offsets committed before are there (a commit may have come
                # since, never a step back), and nobody was rebalanced.
                for g in groups:
                    now = committed(bootstrap, g, tps)
                    assert all(now[tp] >= offsets[g][tp] >= 0 for tp in tps), (g, offsets[g], now)
                assert {m.name: m.changes for m in everyone} == changes, "a member rebalanced"
                expected |= produce(bootstrap, topic, partitions, 5)
                for members in (classic_members, consumer_members):
                    wait_until(
                        lambda m=members: expected <= consumed(m) and check_ownership(m) >= 0,
                        60,
                        "every record consumed after the reload",
                    )
            ends = {
                (t, p): max(o for t2, p2, o in expected if (t2, p2) == (t, p)) + 1 for t, p in tps
            }
            for group in ("shard-classic", "shard-consumer"):
                wait_until(
                    lambda g=group: committed(bootstrap, g, tps) == ends,
                    30,
                    f"{group} committed up to the log end",
                )
            for process in classic_procs + consumer_procs:
                process.close_all()
            check_ownership(classic_members)
            check_ownership(consumer_members)
        finally:
            for process in classic_procs + consumer_procs:
                process.kill()

    serve(tmp_path, scenario, 240, **{k: str(v) for k, v in CG_FAST.items()})


def test_a_data_dir_with_the_single_snapshot_of_before_shards_loads_and_moves_on(tmp_path, caplog):
    """A data dir written before shards holds one snapshot of every partition
    (`__consumer_offsets.snapshot`): it is loaded (offsets and groups of every shard back, the
    log after its positions replayed), then replaced by one snapshot per shard."""
    data = tmp_path / "d"
    groups = [f"legacy-{i}" for i in range(12)]
    settings = {"corral.coordinator.snapshot.interval.ms": "200"}

    def first(broker: Served) -> None:
        with RawClient(broker.port) as c:
            create = {
                "name": "t",
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            c.call(ApiKey.CREATE_TOPICS, 5, {"topics": [create], "timeout_ms": 10000})
            for i, g in enumerate(groups):
                assert commit(c, g, -1, "", [("t", 0, 100 + i)]) == [0]

    serve(tmp_path, first, 60, **settings)  # a clean stop: one snapshot per shard
    shard_files = sorted(data.glob("__consumer_offsets-*.snapshot"))
    assert len(shard_files) == 8, shard_files
    positions, pairs = {}, []
    for path in shard_files:
        shard_positions, records = snapshot.read(path)
        positions.update(shard_positions)
        pairs.extend(records)
        path.unlink()
    snapshot.write(data / snapshot.FILE_NAME, positions, pairs)
    caplog.set_level("INFO", logger="corral.groups")
    caplog.clear()

    def second(broker: Served) -> None:
        with RawClient(broker.port) as c:
            for i, g in enumerate(groups):
                assert [o for _, o, _ in fetch(c, g, "t", [0])] == [100 + i]
            assert commit(c, groups[0], -1, "", [("t", 0, 500)]) == [0]
        wait_until(
            lambda: (
                not (data / snapshot.FILE_NAME).exists()
                and len(list(data.glob("__consumer_offsets-*.snapshot"))) == 8
            ),
            10,
            "one snapshot per shard in place of the single one",
        )

    serve(tmp_path, second, 60, **settings)
    loaded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("loaded ")]
    assert loaded and "12 records from the snapshot, 0 from" in loaded[0], loaded

    def third(broker: Served) -> None:
        with RawClient(broker.port) as c:
            assert [o for _, o, _ in fetch(c, groups[0], "t", [0])] == [500]
            for i, g in enumerate(groups[1:], 1):
                assert [o for _, o, _ in fetch(c, g, "t", [0])] == [100 + i]

    serve(tmp_path, third, 60, **settings)
