"""The ConsumerGroupHeartbeat API on the wire. The request's static validation is here, in Kafka's
order (reference/kip848.md §1); the group logic is the coordinator's (consumer/protocol.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.consumer import HeartbeatRequest
from corral.groups.consumer.answer import error_answer
from corral.groups.consumer.protocol import LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    TOPIC,
    filter_allowed,
    group_read,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import (
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatRequestTopicPartitions,
        ConsumerGroupHeartbeatResponse,
    )


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
def consumer_group_heartbeat(
    broker: Broker, request: Request[ConsumerGroupHeartbeatRequest]
) -> ConsumerGroupHeartbeatResponse | Later:
    body, version = request.body, request.api_version
    if not broker.groups.consumer_protocol_enabled:
        return error_answer(
            ErrorCode.UNSUPPORTED_VERSION,
            "The new consumer group protocol is not enabled on this coordinator.",
        )
    if broker.authorizer is not None:
        if not group_read(broker, request, body["group_id"]):
            return error_answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        # KAFKA-18813: every topic subscribed by name must be describable (a regex's topics
        # are filtered instead).
        names = body["subscribed_topic_names"]
        if names and len(
            filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, names)
        ) < len(set(names)):
            return error_answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    invalid = _invalid(body, version)
    if invalid:
        return error_answer(ErrorCode.INVALID_REQUEST, invalid)
    assignor = body["server_assignor"]
    if assignor is not None and assignor not in broker.groups.assignors:
        return error_answer(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {assignor} is not supported. Supported assignors: "
            f"{', '.join(broker.groups.assignors.names)}.",
        )
    owned = body["topic_partitions"]
    req = HeartbeatRequest(
        group_id=body["group_id"],
        member_id=body["member_id"],
        member_epoch=body["member_epoch"],
        instance_id=body["instance_id"],
        rack_id=body["rack_id"],
        rebalance_timeout_ms=body["rebalance_timeout_ms"],
        topic_names=body["subscribed_topic_names"],
        regex=body["subscribed_topic_regex"] if version >= 1 else None,
        server_assignor=assignor,
        owned=None if owned is None else _partitions(owned),
        client_id=request.client_id or "",
        client_host=request.client_host,
        topic_filter=None
        if broker.authorizer is None
        else lambda names: filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, names),
    )
    return broker.groups.consumer_heartbeat(req)


def _invalid(body: ConsumerGroupHeartbeatRequest, version: int) -> str | None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: the INVALID_REQUEST message."""
    epoch = body["member_epoch"]
    if (version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and not body["member_id"].strip():
        return "MemberId can't be empty."
    if not body["group_id"].strip():
        return "GroupId can't be empty."
    if body["instance_id"] is not None and not body["instance_id"].strip():
        return "InstanceId can't be empty."
    if body["rack_id"] is not None and not body["rack_id"].strip():
        return "RackId can't be empty."
    if epoch == 0:
        if body["rebalance_timeout_ms"] == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if body["topic_partitions"] is None or body["topic_partitions"]:
            return "TopicPartitions must be empty when (re-)joining."
        regex = body["subscribed_topic_regex"] if version >= 1 else None
        if body["subscribed_topic_names"] is None and regex is None:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif epoch == STATIC_LEAVE_EPOCH:
        if body["instance_id"] is None:
            return "InstanceId can't be null."
    elif epoch < STATIC_LEAVE_EPOCH:
        return "MemberEpoch is invalid."
    return None


def _partitions(
    topics: list[ConsumerGroupHeartbeatRequestTopicPartitions],
) -> dict[bytes, frozenset[int]]:
    out: dict[bytes, frozenset[int]] = {}
    for t in topics:
        if t["partitions"]:
            out[t["topic_id"]] = out.get(t["topic_id"], frozenset()) | frozenset(t["partitions"])
    return out
