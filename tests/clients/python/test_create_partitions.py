"""CreatePartitions (kafka-topics --alter --partitions) against a real corral: Kafka's answers for
every refusal, durable across a restart, and a KIP-848 consumer group picking up the new
partitions (its epoch bumps through the metadata hash)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def grow(client: AdminClient, name: str, count: int, validate_only: bool = False):
    """The error's name (None for success)."""
    future = client.create_partitions([NewPartitions(name, count)], validate_only=validate_only)[
        name
    ]
    try:
        future.result(15)
        return None
    except KafkaException as e:
        return e.args[0].name()


def partition_count(client: AdminClient, name: str) -> int:
    return len(client.list_topics(name, timeout=10).topics[name].partitions)


def test_refusals_and_growth_survive_a_restart(corral):
    client = admin(corral)
    client.create_topics([NewTopic("grow", 2, 1)])["grow"].result(15)
    assert grow(client, "nope", 3) == "UNKNOWN_TOPIC_OR_PART"
    assert grow(client, "grow", 2) == "INVALID_PARTITIONS"
    assert grow(client, "grow", 1) == "INVALID_PARTITIONS"
    assert grow(client, "__consumer_offsets", 60) == "INVALID_REQUEST"
    assert grow(client, "grow", 5, validate_only=True) is None
    assert partition_count(client, "grow") == 2
    assert grow(client, "grow", 5) is None
    assert partition_count(client, "grow") == 5
    producer = Producer({"bootstrap.servers": corral.bootstrap})
    producer.produce("grow", b"x", partition=4)
    assert producer.flush(10) == 0
    del producer
    corral.restart()
    client = admin(corral)
    assert partition_count(client, "grow") == 5


def test_consumer_group_takes_new_partitions(corral_factory):
    broker = corral_factory(
        **{
            "group.consumer.assignment.interval.ms": 0,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500,
        }
    )
    client = admin(broker)
    client.create_topics([NewTopic("elastic", 2, 1)])["elastic"].result(15)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "elastic-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe(["elastic"])
    try:

        def assigned() -> set[int]:
            consumer.poll(0.2)
            return {tp.partition for tp in consumer.assignment()}

        deadline = time.monotonic() + 30
        while assigned() != {0, 1}:
            assert time.monotonic() < deadline, consumer.assignment()
        assert grow(client, "elastic", 4) is None
        deadline = time.monotonic() + 30
        while assigned() != {0, 1, 2, 3}:
            assert time.monotonic() < deadline, consumer.assignment()
    finally:
        consumer.close()
