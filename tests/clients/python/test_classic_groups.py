"""Classic consumer groups with real clients: assignment, failure, leave, static members, mixes.

Members run as child processes (tests/kits/group_member.py) so that a crash is a real SIGKILL. The
tests check assignments through the clients' own callbacks and the group through admin clients.
"""

from __future__ import annotations

import time

import pytest
from cgkit import FAST_GROUPS, Member, assigned_once, stop_all, wait_until
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 12


@pytest.fixture
def broker(corral_factory):
    broker = corral_factory(**FAST_GROUPS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("t12", PARTITIONS, 1)])["t12"].result(timeout=10)
    return broker


def describe(broker, group: str):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=10)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_four_confluent_consumers_share_twelve_partitions(broker, strategy):
    group = f"four-{strategy}"
    members = [
        Member("confluent", broker.bootstrap, group, "t12", strategy=strategy, session_ms=3000)
        for _ in range(4)
    ]
    try:
        wait_until(
            lambda: (
                assigned_once(members, PARTITIONS) and all(len(m.assigned) == 3 for m in members)
            ),
            30,
            "4 members with 3 partitions each",
            members,
        )
        info = describe(broker, group)
        assert info.state.name == "STABLE"
        assert info.partition_assignor == strategy
        assert len(info.members) == 4

        # A clean close sends LeaveGroup: the others take over at once, not after a session.
        leaving, rest = members[0], members[1:]
        start = time.monotonic()
        leaving.close()
        wait_until(lambda: assigned_once(rest, PARTITIONS), 10, "3 members covering 12 partitions")
        assert time.monotonic() - start < 2.5, "a leave must not wait for the session timeout"

        # A crash is noticed by the session timeout (3 s here).
        crashed, rest = rest[0], rest[1:]
        crashed.kill()
        took = wait_until(
            lambda: assigned_once(rest, PARTITIONS), 15, "2 members covering 12 partitions"
        )
        assert took < 3 + 4, f"partitions moved after {took:.1f}s, session timeout is 3 s"
        assert len(describe(broker, group).members) == 2
    finally:
        stop_all(members)


def test_mixed_clients_agree_on_a_protocol(broker):
    # librdkafka offers range,roundrobin; kafka-python offers the same two; aiokafka only roundrobin.
    members = [
        Member("confluent", broker.bootstrap, "mixed", "t12", strategy="range,roundrobin"),
        Member("kafka-python", broker.bootstrap, "mixed", "t12", strategy="range,roundrobin"),
        Member("aiokafka", broker.bootstrap, "mixed", "t12", strategy="roundrobin"),
    ]
    try:
        wait_until(
            lambda: assigned_once(members, PARTITIONS) and all(m.assigned for m in members),
            40,
            "three different clients covering 12 partitions",
            members,
        )
        info = describe(broker, "mixed")
        assert info.partition_assignor == "roundrobin"
        assert sorted(len(m.assigned) for m in members) == [4, 4, 4]
    finally:
        stop_all(members)


def test_static_member_restart_keeps_the_group_stable(broker):
    members = [
        Member(
            "confluent",
            broker.bootstrap,
            "static",
            "t12",
            strategy="range",
            session_ms=10000,
            instance_id=f"instance-{i}",
        )
        for i in range(3)
    ]
    try:
        wait_until(
            lambda: (
                assigned_once(members, PARTITIONS) and all(len(m.assigned) == 4 for m in members)
            ),
            30,
            "3 static members with 4 partitions each",
        )
        before = [list(m.assigned) for m in members]
        rounds_before = [len(m.history) for m in members]
        # Crash one static member and bring it back under the same instance id, within its session.
        members[1].kill()
        members[1] = Member(
            "confluent",
            broker.bootstrap,
            "static",
            "t12",
            strategy="range",
            session_ms=10000,
            instance_id="instance-1",
        )
        wait_until(
            lambda: members[1].assigned == before[1], 20, "the static member's partitions back"
        )
        time.sleep(1.0)
        assert [m.assigned for m in members] == before
        # The others were not rebalanced.
        assert [len(members[i].history) for i in (0, 2)] == [rounds_before[0], rounds_before[2]]
        info = describe(broker, "static")
        assert info.state.name == "STABLE"
        assert sorted(m.group_instance_id for m in info.members) == [
            "instance-0",
            "instance-1",
            "instance-2",
        ]
    finally:
        stop_all(members)
