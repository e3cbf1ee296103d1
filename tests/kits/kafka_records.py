"""Kafka's own classes on corral's KIP-848 records in `__consumer_offsets` (record types 3, 4,
5-8, 16), for tests/unit/groups/storage/test_consumer_records.py.

`KafkaRecords` runs tests/clients/java/ConsumerRecordsGolden.java (compiled once into the cache against
the kafka-group-coordinator 4.4.0 jars the reference broker uses): one JVM answers many requests,
"encode" (a record given in the JSON form of Kafka's generated converters, serialized by
GroupCoordinatorRecordSerde) and "decode" (bytes read back by that serde, as JSON). `kafka_json`
gives a corral record in that JSON form. `tools()` is the kafka-tools jars (DumpLogSegments, the
console consumer and its formatters) at TOOLS_VERSION, the newest whose jars are all on Maven
Central, with their own dependencies at that version.

    python tests/kits/kafka_records.py compile     # CI setup: compile the program, fetch the tools

    kafka = KafkaRecords()
    key, value = kafka.encode(kafka_json(record))
    as_kafka_reads_it = kafka.decode(key_of(record), value_of(record))
    as_kafka_replays_it = kafka.member(key_of(record), value_of(record))  # type 8
    kafka.close()
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
from checkout import JAVA
from kafka_ref import DEFAULT_VERSION, compile_java, fetch

from corral.groups.storage.consumer_records import (
    GROUP_EPOCH,
    PARTITION_METADATA,
    TARGET_EPOCH,
    ConsumerTombstone,
    CurrentAssignment,
    GroupEpoch,
    MemberMetadata,
    RegexTopics,
    TargetEpoch,
    TargetMember,
    key_of,
)

SOURCE = JAVA / "ConsumerRecordsGolden.java"
TOOLS_VERSION = "4.3.1"  # kafka-tools 4.4.0 is not on Maven Central


def tools(version: str = TOOLS_VERSION) -> Path:
    """The directory of the kafka-tools jars (and their dependencies), fetched on first use."""
    return fetch(version, "kafka-tools")


def uuid_text(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode()


def _topics(assignment, epochs=None) -> list[dict]:
    # In corral's order (topic id bytes), which is the order its encoder writes; a topic's
    # AssignmentEpochs (KIP-1251, tagged, default null) only when it has them.
    out = []
    for t in sorted(assignment):
        topic = {"topicId": uuid_text(t), "partitions": list(assignment[t])}
        if epochs and t in epochs:
            topic["assignmentEpochs"] = list(epochs[t])
        out.append(topic)
    return out


def _value_json(record) -> dict | None:
    """The value in the JSON form of Kafka's converters; tagged fields at their default are left
    out, as Kafka's JSON writer leaves them out."""
    if isinstance(record, ConsumerTombstone):
        return None
    if isinstance(record, GroupEpoch):
        value = {"epoch": record.epoch}
        return value | ({"metadataHash": record.metadata_hash} if record.metadata_hash else {})
    if isinstance(record, MemberMetadata):
        value = {
            "instanceId": record.instance_id,
            "rackId": record.rack_id,
            "clientId": record.client_id,
            "clientHost": record.client_host,
            "subscribedTopicNames": list(record.topic_names),
            "subscribedTopicRegex": record.regex,
            "rebalanceTimeoutMs": record.rebalance_timeout_ms,
            "serverAssignor": record.server_assignor,
        }
        # Its default is an empty struct, not null: null is written out.
        if record.classic is None:
            value["classicMemberMetadata"] = None
        elif record.classic.session_timeout_ms or record.classic.protocols:
            value["classicMemberMetadata"] = {
                "sessionTimeoutMs": record.classic.session_timeout_ms,
                "supportedProtocols": [
                    {"name": name, "metadata": base64.b64encode(data).decode()}
                    for name, data in record.classic.protocols
                ],
            }
        return value
    if isinstance(record, TargetEpoch):
        value = {"assignmentEpoch": record.epoch}
        return value | ({"assignmentTimestamp": record.timestamp_ms} if record.timestamp_ms else {})
    if isinstance(record, TargetMember):
        return {"topicPartitions": _topics(record.partitions)}
    if isinstance(record, CurrentAssignment):
        return {
            "memberEpoch": record.epoch,
            "previousMemberEpoch": record.previous_epoch,
            "state": record.state,
            "assignedPartitions": _topics(record.assigned, record.assigned_epochs),
            "partitionsPendingRevocation": _topics(
                record.pending_revocation, record.pending_epochs
            ),
        }
    if isinstance(record, RegexTopics):
        return {
            "topics": list(record.topics),
            "version": record.version,
            "timestamp": record.timestamp_ms,
        }
    raise TypeError(f"not a consumer group record: {record!r}")


def kafka_json(record) -> dict:
    """{"type", "key", "value"} of a corral record, as Kafka's converters read and write it."""
    kind = int.from_bytes(key_of(record)[:2], "big")
    key = {"groupId": record.group_id}
    if isinstance(record, RegexTopics) or (isinstance(record, ConsumerTombstone) and kind == 16):
        key["regularExpression"] = record.regex if isinstance(record, RegexTopics) else record.name
    elif kind not in (GROUP_EPOCH, PARTITION_METADATA, TARGET_EPOCH):
        key["memberId"] = record.name if isinstance(record, ConsumerTombstone) else record.member_id
    return {"type": kind, "key": key, "value": _value_json(record)}


class KafkaRecords:
    """One JVM running ConsumerRecordsGolden; requests and answers a line each."""

    def __init__(self, version: str = DEFAULT_VERSION):
        classes = compile_java(SOURCE, version)
        self.process = subprocess.Popen(
            [
                "java",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{classes}:{fetch(version)}/*",
                "ConsumerRecordsGolden",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def _request(self, request: dict) -> dict:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("ConsumerRecordsGolden exited")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"Kafka: {answer['error']} (request {request})")
        return answer

    def encode(self, record_json: dict) -> tuple[bytes, bytes | None]:
        """Kafka's key and value bytes of a record in kafka_json's form."""
        answer = self._request({"encode": record_json})
        value = answer["value"]
        return bytes.fromhex(answer["key"]), None if value is None else bytes.fromhex(value)

    def decode(self, key: bytes, value: bytes | None) -> dict:
        """What Kafka reads from these bytes, in kafka_json's form (bytes left over fail)."""
        answer = self._request(
            {"decode": {"key": key.hex(), "value": None if value is None else value.hex()}}
        )
        assert answer.pop("version", 0) == 0
        return answer

    def member(self, key: bytes, value: bytes) -> dict:
        """A current-assignment record replayed into Kafka's ConsumerGroupMember: {"memberEpoch",
        "assignedPartitions" and "partitionsPendingRevocation" as {topic id text: {partition
        text: assignment epoch}}}."""
        return self._request({"member": {"key": key.hex(), "value": value.hex()}})

    def close(self) -> None:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.close()  # the program exits at the end of its input
        self.process.wait(timeout=30)
        self.process.stdout.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["compile"]:
        print(compile_java(SOURCE))
        print(tools())
    else:
        raise SystemExit("usage: python tests/kits/kafka_records.py compile")
