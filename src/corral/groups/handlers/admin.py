"""The group admin APIs on the wire: FindCoordinator, ListGroups, DescribeGroups, DeleteGroups."""

from __future__ import annotations

from typing import Any

from ...apis import ApiKey, Later, first_error, handles
from ...errors import ErrorCode

# DescribeGroups authorized_operations when not requested (schema default).
OPERATIONS_NOT_REQUESTED = -(2**31)
# Group ACL operations (no authorizer in corral): READ, DESCRIBE, DELETE.
GROUP_OPERATIONS = (1 << 3) | (1 << 8) | (1 << 6)

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1
TRANSACTIONS_UNSUPPORTED = "corral does not implement transactions (transactional.id is not supported)"


# ------------------------------------------------------------------------------ FindCoordinator

@handles(ApiKey.FIND_COORDINATOR, 0, 5)
def find_coordinator(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 4:
        key_type = body["key_type"]
        return {"coordinators": [_coordinator_for(broker, request.listener, key, key_type)
                                 for key in body["coordinator_keys"]]}
    key_type = body["key_type"] if version >= 1 else COORDINATOR_GROUP
    found = _coordinator_for(broker, request.listener, body["key"], key_type)
    response = {"error_code": found["error_code"], "node_id": found["node_id"],
                "host": found["host"], "port": found["port"]}
    if version >= 1:
        response["error_message"] = found["error_message"]
    return response


def _coordinator_for(broker, listener: str, key: str, key_type: int) -> dict[str, Any]:
    if key_type == COORDINATOR_GROUP:
        host, port = broker.endpoint(listener)
        return {"key": key, "node_id": broker.node_id, "host": host, "port": port,
                "error_code": ErrorCode.NONE, "error_message": None}
    if key_type == COORDINATOR_TRANSACTION:
        # corral has no transaction coordinator. COORDINATOR_NOT_AVAILABLE would be retried for
        # as long as clients are let (Java 60 s, librdkafka forever); an authorization failure
        # is fatal at once in both, as InitProducerId with a transactional id answers too.
        code, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONS_UNSUPPORTED
    else:
        code, message = ErrorCode.INVALID_REQUEST, f"Invalid coordinator type: {key_type}"
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code,
            "error_message": message}


# ----------------------------------------------------------------- ListGroups, DescribeGroups

@handles(ApiKey.LIST_GROUPS, 0, 5)
def list_groups(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    states = {s.lower() for s in body["states_filter"]} if version >= 4 else None
    types = {t.lower() for t in body["types_filter"]} if version >= 5 else None
    groups = broker.groups.list_groups(states, types)
    for g in groups:
        if version < 5:
            del g["group_type"]
        if version < 4:
            del g["group_state"]
    return {"error_code": ErrorCode.NONE, "groups": groups}


@handles(ApiKey.DESCRIBE_GROUPS, 0, 5)
def describe_groups(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    coordinator = broker.groups
    with_ops = version >= 3 and body["include_authorized_operations"]
    described = []
    for group_id in body["groups"]:
        if not group_id:
            entry = {"error_code": ErrorCode.INVALID_GROUP_ID, "group_id": group_id or "",
                     "group_state": "", "protocol_type": "", "protocol_data": "", "members": []}
        else:
            entry = coordinator.describe_group(group_id)
        if version < 4:
            for m in entry["members"]:
                m["group_instance_id"] = None
        if with_ops:
            entry["authorized_operations"] = GROUP_OPERATIONS
        described.append(entry)
    return {"groups": described}


# --------------------------------------------------------------------------------- DeleteGroups

@handles(ApiKey.DELETE_GROUPS, 0, 2)
def delete_groups(broker, request) -> Later:
    # Each group's tombstones are their own write: a failed one fails that group only.
    results, writes = [], []
    for group_id in request.body["groups_names"]:
        result = {"group_id": group_id, "error_code": ErrorCode.NONE}
        results.append(result)
        if not group_id:
            result["error_code"] = ErrorCode.INVALID_GROUP_ID
            continue
        writes.append(broker.groups.delete_group(group_id).map(
            lambda error, result=result: result.__setitem__("error_code", error)))
    return first_error(writes).map(lambda _: {"results": results})
