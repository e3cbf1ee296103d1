"""The ListGroups API on the wire. The groups of the loaded shards, filtered by state and type
(v4+, v5+)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    GROUP,
    cluster_allowed,
    filter_allowed,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import ListGroupsRequest, ListGroupsResponse


@handles(ApiKey.LIST_GROUPS, 0, 5)
def list_groups(broker: Broker, request: Request[ListGroupsRequest]) -> ListGroupsResponse:
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
