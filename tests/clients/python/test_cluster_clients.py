"""Real clients on a 3-node corral cluster (PostgreSQL started by the test): a classic group of
confluent-kafka members and a KIP-848 consumer group of confluent-kafka and Java members, their
topic's partitions led by the three nodes, consume and commit. The node coordinating both groups
is killed with kill -9: the groups go on with another coordinator (their committed offsets all
there, the KIP-848 members at their epochs), the ownership invariant holds throughout; the node
comes back on its data dir, its partitions with it, and every record is consumed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cgkit import CG_FAST, MemberProcess, committed, create_topics, members_of, produce, wait_until
from clusterkit import CorralCluster
from engines import EngineProcess, start_engine
from ownership import all_partitions, check_ownership, partitioned
from raw_groups import describe

TOPICS = {"events": 6}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    with start_engine("postgres", tmp_path_factory.mktemp("pg")) as started:
        yield started


def groups_on_one_node(cluster: CorralCluster) -> tuple[str, str]:
    """A classic and a consumer group name whose coordinator is the same node (once every shard
    is placed: on a loaded machine the last node's shards come a round or two after start)."""
    owners = cluster.wait_until_placed()
    by_node: dict[int, list[str]] = {}
    for i in range(200):
        name = f"group-{i}"
        by_node.setdefault(owners[cluster.shard_of(name)], []).append(name)
    names = max(by_node.values(), key=len)
    return names[0], names[1]


def coordinator_bootstrap(cluster: CorralCluster, group: str) -> str:
    return f"127.0.0.1:{cluster.port(cluster.coordinator_of(group))}"


def consumer_group_settled(cluster: CorralCluster, group: str, processes, partitions) -> bool:
    members = members_of(processes)
    check_ownership(members)
    if not partitioned(members, partitions):
        return False
    g = describe(coordinator_bootstrap(cluster, group), group)
    return g["error_code"] == 0 and g["group_state"] == "Stable" and len(g["members"]) == 2


def test_real_clients_carry_on_through_kill_9_of_their_coordinator_node(
    engine: EngineProcess, tmp_path: Path
) -> None:
    engine.reset()
    with CorralCluster(engine.url, 3, tmp_path, lease_ms=3000, settings=CG_FAST) as cluster:
        create_topics(cluster.bootstrap, TOPICS)
        partitions = all_partitions(TOPICS)
        produced = produce(cluster.bootstrap, TOPICS, 30)
        classic_group, consumer_group = groups_on_one_node(cluster)
        victim = cluster.coordinator_of(consumer_group)
        assert cluster.coordinator_of(classic_group) == victim
        bootstrap = cluster.bootstrap
        processes = [
            MemberProcess(
                "confluent",
                bootstrap,
                classic_group,
                [{"name": "c1", "protocol": "classic"}, {"name": "c2", "protocol": "classic"}],
                topics=list(TOPICS),
                commit=True,
            ),
            MemberProcess(
                "confluent", bootstrap, consumer_group, ["k1"], topics=list(TOPICS), commit=True
            ),
            MemberProcess(
                "java", bootstrap, consumer_group, ["k2"], topics=list(TOPICS), commit=True
            ),
        ]
        classic_members = [processes[0]["c1"], processes[0]["c2"]]
        kip848 = [processes[1]["k1"], processes[2]["k2"]]
        try:
            for members in (classic_members, kip848):
                wait_until(
                    lambda members=members: {r for m in members for r in m.records} >= produced,
                    60,
                    "every record consumed",
                )
            wait_until(
                lambda: consumer_group_settled(cluster, consumer_group, processes[1:], partitions),
                40,
                "consumer group stable",
            )
            epochs_before = {
                m["client_id"]: m["member_epoch"]
                for m in describe(coordinator_bootstrap(cluster, consumer_group), consumer_group)[
                    "members"
                ]
            }
            acked = {
                g: committed(bootstrap, g, partitions) for g in (classic_group, consumer_group)
            }
            assert all(o >= 0 for offsets in acked.values() for o in offsets.values()), acked

            cluster.nodes[victim].kill()
            cluster.wait_until_placed(timeout=20)
            assert cluster.coordinator_of(consumer_group) != victim
            for g, before in acked.items():
                now = committed(cluster.bootstrap, g, partitions)
                assert all(now[tp] >= before[tp] for tp in before), (g, before, now)
            # The KIP-848 members kept their epochs: the group's state came from the engine.
            g = describe(coordinator_bootstrap(cluster, consumer_group), consumer_group)
            assert g["error_code"] == 0
            kept = {m["client_id"]: m["member_epoch"] for m in g["members"]}
            assert kept.keys() == epochs_before.keys()
            assert all(kept[c] >= epochs_before[c] for c in kept), (epochs_before, kept)

            cluster.nodes[victim].start()  # its partitions come back with it
            more = produce(cluster.bootstrap, TOPICS, 10)
            for members in (classic_members, kip848):
                wait_until(
                    lambda members=members: (
                        {r for m in members for r in m.records} >= produced | more
                    ),
                    60,
                    "every record consumed after the failover",
                )
                check_ownership(members)
            cluster.wait_until_placed(timeout=20)
        finally:
            for process in processes:
                process.kill()
