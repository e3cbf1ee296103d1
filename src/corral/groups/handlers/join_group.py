"""The JoinGroup API on the wire. Decodes its version's request, asks the coordinator
(classic/protocol.py, or consumer/classic_members.py for a consumer group) and shapes the answer;
fields a version lacks are left out of the response (the codec fills schema defaults)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.groups.classic import JoinRequest, join_error
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.authorize import group_read

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import JoinGroupRequest, JoinGroupResponse


@handles(ApiKey.JOIN_GROUP, 0, 9)
def join_group(broker: Broker, request: Request[JoinGroupRequest]) -> JoinGroupResponse | Later:
    body, version = request.body, request.api_version
    if not group_read(broker, request, body["group_id"]):
        return _shape_join(join_error(ErrorCode.GROUP_AUTHORIZATION_FAILED), version)
    if not body["group_id"]:
        return _shape_join(join_error(ErrorCode.INVALID_GROUP_ID, body["member_id"]), version)
    session = body["session_timeout_ms"]
    req = JoinRequest(
        group_id=body["group_id"],
        member_id=body["member_id"],
        group_instance_id=body["group_instance_id"] if version >= 5 else None,
        client_id=request.client_id or "",
        client_host=request.client_host,
        session_timeout_ms=session,
        # v0 has no rebalance timeout: the session timeout stands in for it.
        rebalance_timeout_ms=body["rebalance_timeout_ms"] if version >= 1 else session,
        protocol_type=body["protocol_type"],
        protocols=[(p["name"], p["metadata"]) for p in body["protocols"]],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=body["reason"] if version >= 8 else None,
    )
    return broker.groups.join(req).map(lambda result: _shape_join(result, version))


def _shape_join(result: dict[str, Any], version: int) -> JoinGroupResponse:
    response: JoinGroupResponse = {
        "error_code": result["error_code"],
        "generation_id": result["generation_id"],
        "leader": result["leader"] or "",
        "member_id": result["member_id"],
    }
    members = result["members"]
    if members and version < 5:
        members = [{"member_id": m["member_id"], "metadata": m["metadata"]} for m in members]
    response["members"] = members
    if version >= 7:
        response["protocol_type"] = result["protocol_type"]
        response["protocol_name"] = result["protocol_name"]
    else:
        response["protocol_name"] = result["protocol_name"] or ""
    if version >= 9:
        response["skip_assignment"] = result["skip_assignment"]
    return response
