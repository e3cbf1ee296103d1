"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp."""

from __future__ import annotations

from typing import Any

from .apis import ApiKey, handles
from .errors import ErrorCode
from .log import StorageError, storage_warning

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
# corral writes every batch with partition leader epoch 0 (one node, never a new leader).
LEADER_EPOCH = 0


@handles(ApiKey.LIST_OFFSETS, 1, 7)
def list_offsets(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    topics = []
    for topic_req in body["topics"]:
        topic = broker.topics.get(topic_req["name"])
        partitions = []
        for part in topic_req["partitions"]:
            index = part["partition_index"]
            entry: dict[str, Any] = {"partition_index": index, "timestamp": -1, "offset": -1}
            partitions.append(entry)
            if topic is None or not 0 <= index < topic.partitions:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                found = _lookup(broker.logs, topic, index, part["timestamp"])
            except StorageError as e:
                storage_warning("list_offsets", "ListOffsets of %s-%d answered "
                                "KAFKA_STORAGE_ERROR: %s", topic.name, index, e)
                entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if found is not None:
                entry["timestamp"], entry["offset"] = found
                if version >= 4:
                    entry["leader_epoch"] = LEADER_EPOCH
        topics.append({"name": topic_req["name"], "partitions": partitions})
    return {"topics": topics}


def _lookup(logs, topic, partition: int, timestamp: int) -> tuple[int, int] | None:
    """(timestamp, offset) for the query, or None when no record matches."""
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, logs.offsets(topic, partition)[0]
    if timestamp == LATEST:
        # Without transactions the last stable offset is the high watermark.
        return -1, logs.offsets(topic, partition)[1]
    if timestamp == MAX_TIMESTAMP:
        return logs.max_timestamp(topic, partition)
    return logs.offset_for_timestamp(topic, partition, timestamp)
