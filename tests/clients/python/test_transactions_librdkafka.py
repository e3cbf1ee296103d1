"""librdkafka's transactional producer (confluent-kafka) against a real corral: committed and
aborted transactions over several partitions, read record by record by read_committed and
read_uncommitted consumers; a consume-transform-produce loop whose consumer offsets go with each
transaction (`send_offsets_to_transaction`), one transaction of it aborted and redone, so that
the output holds every input exactly once and the group's committed offsets move only on
commit."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def topics(bootstrap: str, *specs: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, parts, 1) for name, parts in specs])
    for future in futures.values():
        future.result(10)


def read(bootstrap: str, topic: str, partitions: int, isolation: str, wait_s: float = 5.0):
    """Every value of the topic, as (partition, offset, value), until nothing new for `wait_s`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader-" + uuid.uuid4().hex,
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    quiet_until = time.monotonic() + wait_s
    while time.monotonic() < quiet_until:
        m = consumer.poll(0.2)
        if m is None or m.error():
            continue
        out.append((m.partition(), m.offset(), m.value().decode()))
        quiet_until = time.monotonic() + 1.0
    consumer.close()
    return sorted(out)


def test_committed_and_aborted_transactions_as_consumers_see_them(corral):
    a, b = "tx-a-" + uuid.uuid4().hex[:6], "tx-b-" + uuid.uuid4().hex[:6]
    topics(corral.bootstrap, (a, 3), (b, 2))
    producer = Producer({"bootstrap.servers": corral.bootstrap, "transactional.id": "lib-" + a})
    producer.init_transactions(20)
    committed, aborted = [], []
    for round_, outcome in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        producer.begin_transaction()
        values = [f"{outcome}-{round_}-{i}" for i in range(12)]
        for i, value in enumerate(values):
            producer.produce(a if i % 2 else b, value=value, partition=i % 2)
        producer.flush(10)
        if outcome == "commit":
            producer.commit_transaction(20)
            committed += values
        else:
            producer.abort_transaction(20)
            aborted += values
    seen_committed = read(corral.bootstrap, a, 3, "read_committed") + read(
        corral.bootstrap, b, 2, "read_committed"
    )
    seen_all = read(corral.bootstrap, a, 3, "read_uncommitted") + read(
        corral.bootstrap, b, 2, "read_uncommitted"
    )
    assert sorted(v for _, _, v in seen_committed) == sorted(committed)
    assert sorted(v for _, _, v in seen_all) == sorted(committed + aborted)
    # Each committed record once, at an offset of its own.
    assert len({(p, o) for p, o, _ in seen_committed}) == len(seen_committed)


def test_consume_transform_produce_with_offsets_in_the_transaction(corral):
    source, sink = "ctp-in-" + uuid.uuid4().hex[:6], "ctp-out-" + uuid.uuid4().hex[:6]
    topics(corral.bootstrap, (source, 2), (sink, 2))
    feeder = Producer({"bootstrap.servers": corral.bootstrap})
    for i in range(200):
        feeder.produce(source, value=f"in-{i}", partition=i % 2)
    assert feeder.flush(10) == 0
    group = "ctp-" + source
    consumer = Consumer(
        {
            "bootstrap.servers": corral.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": corral.bootstrap, "transactional.id": group})
    producer.init_transactions(20)
    processed, aborted_once = 0, False
    deadline = time.monotonic() + 60
    while processed < 200 and time.monotonic() < deadline:
        messages = [m for m in consumer.consume(25, 1.0) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, value="out-" + m.value().decode(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 20
        )
        if not aborted_once:
            # The first transaction is aborted: its offsets are not committed, so the records
            # are read again from the committed position and processed once more.
            producer.abort_transaction(20)
            aborted_once = True
            committed = consumer.committed(consumer.assignment(), 10)
            assert all(tp.offset < 0 for tp in committed), committed
            for tp in consumer.assignment():
                consumer.seek(TopicPartition(tp.topic, tp.partition, 0))
            continue
        producer.commit_transaction(20)
        processed += len(messages)
    committed = consumer.committed([TopicPartition(source, 0), TopicPartition(source, 1)], 10)
    consumer.close()
    assert processed == 200
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 100), (1, 100)]
    outputs = [v for _, _, v in read(corral.bootstrap, sink, 2, "read_committed")]
    assert sorted(outputs) == sorted(f"out-in-{i}" for i in range(200))
