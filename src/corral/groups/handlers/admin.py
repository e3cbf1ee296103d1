"""The group admin APIs on the wire: FindCoordinator, ListGroups, DescribeGroups, DeleteGroups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.later import Later, first_error
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    GROUP,
    allowed,
    authorized_operations,
    cluster_allowed,
    filter_allowed,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1
TRANSACTIONS_UNSUPPORTED = (
    "corral does not implement transactions (transactional.id is not supported)"
)


# ------------------------------------------------------------------------------ FindCoordinator


@handles(ApiKey.FIND_COORDINATOR, 0, 5)
def find_coordinator(broker: Broker, request: Request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 4:
        key_type = body["key_type"]
        return {
            "coordinators": [
                _coordinator_for(broker, request, key, key_type) for key in body["coordinator_keys"]
            ]
        }
    key_type = body["key_type"] if version >= 1 else COORDINATOR_GROUP
    found = _coordinator_for(broker, request, body["key"], key_type)
    response = {
        "error_code": found["error_code"],
        "node_id": found["node_id"],
        "host": found["host"],
        "port": found["port"],
    }
    if version >= 1:
        response["error_message"] = found["error_message"]
    return response


def _coordinator_for(broker: Broker, request: Request, key: str, key_type: int) -> dict[str, Any]:
    if key_type == COORDINATOR_GROUP and not allowed(
        broker, request, AclOperation.DESCRIBE, GROUP, key
    ):
        # Kafka's message: the error's own in v0-3, none in v4+.
        message = "Group authorization failed." if request.api_version < 4 else None
        return {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
            "error_message": message,
        }
    if key_type == COORDINATOR_GROUP:
        host, port = broker.endpoint(request.listener)
        return {
            "key": key,
            "node_id": broker.node_id,
            "host": host,
            "port": port,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
    if key_type == COORDINATOR_TRANSACTION:
        # corral has no transaction coordinator. COORDINATOR_NOT_AVAILABLE would be retried for
        # as long as clients are let (Java 60 s, librdkafka forever); an authorization failure
        # is fatal at once in both, as InitProducerId with a transactional id answers too.
        code, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONS_UNSUPPORTED
    else:
        code, message = ErrorCode.INVALID_REQUEST, f"Invalid coordinator type: {key_type}"
    return {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": code,
        "error_message": message,
    }


# ----------------------------------------------------------------- ListGroups, DescribeGroups


@handles(ApiKey.LIST_GROUPS, 0, 5)
def list_groups(broker: Broker, request: Request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    states = {s.lower() for s in body["states_filter"]} if version >= 4 else None
    types = {t.lower() for t in body["types_filter"]} if version >= 5 else None
    groups = broker.groups.list_groups(states, types)
    # All of them with CLUSTER DESCRIBE (Kafka keeps this for compatibility), else those the
    # principal may DESCRIBE.
    if broker.authorizer is not None and not cluster_allowed(
        broker, request, AclOperation.DESCRIBE, log_denied=False
    ):
        visible = filter_allowed(
            broker, request, AclOperation.DESCRIBE, GROUP, (g["group_id"] for g in groups)
        )
        groups = [g for g in groups if g["group_id"] in visible]
    for g in groups:
        if version < 5:
            del g["group_type"]
        if version < 4:
            del g["group_state"]
    return {"error_code": ErrorCode.NONE, "groups": groups}


@handles(ApiKey.DESCRIBE_GROUPS, 0, 5)
def describe_groups(broker: Broker, request: Request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    coordinator = broker.groups
    with_ops = version >= 3 and body["include_authorized_operations"]
    described = []
    refused = []
    for group_id in body["groups"]:
        if not allowed(broker, request, AclOperation.DESCRIBE, GROUP, group_id):
            # Kafka answers these after the others.
            refused.append(_describe_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id))
            continue
        if not group_id:
            entry = _describe_error(ErrorCode.INVALID_GROUP_ID, group_id)
        else:
            entry = coordinator.describe_group(group_id)
        if version < 4:
            for m in entry["members"]:
                m["group_instance_id"] = None
        if with_ops and entry["error_code"] == ErrorCode.NONE:
            entry["authorized_operations"] = authorized_operations(broker, request, GROUP, group_id)
        described.append(entry)
    return {"groups": described + refused}


def _describe_error(code: ErrorCode, group_id: str | None) -> dict[str, Any]:
    return {
        "error_code": code,
        "group_id": group_id or "",
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
    }


# --------------------------------------------------------------------------------- DeleteGroups


@handles(ApiKey.DELETE_GROUPS, 0, 2)
def delete_groups(broker: Broker, request: Request) -> Later:
    # Each group's tombstones are their own write: a failed one fails that group only.
    results, writes, refused = [], [], []
    names = request.body["groups_names"]
    deletable = filter_allowed(broker, request, AclOperation.DELETE, GROUP, names)
    for group_id in names:
        result = {"group_id": group_id, "error_code": ErrorCode.NONE}
        if group_id not in deletable:
            # Kafka answers these after the others.
            refused.append(
                {"group_id": group_id, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
            )
            continue
        results.append(result)
        if not group_id:
            result["error_code"] = ErrorCode.INVALID_GROUP_ID
            continue

        def record_error(error: ErrorCode, result: dict[str, Any] = result) -> None:
            result["error_code"] = error

        writes.append(broker.groups.delete_group(group_id).map(record_error))
    return first_error(writes).map(lambda _: {"results": results + refused})
