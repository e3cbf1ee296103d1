"""The OffsetDelete API on the wire. Removes a group's offsets for partitions it no longer
consumes; answered once the tombstones are durable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import GROUP, TOPIC, allowed, filter_allowed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import (
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetDeleteResponsePartition,
    )
    from corral.groups.storage.records import PartitionCommit

    # OffsetFetch's answer per topic: (partition, offset, leader epoch, metadata[, error]).
    FetchedPartition = PartitionCommit | tuple[int, int, int, str, ErrorCode]
    Fetched = Sequence[tuple[str, Sequence[FetchedPartition]]]


@handles(ApiKey.OFFSET_DELETE, 0, 0)
def offset_delete(
    broker: Broker, request: Request[OffsetDeleteRequest]
) -> OffsetDeleteResponse | Later:
    body = request.body
    offsets = broker.groups.offsets
    if not allowed(broker, request, AclOperation.DELETE, GROUP, body["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []}
    if not body["group_id"]:
        return {"error_code": ErrorCode.INVALID_GROUP_ID, "topics": []}
    readable = filter_allowed(
        broker, request, AclOperation.READ, TOPIC, (t["name"] for t in body["topics"])
    )
    known_topics, unknown, refused = [], [], []
    for t in body["topics"]:
        partitions = [p["partition_index"] for p in t["partitions"]]
        if t["name"] not in readable:
            refused.append((t["name"], partitions))
            continue
        topic = broker.topics.get(t["name"])
        if topic is None:
            unknown.append((t["name"], partitions))
            continue
        valid = [p for p in partitions if 0 <= p < topic.partitions]
        if len(valid) != len(partitions):
            unknown.append((t["name"], [p for p in partitions if p not in valid]))
        known_topics.append((t["name"], valid))
    error, deleted, written = offsets.delete(body["group_id"], known_topics)
    if error:
        return {"error_code": error, "topics": []}
    return written.map(
        lambda error: (
            _offset_delete_error(error)
            if error
            else _shape_offset_delete(deleted, unknown, refused)
        )
    )


def _offset_delete_error(error: ErrorCode) -> OffsetDeleteResponse:
    return {"error_code": error, "topics": []}


def _shape_offset_delete(
    deleted: list[tuple[str, list[tuple[int, ErrorCode]]]],
    unknown: list[tuple[str, list[int]]],
    refused: list[tuple[str, list[int]]],
) -> OffsetDeleteResponse:
    out: dict[str, list[OffsetDeleteResponsePartition]] = {}
    for topic, parts in deleted:
        out.setdefault(topic, []).extend(
            {"partition_index": p, "error_code": code} for p, code in parts
        )
    for topics, code in (
        (unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ):
        for topic, missing in topics:
            out.setdefault(topic, []).extend(
                {"partition_index": p, "error_code": code} for p in missing
            )
    return {
        "error_code": ErrorCode.NONE,
        "topics": [{"name": t, "partitions": parts} for t, parts in out.items()],
    }
