"""The DescribeGroups API on the wire. Classic groups as Kafka describes them; a group that is
not there or not a classic group (consumer, share) is Dead: GROUP_ID_NOT_FOUND with a message
from v6 (KIP-1043), no error before."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    GROUP,
    allowed,
    authorized_operations,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import (
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        DescribeGroupsResponseDescribedGroup,
    )


@handles(ApiKey.DESCRIBE_GROUPS, 0, 6)
def describe_groups(
    broker: Broker, request: Request[DescribeGroupsRequest]
) -> DescribeGroupsResponse:
    body, version = request.body, request.api_version
    coordinator = broker.groups
    with_ops = version >= 3 and body["include_authorized_operations"]
    described: list[DescribeGroupsResponseDescribedGroup] = []
    refused: list[DescribeGroupsResponseDescribedGroup] = []
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
        if version < 6 and entry["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
            entry["error_code"] = ErrorCode.NONE
        if version < 6:
            entry["error_message"] = None
        if with_ops and entry["error_code"] == ErrorCode.NONE:
            entry["authorized_operations"] = authorized_operations(broker, request, GROUP, group_id)
        described.append(entry)
    return {"groups": described + refused}


def _describe_error(code: ErrorCode, group_id: str | None) -> DescribeGroupsResponseDescribedGroup:
    return {
        "error_code": code,
        "group_id": group_id or "",
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
    }
