"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets
(reference/share-groups.md §3): where each share partition of a share group starts (its SPSO) and
its lag; moving those starts or forgetting them while the group is empty (kafka-share-groups
--reset-offsets, --delete-offsets)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.groups.share import ShareGroup
from corral.groups.share.protocol import admin_group, alter_offsets, delete_offsets
from corral.later import wait
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import GROUP, TOPIC, allowed, filter_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.share.messages import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsResponse,
        DeleteShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsResponse,
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsResponse,
        DescribeShareGroupOffsetsResponseGroup,
        DescribeShareGroupOffsetsResponseTopic,
    )


NOT_HOSTED = "This server does not host this topic-partition."
# Kafka's messages of the share offsets' group errors.
MESSAGES = {ErrorCode.NON_EMPTY_GROUP: "The group is not empty."}


def _unsupported(broker: Broker) -> bool:
    return broker.shares is None


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1)
def describe_share_group_offsets(
    broker: Broker, request: Request[DescribeShareGroupOffsetsRequest]
) -> DescribeShareGroupOffsetsResponse:
    groups: list[DescribeShareGroupOffsetsResponseGroup] = []
    for g in request.body["groups"]:
        group_id = g["group_id"]
        if _unsupported(broker):
            groups.append(_group_error(group_id, ErrorCode.UNSUPPORTED_VERSION))
        elif not allowed(broker, request, AclOperation.DESCRIBE, GROUP, group_id):
            groups.append(_group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        else:
            groups.append(_describe(broker, request, group_id, g["topics"]))
    return {"groups": groups}


def _group_error(
    group_id: str, code: ErrorCode, message: str | None = None
) -> DescribeShareGroupOffsetsResponseGroup:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": message}


def _describe(
    broker: Broker, request: Request[Any], group_id: str, asked: list[Any] | None
) -> DescribeShareGroupOffsetsResponseGroup:
    groups = broker.groups
    shares = broker.shares
    assert shares is not None, "checked by the caller"
    if asked is None:
        # Every initialized partition; Kafka answers an unknown group with none, no error.
        group = groups.groups.get(group_id)
        initialized = group.initialized if isinstance(group, ShareGroup) else {}
        wanted = [(name, list(parts)) for name, parts in initialized.values()]
    else:
        wanted = [(t["topic_name"], t["partitions"]) for t in asked]
    readable = None
    if broker.authorizer is not None:
        readable = filter_allowed(
            broker, request, AclOperation.DESCRIBE, TOPIC, (n for n, _ in wanted)
        )
    topics: list[DescribeShareGroupOffsetsResponseTopic] = []
    for name, parts in sorted(wanted):
        topic = broker.topics.get(name)
        refused = readable is not None and name not in readable
        out = []
        for index in parts:
            start, done, lag = -1, -1, -1
            if topic is not None and not refused:
                start, done = shares.describe(group_id, topic.id.bytes, index)
                if start >= 0 and 0 <= index < topic.partitions:
                    _, high = broker.logs.offsets(topic, index)
                    lag = max(high - start - max(done, 0), 0)
            out.append(
                {
                    "partition_index": index,
                    "start_offset": start,
                    "leader_epoch": 0 if start >= 0 else -1,
                    "lag": lag,
                    "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if refused
                    else ErrorCode.NONE,
                    "error_message": None,
                }
            )
        topics.append(
            {
                "topic_name": name,
                "topic_id": topic.id.bytes if topic is not None else bytes(16),
                "partitions": out,  # type: ignore[typeddict-item]
            }
        )
    return {
        "group_id": group_id,
        "topics": topics,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }


def _check_group(
    broker: Broker, request: Request[Any], group_id: str, operation: AclOperation, create: bool
) -> ShareGroup | ErrorCode:
    if _unsupported(broker):
        return ErrorCode.UNSUPPORTED_VERSION
    if not allowed(broker, request, operation, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    shard = broker.groups.shard_of(group_id)
    error = shard.availability()
    if error:
        return error
    return admin_group(shard.groups, group_id, create)


def _begin(
    broker: Broker, request: Request[Any], operation: AclOperation, create: bool
) -> tuple[ShareGroup, set[str] | None] | ErrorCode:
    """The group of an Alter/DeleteShareGroupOffsets and the topics the caller may READ (None
    without an authorizer), or the error that answers the whole request."""
    body = request.body
    group = _check_group(broker, request, body["group_id"], operation, create)
    if isinstance(group, ErrorCode):
        return group
    readable = None
    if broker.authorizer is not None:
        names = [t["topic_name"] for t in body["topics"]]
        readable = filter_allowed(broker, request, AclOperation.READ, TOPIC, names)
    return group, readable


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0)
async def alter_share_group_offsets(
    broker: Broker, request: Request[AlterShareGroupOffsetsRequest]
) -> AlterShareGroupOffsetsResponse:
    body = request.body
    group_id = body["group_id"]
    begun = _begin(broker, request, AclOperation.READ, create=True)
    if isinstance(begun, ErrorCode):
        return {"error_code": begun, "error_message": MESSAGES.get(begun), "responses": []}
    group, readable = begun
    responses: list[Any] = []
    topics: dict[bytes, tuple[str, tuple[int, ...]]] = {}
    starts: dict[tuple[bytes, int], int] = {}
    for t in body["topics"]:
        topic = broker.topics.get(t["topic_name"])
        parts = []
        for p in t["partitions"]:
            index = p["partition_index"]
            message = None
            if readable is not None and t["topic_name"] not in readable:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= index < topic.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                message = NOT_HOSTED
            else:
                code = ErrorCode.NONE
                topics.setdefault(topic.id.bytes, (topic.name, ()))
                name, have = topics[topic.id.bytes]
                topics[topic.id.bytes] = (name, (*have, index))
                starts[(topic.id.bytes, index)] = p["start_offset"]
            parts.append({"partition_index": index, "error_code": code, "error_message": message})
        responses.append(
            {
                "topic_name": t["topic_name"],
                "topic_id": topic.id.bytes if topic is not None else bytes(16),
                "partitions": parts,
            }
        )
    if topics:
        shard = broker.groups.shard_of(group_id)
        error = await wait(alter_offsets(shard.share, group, topics, starts))
        if error:
            return {"error_code": error, "responses": []}
    return {"error_code": ErrorCode.NONE, "responses": responses}


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0)
async def delete_share_group_offsets(
    broker: Broker, request: Request[DeleteShareGroupOffsetsRequest]
) -> DeleteShareGroupOffsetsResponse:
    body = request.body
    group_id = body["group_id"]
    begun = _begin(broker, request, AclOperation.DELETE, create=False)
    if isinstance(begun, ErrorCode):
        return {"error_code": begun, "error_message": MESSAGES.get(begun), "responses": []}
    group, readable = begun
    responses: list[Any] = []
    deleting: list[bytes] = []
    for t in body["topics"]:
        name = t["topic_name"]
        topic = broker.topics.get(name)
        message = None
        if readable is not None and name not in readable:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            message = NOT_HOSTED
        elif topic.id.bytes not in group.initialized:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            message = "There is no offset information to delete."
        else:
            code = ErrorCode.NONE
            deleting.append(topic.id.bytes)
        responses.append(
            {
                "topic_name": name,
                "topic_id": topic.id.bytes if topic is not None else bytes(16),
                "error_code": code,
                "error_message": message,
            }
        )
    if deleting:
        shard = broker.groups.shard_of(group_id)
        error = await wait(delete_offsets(shard.share, group, deleting))
        if error:
            return {"error_code": error, "responses": []}
    return {"error_code": ErrorCode.NONE, "responses": responses}
