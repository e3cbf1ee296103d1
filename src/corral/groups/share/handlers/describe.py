"""The ShareGroupDescribe API on the wire: share groups as Kafka describes them
(reference/share-groups.md §3), their members and assignments; with an authorizer, a group whose
assignments hold a topic the principal may not describe is refused whole (KAFKA-18813)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.share import ShareGroup
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
    from corral.groups.share.messages import (
        DescribedGroup,
        Member,
        ShareGroupDescribeRequest,
        ShareGroupDescribeResponse,
        ShareGroupDescribeResponseTopicPartitions,
    )

ASSIGNOR = "simple"


@handles(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1)
def share_group_describe(
    broker: Broker, request: Request[ShareGroupDescribeRequest]
) -> ShareGroupDescribeResponse:
    body = request.body
    described: list[DescribedGroup] = []
    for group_id in body["group_ids"]:
        if not allowed(broker, request, AclOperation.DESCRIBE, GROUP, group_id):
            entry = _error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        elif not group_id:
            entry = _error("", ErrorCode.INVALID_GROUP_ID, None)
        else:
            group = broker.groups.groups.get(group_id)
            if group is None or (isinstance(group, ShareGroup) and group.deleting):
                entry = _error(
                    group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
                )
            elif not isinstance(group, ShareGroup):
                entry = _error(
                    group_id,
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Group {group_id} is not a share group.",
                )
            else:
                entry = _describe(broker, request, group)
                if body["include_authorized_operations"]:
                    entry["authorized_operations"] = authorized_operations(
                        broker, request, GROUP, group_id
                    )
        described.append(entry)
    return {"groups": described}


def _error(group_id: str, code: ErrorCode, message: str | None) -> DescribedGroup:
    return {
        "error_code": code,
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": 0,
        "assignment_epoch": 0,
        "assignor_name": "",
        "members": [],
        "authorized_operations": OPERATIONS_NOT_REQUESTED,
    }


def _describe(
    broker: Broker, request: Request[ShareGroupDescribeRequest], group: ShareGroup
) -> DescribedGroup:
    topics = broker.groups.topics
    members: list[Member] = []
    named: set[str] = set()
    for m in group.members.values():
        assigned: list[ShareGroupDescribeResponseTopicPartitions] = [
            {"topic_id": t, "topic_name": topics.name_of(t), "partitions": list(ps)}
            for t, ps in sorted(m.assigned.items())
            if ps
        ]
        named.update(tp["topic_name"] for tp in assigned)
        members.append(
            {
                "member_id": m.member_id,
                "rack_id": m.rack_id,
                "member_epoch": m.epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.topic_names),
                "assignment": {"topic_partitions": assigned},
            }
        )
    if broker.authorizer is not None and named:
        if filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, named) != named:
            return _error(
                group.group_id,
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "The group has described topic(s) that the client is not authorized to describe.",
            )
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state_name,
        "group_epoch": group.epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": ASSIGNOR,
        "members": members,
        "authorized_operations": OPERATIONS_NOT_REQUESTED,
    }
