"""The ConsumerGroupDescribe API on the wire. KIP-848 groups as Kafka describes them
(reference/kip848.md §6): members, their assignments and targets, topics the principal may not
describe hidden."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup
from corral.groups.consumer.state import MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    GROUP,
    OPERATIONS_NOT_REQUESTED,
    TOPIC,
    allowed,
    authorized_operations,
    filter_allowed,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.consumer.reconcile import Partitions
    from corral.groups.consumer.targets.inputs import TopicImage
    from corral.groups.messages import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
        ConsumerGroupDescribeResponseAssignment,
        ConsumerGroupDescribeResponseDescribedGroup,
        Member,
    )


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def consumer_group_describe(
    broker: Broker, request: Request[ConsumerGroupDescribeRequest]
) -> ConsumerGroupDescribeResponse:
    body, version = request.body, request.api_version
    enabled = broker.groups.consumer_protocol_enabled
    with_ops = body["include_authorized_operations"]
    described: list[ConsumerGroupDescribeResponseDescribedGroup] = []
    refused: list[ConsumerGroupDescribeResponseDescribedGroup] = []
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
    broker: Broker,
    request: Request[ConsumerGroupDescribeRequest],
    described: list[ConsumerGroupDescribeResponseDescribedGroup],
) -> list[ConsumerGroupDescribeResponseDescribedGroup]:
    """KAFKA-18813: a group whose members' assignments hold a topic the principal may not
    DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, without its members."""

    def topics(entry: ConsumerGroupDescribeResponseDescribedGroup) -> set[str]:
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


def _describe_error(
    group_id: str, code: ErrorCode, message: str | None
) -> ConsumerGroupDescribeResponseDescribedGroup:
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


def _describe(
    broker: Broker, group: ConsumerGroup, version: int
) -> ConsumerGroupDescribeResponseDescribedGroup:
    topics = broker.groups.topics
    members: list[Member] = []
    for m in group.members.values():
        current = m.current
        owned = dict(current.assigned)
        for topic, ps in current.pending_revocation.items():
            owned[topic] = owned.get(topic, frozenset()) | ps  # KAFKA-20431: revoking included
        entry: Member = {
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


def _described_assignment(
    topics: TopicImage, partitions: Partitions
) -> ConsumerGroupDescribeResponseAssignment:
    return {
        "topic_partitions": [
            {"topic_id": t, "topic_name": topics.name_of(t), "partitions": sorted(ps)}
            for t, ps in sorted(partitions.items())
            if ps
        ]
    }
