"""The classic group APIs on the wire: JoinGroup, SyncGroup, Heartbeat, LeaveGroup. Each decodes
its version's request, asks the coordinator and shapes the answer; fields a version lacks are left
out of the response (the codec fills schema defaults)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.groups.classic import JoinRequest, join_error, sync_error
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation, ResourceType
from corral.security.authorize import allowed, group_read

if TYPE_CHECKING:
    from corral import _core
    from corral._core import Request
    from corral.broker import Broker

# ------------------------------------------------------------------------------------ JoinGroup


@handles(ApiKey.JOIN_GROUP, 0, 9)
def join_group(broker: Broker, request: Request) -> dict[str, Any] | Later:
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


def _shape_join(result: dict[str, Any], version: int) -> dict[str, Any]:
    response = {
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


# ------------------------------------------------------------------------------------ SyncGroup


@handles(ApiKey.SYNC_GROUP, 0, 5)
def sync_group(broker: Broker, request: Request) -> dict[str, Any] | Later:
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


def _shape_sync(result: dict[str, Any], version: int) -> dict[str, Any]:
    response = {"error_code": result["error_code"], "assignment": result["assignment"]}
    if version >= 5:
        response["protocol_type"] = result["protocol_type"]
        response["protocol_name"] = result["protocol_name"]
    return response


# ----------------------------------------------------------------------- Heartbeat, LeaveGroup


@handles(ApiKey.HEARTBEAT, 0, 4)
def heartbeat(broker: Broker, request: Request) -> bytes:
    # A short path (rust/short_paths/mod.rs): decoded by the core, which answers the steady state
    # from the HeartbeatView itself; the rest comes here as a HeartbeatRequest (no dicts).
    # (Heartbeat's short path gives this type: no check on the path.)
    hb: _core.HeartbeatRequest = request.typed  # type: ignore[assignment]
    group_id = hb.group_id
    if not group_read(broker, request, group_id):
        return hb.respond(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return hb.respond(ErrorCode.INVALID_GROUP_ID)
    return hb.respond(
        broker.groups.heartbeat(group_id, hb.member_id, hb.group_instance_id, hb.generation_id)
    )


@handles(ApiKey.LEAVE_GROUP, 0, 5)
def leave_group(broker: Broker, request: Request) -> Later | dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 3:
        leaving = [(m["member_id"], m["group_instance_id"]) for m in body["members"]]
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
) -> dict[str, Any]:
    if version < 3:
        # One member: its error is the response's error.
        code = group_error or (errors[0] if errors else ErrorCode.NONE)
        return {"error_code": code}
    response: dict[str, Any] = {"error_code": group_error}
    if not group_error:
        response["members"] = [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": error}
            for (member_id, instance_id), error in zip(leaving, errors)
        ]
    return response
