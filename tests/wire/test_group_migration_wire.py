"""Online migration at the wire, the same scripted scenario against corral and the Apache Kafka
4.4 reference broker, compared answer by answer (reference/kip848.md §5): a classic member
(raw JoinGroup / SyncGroup / Heartbeat frames) in a stable classic group; a ConsumerGroupHeartbeat
upgrades the group; the classic member is told to rejoin (by a Heartbeat the network thread must
not answer from its stale classic view), rejoins as a follower, revokes, and the two members
settle; the consumer-protocol member leaves and the group is classic again, rebalancing. A group
with another protocol type cannot be upgraded. Every step's group type and state, as ListGroups
v5, DescribeGroups and ConsumerGroupDescribe v1 show them, is part of what is compared.
"""

from __future__ import annotations

import time

import pytest
import slow_writes
from cgkit import CG_FAST
from kafka_java import kafka_reference
from raw_groups import Script
from rawwire import RawClient

from corral import _core
from corral.uuids import random_uuid_text

SETTINGS = {
    **CG_FAST,
    "group.consumer.session.timeout.ms": 10000,
    "group.initial.rebalance.delay.ms": 0,
}
TOPIC, PARTITIONS = "mig", 4


@pytest.fixture(scope="module")
def kafka_ref():
    with kafka_reference(SETTINGS) as bootstrap:
        yield bootstrap


class ClassicRaw:
    """A classic member speaking raw frames on its own connection."""

    def __init__(
        self, port: int, group: str, protocol: str = "range", protocol_type: str = "consumer"
    ):
        self.client = RawClient(port)
        self.group, self.protocol, self.protocol_type = group, protocol, protocol_type
        self.member_id, self.generation = "", -1
        self.owned: list[int] = []

    def join_body(self) -> dict:
        metadata = _core.encode_consumer_subscription(
            3, [TOPIC], [(TOPIC, sorted(self.owned))] if self.owned else [], self.generation
        )
        return {
            "group_id": self.group,
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": self.protocol_type,
            "protocols": [{"name": self.protocol, "metadata": metadata}],
            "reason": None,
        }

    def join(self, assign_all: bool = False) -> dict:
        body = self.join_body()
        answer = self.client.call(11, 9, body)
        if answer["error_code"] == 79:  # MEMBER_ID_REQUIRED
            self.member_id = body["member_id"] = answer["member_id"]
            answer = self.client.call(11, 9, body)
        if answer["error_code"] == 0:
            self.member_id, self.generation = answer["member_id"], answer["generation_id"]
        return answer

    def sync(self, assignments: dict[str, list[int]] | None = None) -> dict:
        answer = self.client.call(
            14,
            5,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": self.protocol_type,
                "protocol_name": self.protocol,
                "assignments": [
                    {
                        "member_id": m,
                        "assignment": _core.encode_consumer_assignment(3, [(TOPIC, ps)]),
                    }
                    for m, ps in (assignments or {}).items()
                ],
            },
        )
        if answer["error_code"] == 0 and answer["assignment"]:
            named, _ = _core.decode_consumer_assignment(answer["assignment"])
            self.owned = sorted(p for _, ps in named for p in ps)
        return answer

    def heartbeat(self) -> int:
        return self.client.call(
            12,
            4,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
            },
        )["error_code"]


def group_view(port: int, group: str) -> tuple:
    """(ListGroups v5 type and state, DescribeGroups v5 state and member count,
    ConsumerGroupDescribe v1 error and sorted member types)."""
    with RawClient(port) as c:
        listed = [
            g
            for g in c.call(16, 5, {"states_filter": [], "types_filter": []})["groups"]
            if g["group_id"] == group
        ]
        described = c.call(15, 5, {"groups": [group], "include_authorized_operations": False})[
            "groups"
        ][0]
        cg = c.call(69, 1, {"group_ids": [group], "include_authorized_operations": False})[
            "groups"
        ][0]
    return (
        (listed[0]["group_type"], listed[0]["group_state"]) if listed else None,
        (described["group_state"], len(described["members"])),
        (cg["error_code"], sorted(m["member_type"] for m in cg["members"])),
    )


def scenario(bootstrap: str) -> list:
    port = int(bootstrap.rsplit(":", 1)[1])
    script = Script(bootstrap, "probe")
    with RawClient(port) as c:
        c.call(
            19,
            4,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": PARTITIONS,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10000,
            },
        )
    script.refresh_topics()
    script.wait_assignable({TOPIC: PARTITIONS})
    log: list = []
    group = "migrating"
    a = ClassicRaw(port, group)
    joined = a.join()
    log.append(("a joins classic", joined["error_code"], joined["leader"] == a.member_id))
    synced = a.sync({a.member_id: list(range(PARTITIONS))})
    log.append(("a syncs", synced["error_code"], a.owned))
    log.append(("a heartbeats", a.heartbeat()))
    log.append(("classic", group_view(port, group)))
    classic_generation = a.generation

    # Upgrade: B's first ConsumerGroupHeartbeat.
    b = RawClient(port)
    base = {
        "group_id": group,
        "instance_id": None,
        "rack_id": None,
        "subscribed_topic_names": [TOPIC],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    answer = b.call(
        68,
        1,
        {**base, "member_id": random_uuid_text(), "member_epoch": 0, "rebalance_timeout_ms": 10000},
    )
    b_id, b_epoch = answer["member_id"], answer["member_epoch"]
    log.append(
        (
            "b joins, upgrading",
            answer["error_code"],
            b_epoch > classic_generation,
            _count(answer["assignment"]),
        )
    )
    log.append(("upgraded", group_view(port, group)))
    # A classic member new to the consumer group is named by the coordinator (a Kafka Uuid) and
    # asked to join again with it; until it does, it is not a member.
    newcomer = ClassicRaw(port, group)
    named = newcomer.client.call(11, 9, newcomer.join_body())
    log.append(("a newcomer is named", named["error_code"], _is_kafka_uuid(named["member_id"])))
    newcomer.client.close()
    # A's next Heartbeat: the coordinator (not a stale classic view) says rejoin.
    log.append(("a heartbeats after the upgrade", a.heartbeat()))
    joined = a.join()
    log.append(
        (
            "a rejoins the consumer group",
            joined["error_code"],
            joined["leader"],
            joined["members"],
            joined["protocol_name"],
            joined["generation_id"] == classic_generation,
        )
    )
    synced = a.sync()
    log.append(("a syncs, revoking", synced["error_code"], len(a.owned)))
    log.append(("a heartbeats while revoking", a.heartbeat()))
    joined = a.join()  # reporting only what it kept
    log.append(
        (
            "a rejoins after revoking",
            joined["error_code"],
            joined["generation_id"] > classic_generation,
        )
    )
    log.append(("a syncs again", a.sync()["error_code"], len(a.owned)))
    b_owned: list = []
    deadline = time.monotonic() + 20
    while len(b_owned) < PARTITIONS - len(a.owned) and time.monotonic() < deadline:
        answer = b.call(
            68,
            1,
            {
                **base,
                "member_id": b_id,
                "member_epoch": b_epoch,
                "rebalance_timeout_ms": -1,
                "subscribed_topic_names": None,
                "topic_partitions": [{"topic_id": script.ids[TOPIC], "partitions": b_owned}],
            },
        )
        b_epoch = answer["member_epoch"]
        if answer["assignment"] is not None:
            b_owned = sorted(
                p for t in answer["assignment"]["topic_partitions"] for p in t["partitions"]
            )
        time.sleep(0.2)
        a.heartbeat()
    log.append(
        (
            "b owns the rest",
            sorted(set(b_owned) | set(a.owned)) == list(range(PARTITIONS)),
            not set(b_owned) & set(a.owned),
        )
    )
    log.append(("a heartbeats, settled", a.heartbeat()))
    log.append(("settled", group_view(port, group)))

    # Downgrade: B leaves; only the classic member remains.
    answer = b.call(
        68,
        1,
        {
            **base,
            "member_id": b_id,
            "member_epoch": -1,
            "rebalance_timeout_ms": -1,
            "subscribed_topic_names": None,
            "topic_partitions": None,
        },
    )
    log.append(("b leaves, downgrading", answer["error_code"]))
    log.append(("downgraded", group_view(port, group)))
    code = a.heartbeat()
    log.append(("a heartbeats after the downgrade", code))
    joined = a.join()
    log.append(
        ("a rejoins the classic group", joined["error_code"], joined["leader"] == a.member_id)
    )
    log.append(
        ("a syncs as leader", a.sync({a.member_id: list(range(PARTITIONS))})["error_code"], a.owned)
    )
    log.append(("classic again", group_view(port, group)))

    # A group of another protocol type is not upgraded.
    other = ClassicRaw(port, "connect-group", protocol="default", protocol_type="connect")
    joined = other.join()
    other.sync({other.member_id: []})
    answer = b.call(
        68,
        1,
        {
            **base,
            "group_id": "connect-group",
            "member_id": random_uuid_text(),
            "member_epoch": 0,
            "rebalance_timeout_ms": 10000,
        },
    )
    log.append(("upgrade of a connect group", joined["error_code"], answer["error_code"]))
    b.close()
    a.client.close()
    other.client.close()
    script.client.close()
    return log


def _is_kafka_uuid(text: str) -> bool:
    import base64

    return len(text) == 22 and len(base64.urlsafe_b64decode(text + "==")) == 16


def _count(assignment) -> int | None:
    return (
        None
        if assignment is None
        else sum(len(t["partitions"]) for t in assignment["topic_partitions"])
    )


def test_migration_scenario_answers_as_kafka_does(corral_factory, kafka_ref):
    corral = corral_factory(**SETTINGS)
    ours = scenario(corral.bootstrap)
    theirs = scenario(kafka_ref)
    for mine, kafka in zip(ours, theirs):
        assert mine == kafka, (
            f"corral: {mine}\nkafka:  {kafka}\nall corral: {ours}\nall kafka: {theirs}"
        )
    assert len(ours) == len(theirs)
    # The scenario says what it should: the upgrade, the rejoin, the downgrade.
    steps = dict((entry[0], entry[1:]) for entry in ours)
    assert steps["upgraded"][0][0][0] == "consumer" and steps["upgraded"][0][2] == (0, [0, 1])
    assert steps["a heartbeats after the upgrade"] == (27,)  # REBALANCE_IN_PROGRESS
    assert steps["downgraded"][0][0][0] == "classic"
    assert steps["upgrade of a connect group"] == (0, 69)  # GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("when", ["upgrade answered", "answer held back"])
def test_corral_killed_in_the_middle_of_an_upgrade_restarts_consistent_and_converges(
    corral_factory, when
):
    """kill -9 right after the upgrading heartbeat was answered, or while its answer is held back
    (fault injection delays every write's completion; the upgrade's records are appended and
    applied, the member has not heard back): restarted, the group is whole, the consumer group
    with both members (or, had the records not reached the log, the classic group as it was),
    never a mix; the members carry on (the consumer member rejoins with epoch 0, as a client
    whose heartbeat failed does) and converge with every partition owned once."""
    settings = dict(SETTINGS)
    if when == "answer held back":
        settings["command"] = slow_writes.command(1500)
    corral = corral_factory(**settings)
    port = corral.port
    script = Script(corral.bootstrap, "probe")
    with RawClient(port) as c:
        c.call(
            19,
            4,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": PARTITIONS,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10000,
            },
        )
    script.refresh_topics()
    script.client.close()
    a = ClassicRaw(port, "killed")
    assert a.join()["error_code"] == 0
    assert a.sync({a.member_id: list(range(PARTITIONS))})["error_code"] == 0
    b = RawClient(port)
    b_id = random_uuid_text()
    join = {
        "group_id": "killed",
        "member_id": b_id,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 10000,
        "subscribed_topic_names": [TOPIC],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    if when == "upgrade answered":
        assert b.call(68, 1, join)["error_code"] == 0
    else:
        b.send(68, 1, join)
        time.sleep(0.5)  # appended, not yet answered
    corral.kill()
    b.close()
    a.client.close()
    corral.start()

    view = group_view(port, "killed")
    assert view[0] is not None
    if view[0][0] == "classic":
        assert when == "answer held back" and view[1] == ("Stable", 1)
    else:
        assert view[0][0] == "consumer" and view[2] == (0, [0, 1])
    # The members carry on: b (re)joins, a heartbeats and rejoins when told.
    a.client = RawClient(port)
    b = RawClient(port)
    b_owned: list[int] = []
    answer = b.call(68, 1, join)
    assert answer["error_code"] == 0, answer
    b_epoch = answer["member_epoch"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        code = a.heartbeat()
        if code in (27, 22, 25):  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
            if code == 25:
                a.member_id, a.generation, a.owned = "", -1, []
            if a.join()["error_code"] == 0:
                a.sync()
        else:
            assert code == 0, code
        answer = b.call(
            68,
            1,
            {
                **join,
                "member_epoch": b_epoch,
                "rebalance_timeout_ms": -1,
                "subscribed_topic_names": None,
                "topic_partitions": [{"topic_id": script.ids[TOPIC], "partitions": b_owned}],
            },
        )
        assert answer["error_code"] == 0, answer
        b_epoch = answer["member_epoch"]
        if answer["assignment"] is not None:
            b_owned = sorted(
                p for t in answer["assignment"]["topic_partitions"] for p in t["partitions"]
            )
        assert not set(b_owned) & set(a.owned), (b_owned, a.owned)
        if (
            sorted(b_owned + a.owned) == list(range(PARTITIONS))
            and group_view(port, "killed")[0][1] == "Stable"
        ):
            break
        time.sleep(0.2)
    assert sorted(b_owned + a.owned) == list(range(PARTITIONS)) and b_owned and a.owned
    assert group_view(port, "killed")[0] == ("consumer", "Stable")
    a.client.close()
    b.close()
