"""DescribeLogDirs, DeleteRecords and ListOffsets v8-v10 over TCP: at exact versions on a raw
socket, through Kafka's own tools (kafka-log-dirs, kafka-delete-records, kafka-get-offsets) and
confluent-kafka, across kill -9, and side by side with the Apache Kafka reference broker."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka_java import kafka_reference, run_tool
from rawwire import RawClient
from wire_data import create, delete_records, fetch, produce

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def batch(n: int, ts: int) -> bytes:
    return _core.build_batch([(f"k{i}".encode(), b"v" * 100) for i in range(n)], ts)


def list_offsets(
    client: RawClient, topic: str, queries: list[tuple[int, int]], version: int = 9
) -> list[tuple[int, int, int, int, int]]:
    """[(partition, error code, timestamp, offset, leader epoch)] in answer order."""
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "timeout_ms": 5000,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": p, "timestamp": t} for p, t in queries],
            }
        ],
    }
    return [
        (p["partition_index"], p["error_code"], p["timestamp"], p["offset"], p["leader_epoch"])
        for t in client.call(ApiKey.LIST_OFFSETS, version, body)["topics"]
        for p in t["partitions"]
    ]


def one_offset(
    client: RawClient, topic: str, partition: int, timestamp: int, version: int = 9
) -> tuple[int, int, int, int]:
    """(error code, timestamp, offset, leader epoch)."""
    return list_offsets(client, topic, [(partition, timestamp)], version)[0][1:]


def describe_log_dirs(
    client: RawClient, topics: dict[str, list[int]] | None, version: int = 4
) -> dict:
    body = {
        "topics": None
        if topics is None
        else [{"topic": name, "partitions": parts} for name, parts in topics.items()]
    }
    return client.call(ApiKey.DESCRIBE_LOG_DIRS, version, body)


def segment_files(partition_dir: Path) -> list[str]:
    return sorted(p.name for p in partition_dir.glob("*.log"))


# --- DeleteRecords ----------------------------------------------------------------------------


def test_delete_records_moves_the_log_start_durably(corral):
    """Kafka's rules, segments below the start deleted, and the start kept across kill -9 right
    after the answer and across a clean restart."""
    part_dir = corral.data_dir / "logs-0"
    with RawClient(corral.port) as c:
        create(c, "logs", 2, **{"segment.bytes": "2000"})
        for i in range(30):  # 30 batches of 3 records, several segments
            assert produce(c, "logs", 0, batch(3, 1000 + i))["error_code"] == 0
        segments = segment_files(part_dir)
        assert len(segments) >= 4
        # Offset 31 is inside the batch (30, 31, 32) at timestamp 1010, and inside a segment.
        assert delete_records(c, [("logs", [(0, 31)])], version=0) == [("logs", 0, 0, 31)]
        left = segment_files(part_dir)
        assert 0 < len(left) < len(segments) and left == segments[-len(left) :], (
            "whole segments below go"
        )
        assert int(left[0][:-4]) <= 31
        assert one_offset(c, "logs", 0, EARLIEST) == (0, -1, 31, 0)
        assert one_offset(c, "logs", 0, EARLIEST_LOCAL) == (0, -1, 31, 0)
        assert one_offset(c, "logs", 0, 0) == (0, 1010, 31, 0), (
            "timestamps are looked up from the start"
        )
        below = fetch(c, "logs", 0, 30)["responses"][0]["partitions"][0]
        assert (below["error_code"], below["high_watermark"], below["log_start_offset"]) == (
            ErrorCode.OFFSET_OUT_OF_RANGE,
            -1,
            -1,
        )
        at = fetch(c, "logs", 0, 31)["responses"][0]["partitions"][0]
        assert at["error_code"] == 0 and at["log_start_offset"] == 31
        assert _core.decode_batches(at["records"])[0][0] == 30, "whole batches, as Kafka sends them"
        # Never backwards; -1 is the high watermark; past it, or another negative, is out of range.
        assert delete_records(c, [("logs", [(0, 5)])], version=1) == [("logs", 0, 0, 31)]
        out = ErrorCode.OFFSET_OUT_OF_RANGE
        assert delete_records(c, [("logs", [(0, 91), (1, -2)])]) == [
            ("logs", 0, out, -1),
            ("logs", 1, out, -1),
        ]
        assert delete_records(c, [("logs", [(0, 2**63 - 1), (1, -(2**63))])]) == [
            ("logs", 0, out, -1),
            ("logs", 1, out, -1),
        ]
        assert delete_records(c, [("logs", [(1, -1)])]) == [("logs", 1, 0, 0)], "an empty partition"
        # A partition named twice is answered once, with the offset named last, as Kafka's map.
        assert delete_records(c, [("logs", [(0, 40), (0, 45)]), ("logs", [(0, 44)])]) == [
            ("logs", 0, 0, 44)
        ]
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert delete_records(c, [("logs", [(2, 0), (-1, 0)]), ("nope", [(0, 0)])]) == [
            ("logs", 2, unknown, -1),
            ("logs", -1, unknown, -1),
            ("nope", 0, unknown, -1),
        ]
        assert delete_records(c, [("__consumer_offsets", [(0, -1)])]) == [
            ("__consumer_offsets", 0, ErrorCode.INVALID_TOPIC_EXCEPTION, -1)
        ]
        assert delete_records(c, [("logs", [(0, 60)])]) == [("logs", 0, 0, 60)]
    corral.kill()  # right after the answer
    corral.start()
    with RawClient(corral.port) as c:
        assert one_offset(c, "logs", 0, EARLIEST) == (0, -1, 60, 0)
        assert one_offset(c, "logs", 0, LATEST) == (0, -1, 90, 0)
        assert (
            fetch(c, "logs", 0, 59)["responses"][0]["partitions"][0]["error_code"]
            == ErrorCode.OFFSET_OUT_OF_RANGE
        )
        # Up to the end: the log is empty from there, and goes on.
        assert delete_records(c, [("logs", [(0, -1)])]) == [("logs", 0, 0, 90)]
        assert len(segment_files(part_dir)) == 1
        assert produce(c, "logs", 0, batch(2, 5000))["base_offset"] == 90
    corral.restart()
    with RawClient(corral.port) as c:
        assert one_offset(c, "logs", 0, EARLIEST) == (0, -1, 90, 0)
        assert one_offset(c, "logs", 0, LATEST) == (0, -1, 92, 0)
        data = fetch(c, "logs", 0, 90)["responses"][0]["partitions"][0]["records"]
        assert [r[0] for r in _core.decode_batches(data)] == [90, 91]
        assert delete_records(c, [("logs", [(0, 91)])]) == [("logs", 0, 0, 91)]
    assert "DeleteRecords: log start offset of logs-0 is 91" in corral.log()


def test_deleted_topic_does_not_pass_its_log_start_on(corral):
    """A topic recreated under the same name starts at 0 again."""
    with RawClient(corral.port) as c:
        create(c, "again")
        produce(c, "again", 0, batch(5, 1000))
        assert delete_records(c, [("again", [(0, 4)])]) == [("again", 0, 0, 4)]
        body = {"topics": [{"name": "again", "topic_id": bytes(16)}], "timeout_ms": 5000}
        assert c.call(ApiKey.DELETE_TOPICS, 6, body)["responses"][0]["error_code"] == 0
        create(c, "again")
        assert one_offset(c, "again", 0, EARLIEST) == (0, -1, 0, 0)
        assert produce(c, "again", 0, batch(1, 1000))["base_offset"] == 0


# --- ListOffsets v8-v10 -----------------------------------------------------------------------


def test_list_offsets_earliest_local_and_latest_tiered(shared_corral):
    with RawClient(shared_corral.port) as c:
        create(c, "tiers", 2)
        for i in range(3):
            produce(c, "tiers", 0, batch(2, 2000 + i))
        delete_records(c, [("tiers", [(0, 2)])])
        for version in (8, 9, 10):
            assert one_offset(c, "tiers", 0, EARLIEST_LOCAL, version) == (0, -1, 2, 0)
            assert one_offset(c, "tiers", 1, EARLIEST_LOCAL, version) == (0, -1, 0, 0)
            assert one_offset(c, "tiers", 0, MAX_TIMESTAMP, version) == (0, 2002, 4, 0)
        for version in (9, 10):
            # Nothing is tiered: Kafka's answer without remote storage.
            assert one_offset(c, "tiers", 0, LATEST_TIERED, version) == (0, -1, -1, -1)
            assert one_offset(c, "tiers", 1, LATEST_TIERED, version) == (0, -1, -1, -1)
        unsupported = (ErrorCode.UNSUPPORTED_VERSION, -1, -1, -1)
        assert one_offset(c, "tiers", 0, EARLIEST_LOCAL, 7) == unsupported
        assert one_offset(c, "tiers", 0, LATEST_TIERED, 8) == unsupported
        assert one_offset(c, "tiers", 0, MAX_TIMESTAMP, 6) == unsupported
        assert one_offset(c, "tiers", 0, -6, 10) == unsupported, "EARLIEST_PENDING_UPLOAD is v11"
        assert one_offset(c, "nope", 0, LATEST_TIERED) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            -1,
            -1,
            -1,
        )
        # A partition asked twice is answered once, INVALID_REQUEST; the others normally.
        assert list_offsets(c, "tiers", [(0, LATEST), (1, LATEST), (0, EARLIEST)]) == [
            (0, ErrorCode.INVALID_REQUEST, -1, -1, -1),
            (1, 0, -1, 0, 0),
        ]


# --- DescribeLogDirs --------------------------------------------------------------------------


def test_describe_log_dirs(shared_corral):
    data_dir = shared_corral.data_dir
    with RawClient(shared_corral.port) as c:
        create(c, "dirs", 3, **{"segment.bytes": "2000"})
        for i in range(20):
            produce(c, "dirs", 0, batch(3, 1000 + i))
        produce(c, "dirs", 1, batch(1, 1000))
        on_disk = {
            p: sum(f.stat().st_size for f in (data_dir / f"dirs-{p}").glob("*.log")) for p in (0, 1)
        }
        assert on_disk[0] > 4000 and on_disk[1] > 0
        for version in (1, 2, 3, 4):
            answer = describe_log_dirs(c, {"dirs": [0, 1, 2, 7], "nope": [0]}, version)
            [result] = answer["results"]
            assert result["error_code"] == 0 and result["log_dir"] == os.path.abspath(data_dir)
            [topic] = result["topics"]
            assert topic["name"] == "dirs", "partitions and topics that do not exist are left out"
            assert {
                p["partition_index"]: (p["partition_size"], p["offset_lag"], p["is_future_key"])
                for p in topic["partitions"]
            } == {0: (on_disk[0], 0, False), 1: (on_disk[1], 0, False), 2: (0, 0, False)}
            if version >= 4:
                fs = os.statvfs(data_dir)
                assert result["total_bytes"] == fs.f_blocks * fs.f_frsize
                assert 0 < result["usable_bytes"] <= result["total_bytes"]
        everything = describe_log_dirs(c, None)["results"][0]["topics"]
        counts = {t["name"]: len(t["partitions"]) for t in everything}
        assert counts["dirs"] == 3 and counts["__consumer_offsets"] == 50
        assert describe_log_dirs(c, {})["results"][0]["topics"] == []


# --- Kafka's tools and confluent-kafka ----------------------------------------------------------


def test_kafka_tools(corral, tmp_path):
    """kafka-log-dirs, kafka-delete-records and kafka-get-offsets (kafka-tools 4.3.1)."""
    with RawClient(corral.port) as c:
        create(c, "tooled", 2)
        for i in range(4):
            produce(c, "tooled", 0, batch(5, 1000 + i))
    server = f"--bootstrap-server {corral.bootstrap}"
    spec = tmp_path / "delete.json"
    spec.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "tooled", "partition": 0, "offset": 7}]})
    )
    command = f"{server} --offset-json-file {spec}"
    code, out = run_tool("org.apache.kafka.tools.DeleteRecordsCommand", [command])[command]
    assert code == 0 and "partition: tooled-0\tlow_watermark: 7" in out, out
    command = f"{server} --describe --topic-list tooled"
    code, out = run_tool("org.apache.kafka.tools.LogDirsCommand", [command])[command]
    assert code == 0, out
    [broker] = json.loads(out.splitlines()[-1])["brokers"]
    [log_dir] = broker["logDirs"]
    assert log_dir["logDir"] == os.path.abspath(corral.data_dir) and log_dir["error"] is None
    sizes = {
        p["partition"]: (p["size"], p["offsetLag"], p["isFuture"]) for p in log_dir["partitions"]
    }
    size = (corral.data_dir / "tooled-0" / "00000000000000000000.log").stat().st_size
    assert sizes == {"tooled-0": (size, 0, False), "tooled-1": (0, 0, False)}
    times = ["earliest", "earliest-local", "latest-tiered", "latest", "max-timestamp"]
    commands = [f"{server} --topic tooled --time {t}" for t in times]
    out = run_tool("org.apache.kafka.tools.GetOffsetShell", commands)
    lines = {t: sorted(out[c][1].split()) for t, c in zip(times, commands)}
    assert all(out[c][0] == 0 for c in commands), out
    assert lines["earliest"] == lines["earliest-local"] == ["tooled:0:7", "tooled:1:0"]
    assert lines["latest-tiered"] == [], "offset -1 (nothing tiered) is not printed, as with Kafka"
    assert lines["latest"] == ["tooled:0:20", "tooled:1:0"]
    assert lines["max-timestamp"] == ["tooled:0:15"]


def test_confluent_delete_records_and_consumers_resume_at_the_start(corral):
    admin = AdminClient({"bootstrap.servers": corral.bootstrap})
    with RawClient(corral.port) as c:
        create(c, "resume", 2)
    producer = Producer({"bootstrap.servers": corral.bootstrap, "linger.ms": 0})
    for i in range(30):
        producer.produce("resume", f"v{i}".encode(), partition=i % 2, timestamp=1000 + i)
    assert producer.flush(10) == 0
    futures = admin.delete_records(
        [TopicPartition("resume", 0, 10), TopicPartition("resume", 1, 20)]
    )
    results = {(tp.partition): f for tp, f in futures.items()}
    assert results[0].result(10).low_watermark == 10
    with pytest.raises(KafkaException) as error:
        results[1].result(10)
    assert error.value.args[0].code() == ErrorCode.OFFSET_OUT_OF_RANGE
    specs = {
        TopicPartition("resume", 0): OffsetSpec.earliest(),
        TopicPartition("resume", 1): OffsetSpec.latest(),
    }
    offsets = {tp.partition: f.result(10).offset for tp, f in admin.list_offsets(specs).items()}
    assert offsets == {0: 10, 1: 15}
    late = admin.list_offsets({TopicPartition("resume", 0): OffsetSpec.max_timestamp()})
    assert [f.result(10).offset for f in late.values()] == [14]
    # A new group with auto.offset.reset=earliest starts at the log start; records below are gone.
    consumer = Consumer(
        {
            "bootstrap.servers": corral.bootstrap,
            "group.id": f"g-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("resume", 0)])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.offset())
        assert got == [10, 11, 12, 13, 14]
        # A consumer positioned below the start (a stale committed offset) is reset to it.
        consumer.seek(TopicPartition("resume", 0, 3))
        message = None
        deadline = time.monotonic() + 20
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
            if polled is not None and polled.error() is None:
                message = polled
        assert message is not None and message.offset() == 10
    finally:
        consumer.close()


# --- Side by side with Apache Kafka -----------------------------------------------------------


def scenario(port: int) -> dict:
    """What a client sees: the same requests against either broker. Kafka makes
    `__consumer_offsets` on first use, so a FindCoordinator comes first."""
    seen: dict = {}
    with RawClient(port) as c:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            body = {"key_type": 0, "coordinator_keys": ["g"]}
            if c.call(ApiKey.FIND_COORDINATOR, 4, body)["coordinators"][0]["error_code"] == 0:
                break
            time.sleep(0.2)
        create(c, "side", 2)
        deadline = time.monotonic() + 30  # Kafka's metadata may lag its answer to CreateTopics
        while produce(c, "side", 0, batch(4, 1000))["error_code"] and time.monotonic() < deadline:
            time.sleep(0.1)
        for i in range(1, 5):
            produce(c, "side", 0, batch(4, 1000 + i))
        for t in (LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, -6, 1002, 9999):
            for version in (7, 8, 9, 10):
                seen[f"list {t} v{version}"] = one_offset(c, "side", 0, t, version)
        seen["list empty"] = [
            one_offset(c, "side", 1, t)
            for t in (LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED)
        ]
        # Sorted: Kafka answers partitions in its map's order.
        seen["list dup"] = sorted(
            list_offsets(c, "side", [(0, LATEST), (1, LATEST), (0, EARLIEST)])
        )
        seen["delete"] = sorted(
            delete_records(c, [("side", [(0, 6), (1, 1), (9, 1)]), ("nope", [(0, 1)])])
        )
        seen["delete dup"] = delete_records(c, [("side", [(0, 9), (0, 8)]), ("side", [(0, 7)])])
        seen["delete back"] = delete_records(c, [("side", [(0, 2)])], version=0)
        for bad in (21, -2, 2**63 - 1):
            seen[f"delete {bad}"] = delete_records(c, [("side", [(0, bad)])], version=1)
        seen["delete internal"] = delete_records(c, [("__consumer_offsets", [(0, -1)])])
        for t in (LATEST, EARLIEST, EARLIEST_LOCAL, 1000, 1001, 1002):
            seen[f"after {t}"] = one_offset(c, "side", 0, t)
        for offset in (6, 7, 20, 21):
            part = fetch(c, "side", 0, offset)["responses"][0]["partitions"][0]
            records = _core.decode_batches(part["records"]) if part["records"] else []
            seen[f"fetch {offset}"] = (
                part["error_code"],
                part["high_watermark"],
                part["log_start_offset"],
                [r[0] for r in records][:1],
            )
        seen["delete all"] = delete_records(c, [("side", [(0, -1)])])
        seen["after all"] = [one_offset(c, "side", 0, t) for t in (LATEST, EARLIEST, 1000)]
        for version in (1, 4):
            [result] = describe_log_dirs(c, {"side": [0, 1, 5], "nope": [0]}, version)["results"]
            seen[f"dirs v{version}"] = (
                result["error_code"],
                [
                    (
                        t["name"],
                        sorted(
                            (
                                p["partition_index"],
                                p["partition_size"] > 0,
                                p["offset_lag"],
                                p["is_future_key"],
                            )
                            for p in t["partitions"]
                        ),
                    )
                    for t in result["topics"]
                ],
                result["total_bytes"] > 0,
                result["usable_bytes"] > 0,
            )
        everything = describe_log_dirs(c, None)["results"][0]["topics"]
        seen["dirs all"] = sorted(t["name"] for t in everything)
    return seen


def test_same_answers_as_kafka(corral_factory):
    broker = corral_factory(**{"offsets.topic.num.partitions": 1})  # as the reference's
    ours = scenario(broker.port)
    # Not trivially equal: what corral answered is what Kafka's rules say.
    assert ours["delete"] == [
        ("nope", 0, 3, -1),
        ("side", 0, 0, 6),
        ("side", 1, 1, -1),
        ("side", 9, 3, -1),
    ]
    assert ours["delete dup"] == [("side", 0, 0, 7)] and ours["after -4"] == (0, -1, 7, 0)
    assert ours["fetch 6"] == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, [])
    assert ours["delete internal"] == [
        ("__consumer_offsets", 0, ErrorCode.INVALID_TOPIC_EXCEPTION, -1)
    ]
    # corral's own internal topic (docs/analytics.md) is in its log dir; Kafka has none.
    assert "__corral_analytics" in ours["dirs all"]
    ours["dirs all"].remove("__corral_analytics")
    with kafka_reference({}) as bootstrap:
        theirs = scenario(int(bootstrap.rsplit(":", 1)[1]))
    assert ours == theirs
