"""Log compaction against a real corral with a real producer (confluent-kafka): a compacted topic
with repeated keys and tombstones keeps, record by record, the last value of every key at its
own offset; tombstones stay until delete.retention.ms and then go; the partition's size shrinks in
DescribeLogDirs (what `kafka-log-dirs` shows); and corral killed with kill -9 while the cleaner
works restarts with every offset holding what was produced there or nothing (the old segments or
the cleaned one, never a mix)."""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from rawwire import RawClient

from corral.network.apis import ApiKey

CLEANER = {"log.cleaner.backoff.ms": 50}
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "2000",
}


def create(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=TOPIC_CONFIGS)])[name].result(10)


def produce(bootstrap: str, name: str, records: list[tuple[str, str | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for key, value in records:
        producer.produce(name, key=key, value=value, partition=0)
        producer.poll(0)
    assert producer.flush(10) == 0


def read_all(bootstrap: str, name: str) -> list[tuple[int, str, str | None]]:
    """Every record from offset 0 to the end, as (offset, key, value)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        end = consumer.get_watermark_offsets(TopicPartition(name, 0), 10)[1]
        consumer.assign([TopicPartition(name, 0, 0)])
        out: list[tuple[int, str, str | None]] = []
        deadline = time.monotonic() + 20
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            value = m.value()
            out.append((m.offset(), m.key().decode(), None if value is None else value.decode()))
        return out
    finally:
        consumer.close()


def partition_size(port: int, name: str) -> int:
    with RawClient(port) as c:
        body = {"topics": [{"topic": name, "partitions": [0]}]}
        result = c.call(ApiKey.DESCRIBE_LOG_DIRS, 4, body)["results"][0]
    return result["topics"][0]["partitions"][0]["partition_size"]


def until(condition, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def test_last_value_per_key_at_its_offset_and_tombstones_until_their_horizon(corral_factory):
    broker = corral_factory(**CLEANER)
    create(broker.bootstrap, "compacted")
    keys = [f"key-{i}" for i in range(20)]
    produced: list[tuple[str, str | None]] = []
    for round_ in range(10):
        for key in keys:
            deleted = round_ == 9 and key in ("key-3", "key-7")
            produced.append((key, None if deleted else f"{key}@{round_}" + "x" * 100))
    produce(broker.bootstrap, "compacted", produced)
    # What the records alone took before cleaning (the cleaner may have run already).
    produced_bytes = sum(len(k) + len(v or "") for k, v in produced)
    # Cleaned: every key once (the active segment, never cleaned, may still hold a few more).
    survivors = until(lambda: (r := read_all(broker.bootstrap, "compacted")) and len(r) < 60 and r)
    assert partition_size(broker.port, "compacted") < produced_bytes / 2
    last = {}
    for offset, (key, value) in enumerate(produced):
        last[key] = (offset, value)
    for offset, key, value in survivors:
        assert produced[offset] == (key, value), "a record moved or changed"
    seen = {key for _, key, _ in survivors}
    assert seen == set(keys)
    for key, (offset, value) in last.items():
        assert (offset, key, value) in survivors
    # The tombstones go once their horizon (delete.retention.ms) has passed and a later pass
    # runs (new dirty data makes one due).
    time.sleep(2.5)
    produce(broker.bootstrap, "compacted", [(f"more-{i}", "y" * 100) for i in range(60)])
    until(
        lambda: (
            not any(k in ("key-3", "key-7") for _, k, _ in read_all(broker.bootstrap, "compacted"))
        )
    )


def test_kill_9_while_cleaning_leaves_every_offset_whole(corral_factory):
    rng = random.Random(7)
    broker = corral_factory(**CLEANER)
    create(broker.bootstrap, "crashy")
    produced: list[tuple[str, str | None]] = []
    for _ in range(4):
        batch = [(f"k{rng.randrange(30)}", "v" * rng.randrange(50, 300)) for _ in range(300)]
        produce(broker.bootstrap, "crashy", batch)
        produced += batch
        time.sleep(rng.uniform(0.0, 0.3))  # the cleaner is at some step of a pass
        broker.kill()
        broker.start()
    survivors = read_all(broker.bootstrap, "crashy")
    assert survivors, "the log is readable after the restarts"
    for offset, key, value in survivors:
        assert produced[offset] == (key, value), f"offset {offset} changed"
    last = {}
    for offset, (key, value) in enumerate(produced):
        last[key] = (offset, value)
    for key, (offset, value) in last.items():
        assert (offset, key, value) in survivors, f"the last value of {key} was lost"
    leftovers = [
        p.name
        for p in broker.data_dir.glob("crashy-0/*")
        if p.suffix in (".cleaned", ".swap", ".deleted")
    ]
    assert not leftovers


def test_a_min_compaction_lag_above_the_max_is_refused(corral):
    admin = AdminClient({"bootstrap.servers": corral.bootstrap})
    configs = {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"}
    future = admin.create_topics([NewTopic("lags", 1, 1, config=configs)])["lags"]
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "min.compaction.lag.ms (5000)" in str(refused.value)


def test_an_alter_making_min_compaction_lag_above_the_max_is_refused(corral):
    # LogConfig.validateValues runs on the topic's overrides after the change, so raising the
    # min above an earlier max is refused as at creation, and the topic keeps its settings.
    admin = AdminClient({"bootstrap.servers": corral.bootstrap})
    configs = {"cleanup.policy": "compact", "max.compaction.lag.ms": "1000"}
    admin.create_topics([NewTopic("lags-alter", 1, 1, config=configs)])["lags-alter"].result(10)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "lags-alter",
        incremental_configs=[
            ConfigEntry(
                "min.compaction.lag.ms", "5000", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([resource])[resource].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)" in str(refused.value)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "lags-alter")])
    entries = next(iter(described.values())).result(10)
    assert entries["min.compaction.lag.ms"].value == "0"
    assert entries["max.compaction.lag.ms"].value == "1000"
