"""Kafka Streams with exactly_once_v2 on corral (tests/clients/java/WordCountStreams.java, from
Maven's kafka-streams): a word count over 200,000 lines, through a repartition topic and a state
store with its compacted changelog, while the broker is killed with kill -9 and restarted under it
(corral, and Apache Kafka 4.4 as the check of the harness).
Every count read back (read_committed) equals the true count: nothing was counted twice or lost
across the crash."""

from __future__ import annotations

import collections
import os
import random
import subprocess
import threading
import time

from checkout import JAVA
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_java import JVM_FLAGS
from kafka_ref import compile_java
from kafka_ref import fetch as kafka_jars

LINES = 200_000
WORDS = [f"w{i:03d}" for i in range(200)]


def counts(bootstrap: str, topic: str, until: dict[str, int], timeout: float) -> dict[str, int]:
    """The latest count of every word in `topic` (read_committed), read until it equals `until`
    or `timeout` passes."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "count-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and latest != until:
            for m in consumer.consume(10_000, 0.5):
                if not m.error():
                    latest[m.key().decode()] = int.from_bytes(m.value(), "big", signed=True)
        return latest
    finally:
        consumer.close()


def test_word_count_is_exactly_once_across_a_kill_9(crashable_broker, tmp_path):
    broker = crashable_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics(
        [NewTopic("lines", 3, 1), NewTopic("word-counts", 1, 1)]
    ).values():
        future.result(10)
    rng = random.Random(42)
    truth: collections.Counter[str] = collections.Counter()
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 20,
            "enable.idempotence": True,
            "queue.buffering.max.messages": LINES,
        }
    )
    for i in range(LINES):
        words = [rng.choice(WORDS) for _ in range(3)]
        truth.update(words)
        producer.produce("lines", key=str(i), value=" ".join(words))
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0

    classes = compile_java(JAVA / "WordCountStreams.java", artifact="kafka-streams")
    lib = kafka_jars(artifact="kafka-streams")
    app = subprocess.Popen(
        [
            "java",
            *[f for f in JVM_FLAGS if not f.startswith("-Xmx")],
            "-Xmx512m",
            "-cp",
            f"{classes}{os.pathsep}{lib}/*",
            "WordCountStreams",
            broker.bootstrap,
            "wordcount",
            "lines",
            "word-counts",
            str(tmp_path / "state"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(app.stdout), daemon=True)
    reader.start()
    try:
        # The first counts committed, far from all: then the broker dies under the application.
        # Short reads: one long read would let the application finish before the crash.
        partial: dict[str, int] = {}
        deadline = time.monotonic() + 90
        while not partial and time.monotonic() < deadline:
            partial = counts(broker.bootstrap, "word-counts", {"never": 1}, timeout=1)
        assert partial, "no output before the crash: " + "".join(output[-50:])
        # A crash after the whole count would prove nothing about exactly once.
        assert sum(partial.values()) < sum(truth.values()), "the count ended before the crash"
        print(f"crash after {sum(partial.values())} of {sum(truth.values())} words counted")
        broker.crash_restart()
        final = counts(broker.bootstrap, "word-counts", dict(truth), timeout=180)
        assert app.poll() is None, "".join(output[-80:])
        assert final == dict(truth), (
            f"{sum(final.values())} words counted of {sum(truth.values())}; "
            + "".join(output[-40:])
        )
    finally:
        app.kill()
        app.wait()
