"""Group administration through real admin clients (confluent-kafka, kafka-python) and kcat -G."""

from __future__ import annotations

import signal
import subprocess

import confluent_kafka as ck
import pytest
from cgkit import FAST_GROUPS, Member, stop_all, wait_until
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition as KpTopicPartition


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from conftest import CorralProcess

    process = CorralProcess(
        tmp_path_factory.mktemp("groups-admin") / "corral",
        {k: str(v) for k, v in FAST_GROUPS.items()},
    ).start()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    admin.create_topics([NewTopic("a", 4, 1)])["a"].result(timeout=10)
    yield process
    process.proc.kill()
    process.proc.wait()


def simple_commit(broker, group: str, offsets: dict[int, int]) -> None:
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.commit(offsets=[ck.TopicPartition("a", p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def test_confluent_admin_list_describe_delete(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    members = [Member("confluent", broker.bootstrap, "live", "a") for _ in range(2)]
    try:
        wait_until(
            lambda: (
                sorted(p for m in members for p in m.assigned) == [0, 1, 2, 3]
                and all(m.assigned for m in members)
            ),
            30,
            "two members sharing a",
        )
        simple_commit(broker, "idle", {0: 3, 1: 4})

        listed = admin.list_consumer_groups().result(timeout=10)
        states = {g.group_id: g.state.name for g in listed.valid}
        assert states["live"] == "STABLE" and states["idle"] == "EMPTY"

        described = admin.describe_consumer_groups(["live"])["live"].result(timeout=10)
        assert described.partition_assignor == "range"
        assigned = sorted(
            tp.partition for m in described.members for tp in m.assignment.topic_partitions
        )
        assert assigned == [0, 1, 2, 3]

        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("idle")])["idle"]
        got = {tp.partition: tp.offset for tp in offsets.result(timeout=10).topic_partitions}
        assert got == {0: 3, 1: 4}

        with pytest.raises(KafkaException) as info:
            admin.delete_consumer_groups(["live"])["live"].result(timeout=10)
        assert info.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
        assert admin.delete_consumer_groups(["idle"])["idle"].result(timeout=10) is None
        listed = admin.list_consumer_groups().result(timeout=10)
        assert "idle" not in {g.group_id for g in listed.valid}
    finally:
        stop_all(members)


def test_kafka_python_admin(broker):
    simple_commit(broker, "kp-idle", {2: 9, 3: 10})
    member = Member("kafka-python", broker.bootstrap, "kp-live", "a", strategy="range")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        wait_until(lambda: member.assigned == [0, 1, 2, 3], 30, "the kafka-python member owning a")
        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert groups["kp-live"]["protocol_type"] == "consumer" and "kp-idle" in groups
        info = admin.describe_groups(["kp-live"])["kp-live"]
        assert info["group_state"] == "Stable" and info["protocol_data"] == "range"
        assert len(info["members"]) == 1

        offsets = admin.list_group_offsets({"kp-idle": None})["kp-idle"]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {2: 9, 3: 10}
        deleted = admin.delete_group_offsets("kp-idle", [KpTopicPartition("a", 2)])
        assert [e.__name__ for e in deleted.values()] == ["NoError"]
        offsets = admin.list_group_offsets({"kp-idle": None})["kp-idle"]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {3: 10}
        # The live group subscribes to a: its offsets cannot be deleted under it.
        deleted = admin.delete_group_offsets("kp-live", [KpTopicPartition("a", 0)])
        assert [e.__name__ for e in deleted.values()] == ["GroupSubscribedToTopicError"]

        results = dict(admin.delete_groups(["kp-idle", "kp-live"]))
        # kafka-python reports each group's outcome by name.
        assert results == {"kp-idle": "OK", "kp-live": "NonEmptyGroupError"}
    finally:
        admin.close()
        member.close()


def test_kcat_balanced_consumer(broker):
    kcat = subprocess.Popen(
        ["kcat", "-b", broker.bootstrap, "-G", "kcat-group", "a", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:

        def owns_all() -> bool:
            g = admin.describe_consumer_groups(["kcat-group"])["kcat-group"].result(timeout=10)
            return g.state.name == "STABLE" and sorted(
                tp.partition for m in g.members for tp in m.assignment.topic_partitions
            ) == [0, 1, 2, 3]

        wait_until(owns_all, 30, "kcat -G owning every partition of a")
        kcat.send_signal(signal.SIGTERM)
        kcat.wait(15)
        # kcat closes its consumer: LeaveGroup empties the group at once.
        wait_until(
            lambda: (
                admin.describe_consumer_groups(["kcat-group"])["kcat-group"]
                .result(timeout=10)
                .state.name
                == "EMPTY"
            ),
            10,
            "the group to empty",
        )
    finally:
        if kcat.poll() is None:
            kcat.kill()
            kcat.wait()
