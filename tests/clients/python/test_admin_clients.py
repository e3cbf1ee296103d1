"""Admin operations through real Kafka clients: confluent-kafka, kafka-python, aiokafka and kcat."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType
from rawwire import RawClient

from corral.errors import ErrorCode
from corral.network.apis import ApiKey


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=10)
    return info.value.args[0]


def metadata(broker, version: int, names: list[str], allow_auto_create: bool = True) -> dict:
    body = {"topics": [{"name": n} for n in names]}
    if version >= 4:
        body["allow_auto_topic_creation"] = allow_auto_create
    with RawClient(broker.port) as client:
        return client.call(ApiKey.METADATA, version, body)


# --- confluent-kafka (librdkafka) -------------------------------------------------------------


def test_confluent_create_list_describe_delete(corral):
    client = admin(corral)
    futures = client.create_topics(
        [
            NewTopic("orders", num_partitions=8, config={"retention.ms": "3600000"}),
            NewTopic("payments", num_partitions=2),
        ]
    )
    for future in futures.values():
        assert future.result(timeout=10) is None

    listed = client.list_topics(timeout=10)
    assert {"orders", "payments"} <= set(listed.topics)
    assert len(listed.topics["orders"].partitions) == 8
    assert list(listed.brokers) == [1]
    assert listed.brokers[1].port == corral.port

    described = client.describe_topics(TopicCollection(["orders"]))["orders"].result(timeout=10)
    assert described.name == "orders"
    assert not described.is_internal
    assert [p.id for p in described.partitions] == list(range(8))
    assert all(p.leader.id == 1 and [r.id for r in p.replicas] == [1] for p in described.partitions)
    assert str(described.topic_id) not in ("", "AAAAAAAAAAAAAAAAAAAAAA")

    deleted = client.delete_topics(["payments"])
    assert deleted["payments"].result(timeout=10) is None
    assert "payments" not in client.list_topics(timeout=10).topics


def test_confluent_describe_configs_of_topic_and_broker(corral_factory):
    broker = corral_factory(**{"num.partitions": 6})
    client = admin(broker)
    client.create_topics([NewTopic("t", 1, config={"retention.ms": "1000"})])["t"].result(
        timeout=10
    )

    resources = [ConfigResource(ResourceType.TOPIC, "t"), ConfigResource(ResourceType.BROKER, "1")]
    results = client.describe_configs(resources)
    topic = results[resources[0]].result(timeout=10)
    assert topic["retention.ms"].value == "1000"
    assert topic["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert topic["cleanup.policy"].value == "delete"
    assert topic["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    node = results[resources[1]].result(timeout=10)
    assert node["num.partitions"].value == "6"
    assert node["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert node["auto.create.topics.enable"].value == "true"
    assert node["auto.create.topics.enable"].source == ConfigSource.DEFAULT_CONFIG.value
    assert node["socket.request.max.bytes"].value == "104857600"


def test_confluent_describe_configs_of_missing_topic(corral):
    client = admin(corral)  # kept alive: a destroyed client fails its futures with _DESTROY
    resource = ConfigResource(ResourceType.TOPIC, "absent")
    err = error_of(client.describe_configs([resource])[resource])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.parametrize(
    "topic, code",
    [
        (NewTopic("bad name!", 1), KafkaError.TOPIC_EXCEPTION),
        (NewTopic("zero", 0), KafkaError.INVALID_PARTITIONS),
        (NewTopic("rf3", 1, replication_factor=3), KafkaError.INVALID_REPLICATION_FACTOR),
        (NewTopic("unknown-config", 1, config={"no.such.setting": "1"}), KafkaError.INVALID_CONFIG),
        (NewTopic("bad-value", 1, config={"retention.ms": "soon"}), KafkaError.INVALID_CONFIG),
    ],
)
def test_confluent_create_errors(shared_corral, topic, code):
    client = admin(shared_corral)
    err = error_of(client.create_topics([topic])[topic.topic])
    assert err.code() == code
    assert topic.topic not in client.list_topics(timeout=10).topics


def test_confluent_create_existing_topic(corral):
    client = admin(corral)
    client.create_topics([NewTopic("twice", 1)])["twice"].result(timeout=10)
    err = error_of(client.create_topics([NewTopic("twice", 3)])["twice"])
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert len(client.list_topics(timeout=10).topics["twice"].partitions) == 1


def test_duplicate_name_in_one_request_is_invalid_request(corral):
    # librdkafka refuses duplicates before sending, so the request is built by hand.
    topic = {"name": "dup", "num_partitions": 1, "replication_factor": 1}
    with RawClient(corral.port) as client:
        response = client.call(
            ApiKey.CREATE_TOPICS, 7, {"topics": [topic, topic], "timeout_ms": 5000}
        )
    assert [t["error_code"] for t in response["topics"]] == [ErrorCode.INVALID_REQUEST] * 2
    assert "dup" not in admin(corral).list_topics(timeout=10).topics


def test_confluent_delete_missing_topic(corral):
    client = admin(corral)
    err = error_of(client.delete_topics(["never-created"])["never-created"])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- kafka-python ------------------------------------------------------------------------------


def test_kafka_python_admin(corral):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    client = KafkaAdminClient(bootstrap_servers=corral.bootstrap, request_timeout_ms=10000)
    try:
        created = client.create_topics(
            [KpNewTopic("kp", 3, 1, topic_configs={"retention.bytes": "1048576"})]
        )
        [topic] = created["topics"]
        assert (topic["name"], topic["error_code"], topic["num_partitions"]) == ("kp", 0, 3)
        assert topic["error_message"] is None  # null on success, as Kafka sends it
        assert topic["configs"]["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert "kp" in client.list_topics()
        resource = KpConfigResource(ConfigResourceType.TOPIC, "kp")
        modified = client.describe_configs([resource])["topic"]["kp"]
        assert {name: c["value"] for name, c in modified.items()} == {"retention.bytes": "1048576"}
        everything = client.describe_configs([resource], config_filter="all")["topic"]["kp"]
        assert everything["retention.ms"]["value"] == "604800000"
        assert everything["retention.ms"]["config_type"] == "LONG"
        client.delete_topics(["kp"])
        assert "kp" not in client.list_topics()
    finally:
        client.close()


# --- aiokafka (ApiVersions v0) -----------------------------------------------------------------


def test_aiokafka_bootstrap_metadata_and_create(corral):
    from aiokafka import AIOKafkaClient
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    async def scenario():
        admin_client = AIOKafkaAdminClient(bootstrap_servers=corral.bootstrap)
        await admin_client.start()
        try:
            await admin_client.create_topics([AioNewTopic("aio", 5, 1)])
            assert "aio" in await admin_client.list_topics()
        finally:
            await admin_client.close()
        client = AIOKafkaClient(bootstrap_servers=corral.bootstrap)
        await client.bootstrap()
        try:
            cluster = await client.fetch_all_metadata()
            return cluster.partitions_for_topic("aio"), [b.nodeId for b in cluster.brokers()]
        finally:
            await client.close()

    partitions, brokers = asyncio.run(scenario())
    assert partitions == set(range(5))
    assert brokers == [1]


# --- kcat --------------------------------------------------------------------------------------


def test_kcat_lists_brokers_and_topics(corral):
    client = admin(corral)
    client.create_topics([NewTopic("kc", 3)])["kc"].result(timeout=10)
    out = subprocess.run(
        ["kcat", "-b", corral.bootstrap, "-L", "-J", "-m", "10"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    listing = json.loads(out)
    assert listing["brokers"] == [{"id": 1, "name": corral.bootstrap}]
    [topic] = [t for t in listing["topics"] if t["topic"] == "kc"]
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["replicas"] == [{"id": 1}] for p in topic["partitions"])


# --- Metadata ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3, 4, 12])
def test_metadata_auto_creates_with_default_partitions(corral, version):
    response = metadata(corral, version, ["auto"])
    [topic] = response["topics"]
    assert (topic["error_code"], topic["name"], len(topic["partitions"])) == (0, "auto", 4)
    assert len(admin(corral).list_topics(timeout=10).topics["auto"].partitions) == 4


def test_metadata_does_not_create_when_the_client_says_no(corral):
    [topic] = metadata(corral, 12, ["no-auto"], allow_auto_create=False)["topics"]
    assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_does_not_create_when_disabled(corral_factory):
    broker = corral_factory(**{"auto.create.topics.enable": "false"})
    for version in (1, 12):
        [topic] = metadata(broker, version, ["nope"])["topics"]
        assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "nope" not in admin(broker).list_topics(timeout=10).topics


def test_metadata_invalid_name_is_not_created(corral):
    [topic] = metadata(corral, 12, ["bad/name"])["topics"]
    assert topic["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_metadata_by_topic_id(corral):
    [created] = metadata(corral, 12, ["by-id"])["topics"]
    with RawClient(corral.port) as client:
        body = {
            "topics": [
                {"name": None, "topic_id": created["topic_id"]},
                {"name": None, "topic_id": uuid.uuid4().bytes},
            ]
        }
        found, missing = client.call(ApiKey.METADATA, 12, body)["topics"]
    assert (found["name"], found["topic_id"]) == ("by-id", created["topic_id"])
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_metadata_by_topic_id_with_an_empty_name(corral):
    # The Java consumer asks by id leaving the name at its default, "" (not null); as in Kafka,
    # a non-zero id wins over the name (a SubscriptionPattern member resolves its assignment so).
    [created] = metadata(corral, 12, ["by-id-java"])["topics"]
    with RawClient(corral.port) as client:
        body = {
            "topics": [
                {"name": "", "topic_id": created["topic_id"]},
                {"name": "", "topic_id": uuid.uuid4().bytes},
            ]
        }
        found, missing = client.call(ApiKey.METADATA, 12, body)["topics"]
    assert (found["error_code"], found["name"]) == (ErrorCode.NONE, "by-id-java")
    assert (missing["error_code"], missing["name"]) == (ErrorCode.UNKNOWN_TOPIC_ID, None)


# --- persistence -------------------------------------------------------------------------------


def test_topics_ids_configs_and_cluster_id_survive_restart(corral):
    client = admin(corral)
    client.create_topics([NewTopic("kept", 3, config={"retention.ms": "5000"})])["kept"].result(
        timeout=10
    )
    metadata(corral, 12, ["auto-kept"])
    before = {
        t["name"]: t["topic_id"] for t in metadata(corral, 12, ["kept", "auto-kept"])["topics"]
    }
    assert all(tid != bytes(16) for tid in before.values())
    cluster_before = client.list_topics(timeout=10).cluster_id
    # Ids are stable while running, too.
    assert before == {
        t["name"]: t["topic_id"] for t in metadata(corral, 12, ["kept", "auto-kept"])["topics"]
    }

    corral.restart()

    client = admin(corral)
    listed = client.list_topics(timeout=10)
    assert listed.cluster_id == cluster_before
    assert len(listed.topics["kept"].partitions) == 3
    assert len(listed.topics["auto-kept"].partitions) == 4
    after = metadata(corral, 12, ["kept", "auto-kept"], allow_auto_create=False)["topics"]
    assert {t["name"]: t["topic_id"] for t in after} == before
    resource = ConfigResource(ResourceType.TOPIC, "kept")
    configs = client.describe_configs([resource])[resource].result(timeout=10)
    assert configs["retention.ms"].value == "5000"


def test_clean_shutdown_on_sigterm_with_clients_connected(corral):
    with RawClient(corral.port) as idle, RawClient(corral.port) as half:
        assert idle.call(ApiKey.METADATA, 12, {"topics": None})["brokers"]
        half.sock.sendall(b"\x00\x00\x01\x00\x00")  # half a frame: the server is mid-read
        assert corral.stop(timeout=10) == 0
