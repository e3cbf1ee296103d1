"""The ShareGroupHeartbeat API on the wire: the request's checks in Kafka's order
(reference/share-groups.md §2: KafkaApis, then GroupCoordinatorService); the group logic is the
coordinator's (share/protocol.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.share import ShareHeartbeat
from corral.groups.share.protocol import LEAVE_EPOCH, error_answer
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed, group_read

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.share.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

# Kafka refuses member ids longer than a UUID's string.
MAX_MEMBER_ID = 36


@handles(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1)
def share_group_heartbeat(
    broker: Broker, request: Request[ShareGroupHeartbeatRequest]
) -> ShareGroupHeartbeatResponse | Later:
    body = request.body
    member_id = body["member_id"]
    if broker.shares is None:
        return error_answer(ErrorCode.UNSUPPORTED_VERSION)
    if broker.authorizer is not None and not group_read(broker, request, body["group_id"]):
        return error_answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if member_id is None or not member_id or len(member_id) > MAX_MEMBER_ID:
        return error_answer(ErrorCode.INVALID_REQUEST)
    names = body["subscribed_topic_names"]
    if (
        broker.authorizer is not None
        and names
        and len(filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, names))
        < len(set(names))
    ):
        return error_answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    invalid = _invalid(body)
    if invalid:
        return error_answer(ErrorCode.INVALID_REQUEST, invalid)
    return broker.groups.share_heartbeat(
        ShareHeartbeat(
            group_id=body["group_id"],
            member_id=member_id,
            member_epoch=body["member_epoch"],
            rack_id=body["rack_id"],
            topic_names=names,
            client_id=request.client_id or "",
            client_host=request.client_host,
        )
    )


def _invalid(body: ShareGroupHeartbeatRequest) -> str | None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid: the INVALID_REQUEST message."""
    if not body["member_id"].strip():
        return "MemberId can't be empty."
    if not body["group_id"].strip():
        return "GroupId can't be empty."
    if body["rack_id"] is not None and not body["rack_id"].strip():
        return "RackId can't be empty."
    epoch = body["member_epoch"]
    if epoch == 0 and not body["subscribed_topic_names"]:
        return "SubscribedTopicNames must be set in first request."
    if epoch < LEAVE_EPOCH:
        return "MemberEpoch is invalid."
    return None
