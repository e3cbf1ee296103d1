"""A Kafka Connect distributed worker on corral (connect-runtime and the FileStream connectors from
Maven, 4.3.1: connect-file has no 4.4.0 on Maven Central): its config, offset and status topics
are compacted topics on corral; a FileStreamSource connector created through the REST API copies a
file into a topic. Both the worker and the broker are stopped (the broker with kill -9) and
started again (corral, and Apache Kafka 4.4 as the check of the harness): the connector is still
configured, and its source offsets survived: lines appended later are copied once, and the
earlier ones are not copied again. A FileStreamSink connector copies the topic back into a file:
its consumer group's offsets survived too (every line once in that file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_java import CONNECT_VERSION, JVM_FLAGS
from kafka_ref import fetch as kafka_jars
from kafka_ref import free_port


def worker(bootstrap: str, rest_port: int, workdir) -> subprocess.Popen:
    properties = workdir / "worker.properties"
    properties.write_text(
        "\n".join(
            [
                f"bootstrap.servers={bootstrap}",
                "group.id=connect-cluster",
                "key.converter=org.apache.kafka.connect.storage.StringConverter",
                "value.converter=org.apache.kafka.connect.storage.StringConverter",
                "config.storage.topic=connect-configs",
                "offset.storage.topic=connect-offsets",
                "status.storage.topic=connect-status",
                "config.storage.replication.factor=1",
                "offset.storage.replication.factor=1",
                "status.storage.replication.factor=1",
                "offset.flush.interval.ms=300",
                f"listeners=http://127.0.0.1:{rest_port}",
            ]
        )
    )
    runtime = kafka_jars(CONNECT_VERSION, "connect-runtime")
    plugin = kafka_jars(CONNECT_VERSION, "connect-file") / f"connect-file-{CONNECT_VERSION}.jar"
    return subprocess.Popen(
        [
            "java",
            *[f for f in JVM_FLAGS if not f.startswith("-Xmx")],
            "-Xmx384m",
            "-cp",
            f"{runtime}/*{os.pathsep}{plugin}",
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(properties),
        ],
        stdout=open(workdir / "worker.log", "a"),
        stderr=subprocess.STDOUT,
    )


def rest(port: int, path: str, body: dict | None = None):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def until(condition, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if value := condition():
                return value
        except OSError as e:  # the REST server is not up yet
            last = e
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting ({last})")


def lines_in(bootstrap: str, topic: str) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lines-reader"})
    try:
        try:
            end = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
        except KafkaException:
            return []  # the topic is not there yet
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[str] = []
        deadline = time.monotonic() + 20
        while len(out) < end and time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None and not m.error():
                out.append(m.value().decode())
        return out
    finally:
        consumer.close()


def test_connector_config_and_source_offsets_survive_restarts(crashable_broker, tmp_path):
    broker = crashable_broker
    # One partition, so that the lines keep their order (corral auto-creates topics with 4).
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("file-lines", 1, 1)])["file-lines"].result(10)
    source = tmp_path / "input.txt"
    source.write_text("".join(f"line-{i}\n" for i in range(100)))
    sink = tmp_path / "output.txt"  # the file-sink connector copies the topic back into a file
    port = free_port()
    connect = worker(broker.bootstrap, port, tmp_path)
    try:
        until(lambda: rest(port, "/connectors") == [])
        for name, kind, file, topic in (
            ("file-source", "FileStreamSourceConnector", source, {"topic": "file-lines"}),
            ("file-sink", "FileStreamSinkConnector", sink, {"topics": "file-lines"}),
        ):
            rest(
                port,
                "/connectors",
                {
                    "name": name,
                    "config": {
                        "connector.class": f"org.apache.kafka.connect.file.{kind}",
                        "tasks.max": "1",
                        "file": str(file),
                        **topic,
                    },
                },
            )
        until(lambda: len(lines_in(broker.bootstrap, "file-lines")) == 100)
        until(lambda: sink.exists() and len(sink.read_text().splitlines()) == 100)
        time.sleep(1.5)  # a few offset flushes (offset.flush.interval.ms=300)
    finally:
        connect.send_signal(signal.SIGTERM)
        connect.wait(60)
    broker.crash_restart()
    with source.open("a") as more:
        more.write("".join(f"line-{i}\n" for i in range(100, 150)))
    connect = worker(broker.bootstrap, port, tmp_path)
    try:
        assert sorted(until(lambda: rest(port, "/connectors"))) == ["file-sink", "file-source"]
        expected = [f"line-{i}" for i in range(150)]
        until(lambda: lines_in(broker.bootstrap, "file-lines") == expected)
        # The sink's group committed its offsets on the worker's stop: no line written twice.
        until(lambda: len(sink.read_text().splitlines()) >= len(expected))
        time.sleep(2)  # nothing more comes: the first 100 lines were not copied again
        assert lines_in(broker.bootstrap, "file-lines") == expected
        assert sink.read_text().splitlines() == expected
    finally:
        connect.kill()
        connect.wait()
