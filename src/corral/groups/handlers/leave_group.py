"""The LeaveGroup API on the wire. v0-2 name one member, v3+ a batch (by member id or
instance id); answered once the group's record is durable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation, ResourceType
from corral.security.authorize import allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import LeaveGroupRequest, LeaveGroupResponse


@handles(ApiKey.LEAVE_GROUP, 0, 5)
def leave_group(broker: Broker, request: Request[LeaveGroupRequest]) -> Later | LeaveGroupResponse:
    body, version = request.body, request.api_version
    if version >= 3:
        leaving: list[tuple[str, str | None]] = [
            (m["member_id"], m["group_instance_id"]) for m in body["members"]
        ]
    else:
        leaving = [(body["member_id"], None)]
    coordinator = broker.groups
    if not allowed(broker, request, AclOperation.READ, ResourceType.GROUP, body["group_id"]):
        return _shape_leave(version, leaving, ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    if not body["group_id"]:
        return _shape_leave(version, leaving, ErrorCode.INVALID_GROUP_ID, [])
    # The last member leaving writes the empty group's record: answered once it is durable.
    return coordinator.leave(body["group_id"], leaving).map(
        lambda answer: _shape_leave(version, leaving, *answer)
    )


def _shape_leave(
    version: int,
    leaving: list[tuple[str, str | None]],
    group_error: ErrorCode,
    errors: list[ErrorCode],
) -> LeaveGroupResponse:
    if version < 3:
        # One member: its error is the response's error.
        code = group_error or (errors[0] if errors else ErrorCode.NONE)
        return {"error_code": code}
    response: LeaveGroupResponse = {"error_code": group_error}
    if not group_error:
        response["members"] = [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": error}
            for (member_id, instance_id), error in zip(leaving, errors)
        ]
    return response
