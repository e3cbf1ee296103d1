"""The DeleteGroups API on the wire. Empty groups deleted with their offsets; answered once the
tombstones are durable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.later import Later, first_error
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    GROUP,
    filter_allowed,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import DeletableGroupResult, DeleteGroupsRequest


@handles(ApiKey.DELETE_GROUPS, 0, 2)
def delete_groups(broker: Broker, request: Request[DeleteGroupsRequest]) -> Later:
    # Each group's tombstones are their own write: a failed one fails that group only.
    results: list[DeletableGroupResult] = []
    refused: list[DeletableGroupResult] = []
    writes: list[Later] = []
    names = request.body["groups_names"]
    deletable = filter_allowed(broker, request, AclOperation.DELETE, GROUP, names)
    for group_id in names:
        result: DeletableGroupResult = {"group_id": group_id, "error_code": ErrorCode.NONE}
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

        def record_error(error: ErrorCode, result: DeletableGroupResult = result) -> None:
            result["error_code"] = error

        writes.append(broker.groups.delete_group(group_id).map(record_error))
    return first_error(writes).map(lambda _: {"results": results + refused})
