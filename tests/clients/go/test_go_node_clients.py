"""The Go and Node clients against a real corral: franz-go (kgo), sarama and kafkajs (tests/clients/go,
tests/clients/node, built by tests/kits/polyglot.py). Each produces with its own producer (franz-go's is
idempotent: InitProducerId) and consumes in groups of its own and mixed with the other clients:
classic eager, cooperative and static members, KIP-848 for franz-go, over SASL_SSL with SCRAM.

Every group runs the ownership invariant checker (tests/kits/ownership.py) over what each member
reported in its rebalance callbacks: never one partition owned by two members, every partition
owned once when the group is stable. Members run in child processes: a kill is a real crash.
"""

from __future__ import annotations

import time

import pytest
from cgkit import (
    CG_FAST,
    FAST_GROUPS,
    MemberProcess,
    members_of,
    stop_processes,
    wait_stable,
    wait_until,
)
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from ownership import all_partitions, check_ownership, partitioned
from polyglot import CLIENTS, produce
from raw_groups import describe_groups_raw

# Classic members: sessions of 3 s, heartbeats every 300 ms (a crash is noticed after 3 s).
SESSION = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 300}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from conftest import CorralProcess

    broker = CorralProcess(tmp_path_factory.mktemp("polyglot"), {**FAST_GROUPS, **CG_FAST})
    broker.start()
    yield broker
    broker.stop()


def create_topic(broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=10)


def committed(broker, group: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result(timeout=10)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def consumed(members) -> set[tuple[str, int, int]]:
    return {r for m in members for r in m.records}


def classic_stable(broker, group: str, processes, partitions) -> dict | None:
    """DescribeGroups of a settled classic group: Stable, one member per live member, each
    holding (in the coordinator's view) what its client reports, every partition owned once."""
    members = members_of(processes)
    check_ownership(members)
    live = [m for m in members if m.live]
    if not partitioned(members, partitions):
        return None
    g = describe_groups_raw(broker.bootstrap, group)
    if g["group_state"] != "Stable" or len(g["members"]) != len(live):
        return None
    by_client = {m["client_id"]: m["assigned"] for m in g["members"]}
    return g if all(by_client.get(m.name) == m.owned for m in live) else None


def wait_classic_stable(broker, group: str, processes, partitions, timeout: float = 30) -> dict:
    found = []

    def settled() -> bool:
        g = classic_stable(broker, group, processes, partitions)
        found.append(g)
        return g is not None

    try:
        wait_until(settled, timeout, f"classic group {group} stable")
    except AssertionError as e:
        logs = "".join(f"\n--- {p.client} log\n{p.log_tail()}" for p in processes)
        raise AssertionError(
            f"{e}\nmembers: {members_of(processes)}\n"
            f"describe: {describe_groups_raw(broker.bootstrap, group)}{logs}"
        ) from None
    return found[-1]


@pytest.mark.parametrize("client", CLIENTS)
def test_one_client_produces_and_consumes_in_a_group(broker, client):
    """Produce with the client; three members (three processes) consume everything and commit;
    a clean leave moves partitions at once, a crash after the session timeout."""
    topic, group, count = f"own-{client}", f"own-{client}", 60
    create_topic(broker, topic, 6)
    assert produce(client, {"bootstrap": broker.bootstrap, "topic": topic, "count": count}) == {
        "produced": count
    }
    partitions = all_partitions({topic: 6})
    processes = [
        MemberProcess(client, broker.bootstrap, group, [name], topics=[topic], **SESSION)
        for name in ("a", "b", "c")
    ]
    try:
        g = wait_classic_stable(broker, group, processes, partitions)
        expected = "RoundRobinAssigner" if client == "kafkajs" else "range"
        assert g["protocol_data"] == expected
        assert all(len(m.owned) == 2 for m in members_of(processes))
        members = members_of(processes)
        wait_until(lambda: len(consumed(members)) == count, 30, f"{count} records consumed", [])
        assert {(t, p) for t, p, _ in consumed(members)} <= partitions
        # Commits are synchronous before the records are reported: all of them are in.
        ends: dict[int, int] = {}
        for _, p, offset in consumed(members):
            ends[p] = max(ends.get(p, 0), offset + 1)
        assert committed(broker, group, topic, 6) == ends

        leaving, crashing, last = processes
        start = time.monotonic()
        leaving.close_all()
        wait_classic_stable(broker, group, processes, partitions, timeout=15)
        assert time.monotonic() - start < 3, "a leave must not wait for the session timeout"
        start = time.monotonic()
        crashing.kill()
        wait_classic_stable(broker, group, processes, partitions, timeout=20)
        assert 2.5 < time.monotonic() - start < 3 + 5, (
            "a crash is noticed by the 3 s session timeout"
        )
        assert last["c"].owned == partitions
        assert check_ownership(members) > 0
    finally:
        stop_processes(processes)


def test_mixed_classic_group_agrees_on_range(broker):
    """franz-go, sarama and librdkafka in one eager group: the protocol all offer (range)."""
    topic, group = "mixed-classic", "mixed-classic"
    create_topic(broker, topic, 9)
    partitions = all_partitions({topic: 9})
    processes = [
        MemberProcess(
            client,
            broker.bootstrap,
            group,
            [client],
            topics=[topic],
            protocol="classic",
            strategy="range",
            **SESSION,
        )
        for client in ("franz-go", "sarama", "confluent")
    ]
    try:
        g = wait_classic_stable(broker, group, processes, partitions)
        assert g["protocol_data"] == "range"
        assert sorted(len(m.owned) for m in members_of(processes)) == [3, 3, 3]
        processes[1].close_all()
        wait_classic_stable(broker, group, processes, partitions)
    finally:
        stop_processes(processes)


def test_cooperative_members_keep_their_partitions(broker):
    """Cooperative-sticky franz-go, sarama and librdkafka members joining one after the other:
    partitions move incrementally, a member never gives up what it keeps."""
    topic, group = "cooperative", "cooperative"
    create_topic(broker, topic, 12)
    partitions = all_partitions({topic: 12})
    processes = []
    try:
        for client in ("franz-go", "sarama", "confluent"):
            processes.append(
                MemberProcess(
                    client,
                    broker.bootstrap,
                    group,
                    [client],
                    topics=[topic],
                    protocol="classic",
                    strategy="cooperative-sticky",
                    **SESSION,
                )
            )
            g = wait_classic_stable(broker, group, processes, partitions)
            assert g["protocol_data"] == "cooperative-sticky"
        members = members_of(processes)

        def balanced() -> bool:
            sizes = sorted(len(m.owned) for m in members)
            return sizes == [4, 4, 4] and classic_stable(broker, group, processes, partitions)

        # Seen once on a loaded machine: [2, 4, 4] read just after the group was found settled
        # with every partition owned (no later rebalance in corral's log): waited for, and on
        # failure each member's timeline says which client moved.
        deadline = time.monotonic() + 30
        while not balanced():
            assert time.monotonic() < deadline, [(m.name, m.timeline, m.whys) for m in members]
            time.sleep(0.05)
        # Incremental: the first member's ownership only ever shrank to what it kept, never to nothing.
        first = members[0]
        assert all(owned for _, owned in first.timeline[1:]), first.timeline
        assert first.owned <= first.timeline[0][1]
    finally:
        stop_processes(processes)


def test_static_members_restart_without_a_rebalance(broker):
    """A static member (group.instance.id) of franz-go and of sarama crashes and comes back
    within the session timeout: same partitions, same generation."""
    topic, group = "static", "static"
    create_topic(broker, topic, 6)
    partitions = all_partitions({topic: 6})
    settings = {
        "protocol": "classic",
        "strategy": "range",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 300,
    }
    specs = {
        "franz-go": {"name": "f", "instance_id": "static-f"},
        "sarama": {"name": "s", "instance_id": "static-s"},
    }
    processes = [
        MemberProcess(c, broker.bootstrap, group, [spec], topics=[topic], **settings)
        for c, spec in specs.items()
    ]
    retired = []
    try:
        before = wait_classic_stable(broker, group, processes, partitions)
        for i, (client, spec) in enumerate(specs.items()):
            old = processes[i]
            owned = old[spec["name"]].owned
            old.kill()
            retired.extend(members_of([old]))
            processes[i] = MemberProcess(
                client, broker.bootstrap, group, [spec], topics=[topic], **settings
            )
            after = wait_classic_stable(broker, group, processes, partitions, timeout=20)
            assert processes[i][spec["name"]].owned == owned
            assert after["protocol_data"] == before["protocol_data"]
            assert sorted(m["group_instance_id"] for m in after["members"]) == [
                "static-f",
                "static-s",
            ]
        check_ownership([*retired, *members_of(processes)])
    finally:
        stop_processes(processes)


def test_franz_go_kip848_members_with_librdkafka(broker):
    """franz-go's KIP-848 consumer (ServerSideBalancer) beside librdkafka's, server-side uniform
    assignor: epochs, reconciliation, a leave."""
    topic, group = "kip848", "kip848"
    create_topic(broker, topic, 8)
    partitions = all_partitions({topic: 8})
    processes = [
        MemberProcess(
            "franz-go", broker.bootstrap, group, ["f1"], topics=[topic], protocol="consumer"
        ),
        MemberProcess(
            "franz-go", broker.bootstrap, group, ["f2"], topics=[topic], protocol="consumer"
        ),
        MemberProcess("confluent", broker.bootstrap, group, ["c1"], topics=[topic]),
    ]
    try:
        g = wait_stable(broker.bootstrap, group, processes, partitions)
        assert {m["member_epoch"] for m in g["members"]} == {g["group_epoch"]}
        assert sorted(len(m["assignment"]) for m in g["members"]) == [2, 3, 3]
        processes[0].close_all()
        g = wait_stable(broker.bootstrap, group, processes, partitions)
        assert sorted(len(m["assignment"]) for m in g["members"]) == [4, 4]
    finally:
        stop_processes(processes)
