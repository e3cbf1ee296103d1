"""The SyncGroup API on the wire. The leader's assignment to the coordinator, the member's
back once the group's record is durable; shaped per version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.groups.classic import sync_error
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.authorize import group_read

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import SyncGroupRequest, SyncGroupResponse


@handles(ApiKey.SYNC_GROUP, 0, 5)
def sync_group(broker: Broker, request: Request[SyncGroupRequest]) -> SyncGroupResponse | Later:
    body, version = request.body, request.api_version
    if not group_read(broker, request, body["group_id"]):
        return _shape_sync(sync_error(ErrorCode.GROUP_AUTHORIZATION_FAILED), version)
    if not body["group_id"]:
        return _shape_sync(sync_error(ErrorCode.INVALID_GROUP_ID), version)
    answer = broker.groups.sync(
        body["group_id"],
        body["member_id"],
        body["group_instance_id"] if version >= 3 else None,
        body["generation_id"],
        body["protocol_type"] if version >= 5 else None,
        body["protocol_name"] if version >= 5 else None,
        [(a["member_id"], a["assignment"]) for a in body["assignments"]],
    )
    return answer.map(lambda result: _shape_sync(result, version))


def _shape_sync(result: dict[str, Any], version: int) -> SyncGroupResponse:
    response: SyncGroupResponse = {
        "error_code": result["error_code"],
        "assignment": result["assignment"],
    }
    if version >= 5:
        response["protocol_type"] = result["protocol_type"]
        response["protocol_name"] = result["protocol_name"]
    return response
