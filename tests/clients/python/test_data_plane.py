"""The data plane with real clients: produce and consume end to end, restarts, crashes, torn tails,
long-poll. Every test talks to a real corral process over TCP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time

from checkout import JAVA
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_ref import fetch as kafka_jars


def create_topic(broker, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])
    futures[name].result(timeout=10)


def consume_all(
    broker, topic: str, partitions: int, expected: int, timeout: float = 60.0, **config
) -> list:
    """Every message of the topic, read with assign (no group) from the beginning."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error():
                    raise KafkaException(msg.error())
                messages.append(msg)
        # Anything beyond the expected count would be a duplicate: give it a moment to show up.
        for msg in consumer.consume(num_messages=10_000, timeout=0.5):
            if not msg.error():
                messages.append(msg)
    finally:
        consumer.close()
    return messages


def test_confluent_idempotent_producer_and_assign_consumer_100k(corral):
    topic, partitions, count = "bulk", 8, 100_000
    create_topic(corral, topic, partitions)
    producer = Producer(
        {"bootstrap.servers": corral.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    failures = []
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"key-{i}".encode(),
                    value=f"value-{i}".encode() * 4,
                    partition=i % partitions,
                    headers=[("n", str(i).encode()), ("h2", b"")],
                    on_delivery=lambda err, msg: err and failures.append(err),
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not failures, failures[:3]

    messages = consume_all(corral, topic, partitions, count)
    assert len(messages) == count
    next_index = {p: p for p in range(partitions)}
    for msg in messages:
        p = msg.partition()
        i = next_index[p]
        # In order within each partition, offsets dense from 0, key/value/headers intact.
        assert msg.offset() == i // partitions
        assert msg.key() == f"key-{i}".encode()
        assert msg.value() == f"value-{i}".encode() * 4
        assert msg.headers() == [("n", str(i).encode()), ("h2", b"")]
        next_index[p] = i + partitions


def test_kafka_python_producer_and_aiokafka_consumer(corral):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition
    from kafka import KafkaProducer

    topic, partitions, count = "py-clients", 3, 3000
    create_topic(corral, topic, partitions)
    # kafka-python 3 is idempotent by default (InitProducerId, sequences).
    producer = KafkaProducer(bootstrap_servers=corral.bootstrap, acks="all", linger_ms=5)
    futures = [
        producer.send(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            partition=i % partitions,
            headers=[("i", str(i).encode())],
        )
        for i in range(count)
    ]
    producer.flush(30)
    offsets = [f.get(timeout=10).offset for f in futures]
    producer.close()
    assert sorted(offsets) == sorted(i // partitions for i in range(count))

    async def consume() -> list:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=corral.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            tps = [AioTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    got.extend(records)
            return got
        finally:
            await consumer.stop()

    records = asyncio.run(consume())
    assert len(records) == count
    by_partition: dict[int, list] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    for p, recs in by_partition.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        for r in recs:
            i = r.offset * partitions + p
            assert (r.key, r.value, list(r.headers)) == (
                f"k{i}".encode(),
                f"v{i}".encode(),
                [("i", str(i).encode())],
            )


def test_java_client_idempotent_producer_and_assign_consumer(corral):
    # kafka-clients 4.x (from the reference broker's jars): idempotent, lz4, acks=all; then
    # assign + seekToBeginning, endOffsets and offsetsForTimes. Checks are in the Java program.
    create_topic(corral, "java", 3)
    program = JAVA / "DataPlaneClients.java"
    run = subprocess.run(
        [
            "java",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{kafka_jars()}/*",
            str(program),
            corral.bootstrap,
            "java",
            "20000",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else {}
    assert result.get("ok") is True, (result, run.stderr[-2000:])
    assert result["consumed"] == 20000


def test_kcat_produce_and_consume(corral):
    lines = [f"key{i}:line {i}" for i in range(500)]
    subprocess.run(
        ["kcat", "-P", "-b", corral.bootstrap, "-t", "kcat-topic", "-p", "0", "-K:"],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            corral.bootstrap,
            "-t",
            "kcat-topic",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k:%s@%o\n",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert out.splitlines() == [f"{line}@{i}" for i, line in enumerate(lines)]


def _produce(broker, topic: str, partitions: int, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 200, partition=i % partitions)
        producer.poll(0)
    assert producer.flush(30) == 0


def test_everything_survives_a_restart(corral):
    create_topic(corral, "durable", 4, **{"segment.bytes": "20000"})
    _produce(corral, "durable", 4, 2000)
    corral.restart()
    messages = consume_all(corral, "durable", 4, 2000)
    assert sorted(int(m.key()) for m in messages) == list(range(2000))
    # The log keeps growing where it stopped, and segments rolled by segment.bytes.
    _produce(corral, "durable", 4, 100, start=2000)
    assert len(consume_all(corral, "durable", 4, 2100)) == 2100
    assert len(list((corral.data_dir / "durable-0").glob("*.log"))) > 1


def test_kill_9_during_acks_all_produce_loses_no_acknowledged_message(corral):
    topic, partitions = "crash", 4
    create_topic(corral, topic, partitions)
    acked: list[int] = []
    failed: list[int] = []

    def on_delivery(err, msg):
        (failed if err else acked).append(int(msg.key()))

    producer = Producer(
        {
            "bootstrap.servers": corral.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 60000,
            "reconnect.backoff.max.ms": 200,
        }
    )
    stop = threading.Event()

    def kill_soon():
        while len(acked) < 5000 and not stop.is_set():
            time.sleep(0.005)
        corral.kill()

    killer = threading.Thread(target=kill_soon)
    killer.start()
    sent = 0
    deadline = time.monotonic() + 30
    while corral.alive() and time.monotonic() < deadline:
        try:
            producer.produce(
                topic,
                key=str(sent).encode(),
                value=b"v" * 100,
                partition=sent % partitions,
                on_delivery=on_delivery,
            )
            sent += 1
        except BufferError:
            pass
        producer.poll(0)
    stop.set()
    killer.join()
    acked_before_crash = len(acked)
    assert acked_before_crash >= 5000
    corral.start()
    # The producer retries what was in flight; idempotence keeps retried batches from doubling.
    assert producer.flush(60) == 0
    assert not failed
    messages = consume_all(corral, topic, partitions, len(acked))
    keys = [int(m.key()) for m in messages]
    assert len(keys) == len(set(keys)), "a message is stored twice"
    assert set(acked) <= set(keys), "an acknowledged message is missing"
    assert len(acked) == sent


def test_torn_tail_is_truncated_on_start(corral):
    create_topic(corral, "torn", 1)
    _produce(corral, "torn", 1, 300)
    corral.stop()
    segment = sorted((corral.data_dir / "torn-0").glob("*.log"))[-1]
    good_size = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x01\x2c\x00\x00\x10\x00garbage from a torn write" * 3)
    corral.start()
    assert "truncated" in corral.log() and "torn-0" in corral.log()
    assert segment.stat().st_size == good_size
    messages = consume_all(corral, "torn", 1, 300)
    assert [int(m.key()) for m in messages] == list(range(300))
    _produce(corral, "torn", 1, 10, start=300)
    assert [int(m.key()) for m in consume_all(corral, "torn", 1, 310)] == list(range(310))


def test_long_poll_fetch_wakes_when_data_arrives(corral):
    create_topic(corral, "poll", 1)
    # A long max wait: a fetch that were not woken by the append would hold the message ~10 s.
    consumer = Consumer(
        {
            "bootstrap.servers": corral.bootstrap,
            "group.id": "unused",
            "fetch.wait.max.ms": 10000,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("poll", 0, 0)])
    producer = Producer({"bootstrap.servers": corral.bootstrap, "linger.ms": 0})
    latencies = []
    try:
        assert consumer.poll(1.0) is None  # the consumer's fetch is now waiting in the broker
        for i in range(5):
            time.sleep(0.3)
            sent = time.monotonic()
            producer.produce("poll", value=str(i).encode(), partition=0)
            producer.flush(5)
            msg = consumer.poll(5.0)
            assert msg is not None and msg.value() == str(i).encode()
            latencies.append(time.monotonic() - sent)
    finally:
        consumer.close()
    # Correctness bound only (measurement is in benches/): woken, not timed out.
    assert min(latencies) < 0.05, latencies
    assert max(latencies) < 1.0, latencies


def test_compressed_batches_are_stored_as_sent(corral):
    create_topic(corral, "packed", 1)
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    for _n, codec in enumerate(codecs):
        producer = Producer(
            {"bootstrap.servers": corral.bootstrap, "compression.type": codec, "linger.ms": 20}
        )
        for i in range(200):
            producer.produce(
                "packed", key=f"{codec}-{i}".encode(), value=b"compressible " * 20, partition=0
            )
        assert producer.flush(10) == 0
    messages = consume_all(corral, "packed", 1, 200 * len(codecs))
    assert [m.key() for m in messages] == [f"{c}-{i}".encode() for c in codecs for i in range(200)]
    assert [m.offset() for m in messages] == list(range(200 * len(codecs)))
    # Stored compressed: far smaller than the 200 * 4 * 260 bytes of values.
    segment = sorted((corral.data_dir / "packed-0").glob("*.log"))[-1]
    assert segment.stat().st_size < 200 * len(codecs) * 260 / 4
