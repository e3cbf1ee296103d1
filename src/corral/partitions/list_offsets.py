"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp; and
(v8, v9: KIP-405, KIP-1005) earliest-local and latest-tiered, answered as Kafka answers without
tiered storage: earliest-local is the log start offset, latest-tiered offset -1. v10 (KIP-1075)
only adds a timeout for remote lookups, which corral never makes. With isolation level
read_committed (v2+), LATEST is the last stable offset and a timestamp hit at or past it is no
hit (Partition.fetchOffsetForTimestamp)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.store import StorageError, storage_warning
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.partitions.messages import (
        ListOffsetsPartitionResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        ListOffsetsTopicResponse,
    )
    from corral.partitions.store import PartitionLogs
    from corral.topics.registry import Topic

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# The first version that may ask for each special timestamp (ReplicaManager's
# timestampMinSupportedVersion); any other negative timestamp is UNSUPPORTED_VERSION.
MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
# corral writes every batch with partition leader epoch 0 (one node, never a new leader).
LEADER_EPOCH = 0
NO_EPOCH = -1
READ_COMMITTED = 1


@handles(ApiKey.LIST_OFFSETS, 1, 10)
def list_offsets(broker: Broker, request: Request[ListOffsetsRequest]) -> ListOffsetsResponse:
    body, version = request.body, request.api_version
    committed = version >= 2 and body["isolation_level"] == READ_COMMITTED
    # Kafka answers per partition, once: a partition named twice gets one INVALID_REQUEST.
    wanted: dict[str, dict[int, int | None]] = {}
    for topic_req in body["topics"]:
        partitions = wanted.setdefault(topic_req["name"], {})
        for part in topic_req["partitions"]:
            index = part["partition_index"]
            partitions[index] = None if index in partitions else part["timestamp"]
    describable = filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, wanted)
    topics: list[ListOffsetsTopicResponse] = []
    refused: list[ListOffsetsTopicResponse] = []
    for name, parts in wanted.items():
        if name not in describable:
            # Kafka answers these after the others, every partition asked for.
            refused.append(
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p["partition_index"],
                            "timestamp": -1,
                            "offset": -1,
                            "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        }
                        for t in body["topics"]
                        if t["name"] == name
                        for p in t["partitions"]
                    ],
                }
            )
            continue
        topic = broker.topics.get(name)
        answers: list[ListOffsetsPartitionResponse] = []
        for index, timestamp in parts.items():
            entry: ListOffsetsPartitionResponse = {
                "partition_index": index,
                "timestamp": -1,
                "offset": -1,
            }
            answers.append(entry)
            if timestamp is None:
                entry["error_code"] = ErrorCode.INVALID_REQUEST
                continue
            if timestamp < 0 and version < MIN_VERSION.get(timestamp, version + 1):
                entry["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                continue
            if topic is None or not 0 <= index < topic.partitions:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if not broker.leads(topic, index):
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            try:
                found = _lookup(broker.logs, topic, index, timestamp, committed)
            except StorageError as e:
                storage_warning(
                    "list_offsets",
                    "ListOffsets of %s-%d answered KAFKA_STORAGE_ERROR: %s",
                    topic.name,
                    index,
                    e,
                )
                entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if found is not None:
                entry["timestamp"], entry["offset"], epoch = found
                if version >= 4:
                    entry["leader_epoch"] = epoch
        topics.append({"name": name, "partitions": answers})
    return {"topics": topics + refused}


def _lookup(
    logs: PartitionLogs, topic: Topic, partition: int, timestamp: int, committed: bool
) -> tuple[int, int, int] | None:
    """(timestamp, offset, leader epoch) for the query, or None when no record matches.
    `committed`: read_committed, bounded by the last stable offset."""
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        # Without tiered storage the whole log is local (UnifiedLog.fetchOffsetByTimestamp).
        return -1, logs.offsets(topic, partition)[0], LEADER_EPOCH
    bound = logs.stable_offset(topic, partition) if committed else logs.offsets(topic, partition)[1]
    if timestamp == LATEST:
        return -1, bound, LEADER_EPOCH
    if timestamp == LATEST_TIERED:
        # Nothing is tiered: Kafka answers offset -1 with epoch -1.
        return -1, -1, NO_EPOCH
    found = (
        logs.max_timestamp(topic, partition)
        if timestamp == MAX_TIMESTAMP
        else logs.offset_for_timestamp(topic, partition, timestamp)
    )
    if found is None or found[1] >= bound:
        return None
    return (*found, LEADER_EPOCH)
