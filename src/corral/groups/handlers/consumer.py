"""The KIP-848 consumer group APIs on the wire: ConsumerGroupHeartbeat and ConsumerGroupDescribe
(reference/kip848.md §1, §6). The heartbeat's static validation is here, in Kafka's order; the
group logic is the coordinator's (consumer/protocol.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup, HeartbeatRequest
from corral.groups.consumer.answer import error_answer
from corral.groups.consumer.protocol import LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from corral.groups.consumer.state import MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    GROUP,
    OPERATIONS_NOT_REQUESTED,
    TOPIC,
    allowed,
    authorized_operations,
    filter_allowed,
    group_read,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.consumer.reconcile import Partitions
    from corral.groups.consumer.target import TopicImage

# ---------------------------------------------------------------------- ConsumerGroupHeartbeat


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
def consumer_group_heartbeat(broker: Broker, request: Request) -> dict[str, Any] | Later:
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


def _invalid(body: dict[str, Any], version: int) -> str | None:
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


def _partitions(topics: list[dict[str, Any]]) -> dict[bytes, frozenset[int]]:
    out: dict[bytes, frozenset[int]] = {}
    for t in topics:
        if t["partitions"]:
            out[t["topic_id"]] = out.get(t["topic_id"], frozenset()) | frozenset(t["partitions"])
    return out


# ----------------------------------------------------------------------- ConsumerGroupDescribe


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def consumer_group_describe(broker: Broker, request: Request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    enabled = broker.groups.consumer_protocol_enabled
    with_ops = body["include_authorized_operations"]
    described, refused = [], []
    for group_id in body["group_ids"]:
        if not enabled:
            entry = _describe_error(
                group_id,
                ErrorCode.UNSUPPORTED_VERSION,
                "The new consumer group protocol is not enabled.",
            )
        elif not allowed(broker, request, AclOperation.DESCRIBE, GROUP, group_id):
            # Kafka answers these after the others.
            refused.append(_describe_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        elif not group_id:
            entry = _describe_error(group_id, ErrorCode.INVALID_GROUP_ID, "Group id is empty.")
        else:
            group = broker.groups.groups.get(group_id)
            if not isinstance(group, ConsumerGroup) or group.deleting:
                entry = _describe_error(
                    group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
                )
            else:
                entry = _describe(broker, group, version)
                if with_ops:
                    entry["authorized_operations"] = authorized_operations(
                        broker, request, GROUP, group_id
                    )
        described.append(entry)
    if broker.authorizer is not None:
        described = _hide_undescribable_topics(broker, request, described)
    return {"groups": described + refused}


def _hide_undescribable_topics(
    broker: Broker, request: Request, described: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """KAFKA-18813: a group whose members' assignments hold a topic the principal may not
    DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, without its members."""

    def topics(entry: dict[str, Any]) -> set[str]:
        return {
            tp["topic_name"]
            for m in entry["members"]
            for assignment in (m["assignment"], m["target_assignment"])
            for tp in assignment["topic_partitions"]
            if tp["topic_name"] is not None
        }

    named = set().union(*map(topics, described))
    visible = filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, named)
    if visible == named:
        return described
    return [
        _describe_error(
            entry["group_id"],
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "The group has described topic(s) that the client is not authorized to describe.",
        )
        if topics(entry) - visible
        else entry
        for entry in described
    ]


def _describe_error(group_id: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "group_id": group_id or "",
        "group_state": "",
        "group_epoch": 0,
        "assignment_epoch": 0,
        "assignor_name": "",
        "members": [],
        "authorized_operations": OPERATIONS_NOT_REQUESTED,
    }


def _describe(broker: Broker, group: ConsumerGroup, version: int) -> dict[str, Any]:
    topics = broker.groups.topics
    members = []
    for m in group.members.values():
        current = m.current
        owned = dict(current.assigned)
        for topic, ps in current.pending_revocation.items():
            owned[topic] = owned.get(topic, frozenset()) | ps  # KAFKA-20431: revoking included
        entry = {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": current.epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.topic_names),
            # Kafka's members start with the regex "" (not null) and describe it so.
            "subscribed_topic_regex": m.regex or "",
            "assignment": _described_assignment(topics, owned),
            "target_assignment": _described_assignment(topics, group.target.get(m.member_id, {})),
        }
        if version >= 1:
            entry["member_type"] = (
                MEMBER_TYPE_CLASSIC if m.classic is not None else MEMBER_TYPE_CONSUMER
            )
        members.append(entry)
    assignor = group.preferred_assignor() or broker.groups.assignors.default.name
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state_name,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": assignor,
        "members": members,
        "authorized_operations": OPERATIONS_NOT_REQUESTED,
    }


def _described_assignment(topics: TopicImage, partitions: Partitions) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": t, "topic_name": topics.name_of(t), "partitions": sorted(ps)}
            for t, ps in sorted(partitions.items())
            if ps
        ]
    }
