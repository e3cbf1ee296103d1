"""KIP-848 consumer group records in a real corral's `__consumer_offsets`, read by Apache
Kafka's own tools (kafka-tools, Java): after a real consumer group (librdkafka,
group.protocol=consumer) on a corral broker, Kafka's console consumer and its formatters read
corral's `__consumer_offsets` without an error, and Kafka's DumpLogSegments prints every record
of corral's segment files as corral reads it. The JVM parts run from the caches ci/setup.sh
prepares (tests/kits/kafka_records.py). The records' bytes against Kafka's generated classes,
without a broker: tests/unit/groups/storage/test_consumer_records.py."""

from __future__ import annotations

import json
import subprocess
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_records import kafka_json, tools

from corral import _core
from corral.groups.storage.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_EPOCH,
    MEMBER_METADATA,
    REGEX,
    TARGET_EPOCH,
    TARGET_MEMBER,
    decode,
)
from corral.groups.storage.placement import OFFSETS_TOPIC, partition_for

GROUP, TOPIC = "kip848-formatters", "kip848-topic"


CONSUMER_TYPES = {
    GROUP_EPOCH,
    MEMBER_METADATA,
    TARGET_EPOCH,
    TARGET_MEMBER,
    CURRENT_ASSIGNMENT,
    REGEX,
}


def run_tool(main: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{tools()}/*",
            main,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def json_objects(text: str) -> list:
    """The formatters' output: JSON objects one after another, no separator."""
    decoder, objects, pos = json.JSONDecoder(), [], 0
    while pos < len(text.rstrip()):
        obj, pos = decoder.raw_decode(text, pos)
        objects.append(obj)
    return objects


def form_group(bootstrap: str) -> list[tuple[int, int]]:
    """Two librdkafka members (group.protocol=consumer) share 4 partitions, commit offsets and
    leave; returns the commits (partition, offset)."""
    consumers = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "client.id": f"member-{i}",
                "enable.auto.commit": False,
            }
        )
        for i in range(2)
    ]
    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while True:
            for consumer in consumers:
                consumer.poll(0.05)
            owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
            if all(owned) and sorted(sum(owned, [])) == [0, 1, 2, 3]:
                break
            assert time.monotonic() < deadline, f"no stable assignment: {owned}"
        commits = []
        for consumer, partitions in zip(consumers, owned):
            consumer.commit(
                offsets=[TopicPartition(TOPIC, p, 10 + p) for p in partitions], asynchronous=False
            )
            commits += [(p, 10 + p) for p in partitions]
        return sorted(commits)
    finally:
        for consumer in consumers:
            consumer.close()


def test_kafka_tools_read_corral_log(corral_factory):
    broker = corral_factory(
        **{
            "group.consumer.assignment.interval.ms": 0,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 100,
        }
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(timeout=10)
    commits = form_group(broker.bootstrap)
    partitions = len(admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC].partitions)
    partition = partition_for(GROUP, partitions)

    # corral's own reading of its log, record by record.
    directory = broker.data_dir / f"{OFFSETS_TOPIC}-{partition}"
    segments = sorted(directory.glob("*.log"))
    log = [
        (offset, key, value)
        for segment in segments
        for offset, _, key, value in _core.decode_batches(segment.read_bytes())
    ]
    kinds = [int.from_bytes(key[:2], "big") for _, key, _ in log]
    assert CONSUMER_TYPES - {REGEX} <= set(kinds)

    # The console consumer over the wire: both formatters deserialize every record (a bad one
    # fails the run); OffsetsMessageFormatter prints the commits. (Kafka's formatters print no
    # consumer group record: GroupMetadataMessageFormatter keeps type 2 only, classic groups.)
    printed = {}
    for formatter in ("GroupMetadataMessageFormatter", "OffsetsMessageFormatter"):
        run = run_tool(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            OFFSETS_TOPIC,
            "--partition",
            str(partition),
            "--offset",
            "earliest",
            "--max-messages",
            str(len(log)),
            "--timeout-ms",
            "30000",
            "--formatter",
            f"org.apache.kafka.tools.consumer.{formatter}",
        )
        assert run.returncode == 0, run.stderr
        assert f"Processed a total of {len(log)} messages" in run.stderr, run.stderr
        assert "ERROR" not in run.stderr and "Exception" not in run.stderr, run.stderr
        printed[formatter] = json_objects(run.stdout)
    assert printed["GroupMetadataMessageFormatter"] == []
    assert (
        sorted(
            (r["key"]["data"]["partition"], r["value"]["data"]["offset"])
            for r in printed["OffsetsMessageFormatter"]
            if r["key"]["data"]["group"] == GROUP
        )
        == commits
    )

    # DumpLogSegments on corral's segment files prints every record as corral decodes it.
    broker.stop()
    run = run_tool(
        "org.apache.kafka.tools.DumpLogSegments",
        "--offsets-decoder",
        "--files",
        ",".join(map(str, segments)),
    )
    assert run.returncode == 0, run.stderr
    dumped = [line for line in run.stdout.splitlines() if line.startswith("| offset: ")]
    assert len(dumped) == len(log), run.stdout
    for line, (offset, key, value) in zip(dumped, log):
        assert line.startswith(f"| offset: {offset} "), line
        assert "Error" not in line and "Unknown record type" not in line, line
        kind = int.from_bytes(key[:2], "big")
        key_text, payload_text = line.split(" key: ", 1)[1].split(" payload: ", 1)
        printed_key = json.loads(key_text)
        assert printed_key["type"] == str(kind)
        if kind not in CONSUMER_TYPES:
            assert printed_key["data"]["group"] == GROUP, line  # an offset commit
            continue
        expected = kafka_json(decode(key, value))
        assert printed_key["data"] == expected["key"], line
        if value is None:
            assert payload_text == "<DELETE>", line
        else:
            assert json.loads(payload_text) == {"version": "0", "data": expected["value"]}, line
    members = {
        json.loads(line.split(" payload: ")[1])["data"]["clientId"]
        for line in dumped
        if '"type":"5"' in line and not line.endswith("<DELETE>")
    }
    assert members == {"member-0", "member-1"}
    assert any(line.endswith("<DELETE>") for line in dumped)  # the members left
