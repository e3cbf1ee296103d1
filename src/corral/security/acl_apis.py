"""CreateAcls, DescribeAcls and DeleteAcls (kafka-acls), as Kafka's AclApis and AclControlManager
answer them: CLUSTER ALTER to change ACLs, CLUSTER DESCRIBE to list them, SECURITY_DISABLED
without an authorizer. Changes are durable before they are answered; the network thread then
forgets the group authorizations its heartbeat short paths relied on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclRefused,
    Unbuildable,
    check_buildable,
    check_new,
    has_unknown,
)
from corral.security.authorize import cluster_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.security.messages import (
        AclCreationResult,
        AclDescription,
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsFilter,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )

# Kafka 4 removed v0 of the three (its baseline is v1, with pattern types).
MIN_VERSION, MAX_VERSION = 1, 3
NO_AUTHORIZER = "No Authorizer is configured."


def _needs(api: str, operation: str) -> str:
    return f"Request {api} needs {operation} permission."


def _refuse_unknown(api: str, items: list[tuple[int, int, int, int]]) -> None:
    """Kafka fails to parse a request holding an UNKNOWN (or unheard-of) code and closes the
    connection: so does corral (the server logs it)."""
    for codes in items:
        if has_unknown(*codes):
            raise _core.ProtocolError(f"{api} request contains UNKNOWN elements: {codes}")


def _filter(body: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(
        body["resource_type_filter"],
        body["resource_name_filter"],
        body["pattern_type_filter"],
        body["principal_filter"],
        body["host_filter"],
        body["operation"],
        body["permission_type"],
    )


def _filter_codes(f: AclFilter) -> tuple[int, int, int, int]:
    return f.resource_type, f.pattern_type, f.operation, f.permission


@handles(ApiKey.DESCRIBE_ACLS, MIN_VERSION, MAX_VERSION)
def describe_acls(broker: Broker, request: Request[DescribeAclsRequest]) -> DescribeAclsResponse:
    acl_filter = _filter(request.body)
    _refuse_unknown("DescribeAcls", [_filter_codes(acl_filter)])
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE):
        return {
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": _needs("DescribeAcls", "DESCRIBE"),
            "resources": [],
        }
    if broker.authorizer is None:
        return {
            "error_code": ErrorCode.SECURITY_DISABLED,
            "error_message": "No Authorizer is configured on the broker",
            "resources": [],
        }
    # One entry per resource pattern, with its ACLs (DescribeAclsResponse.aclsResources).
    by_pattern: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in broker.authorizer.matching(acl_filter):
        by_pattern.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(
            {
                "principal": acl.principal,
                "host": acl.host,
                "operation": acl.operation,
                "permission_type": acl.permission,
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "resources": [
            {"resource_type": rtype, "resource_name": name, "pattern_type": pattern, "acls": acls}
            for (rtype, name, pattern), acls in by_pattern.items()
        ],
    }


@handles(ApiKey.CREATE_ACLS, MIN_VERSION, MAX_VERSION)
async def create_acls(broker: Broker, request: Request[CreateAclsRequest]) -> CreateAclsResponse:
    wanted = [
        AclBinding(
            c["resource_type"],
            c["resource_name"],
            c["resource_pattern_type"],
            c["principal"],
            c["host"],
            c["operation"],
            c["permission_type"],
        )
        for c in request.body["creations"]
    ]
    _refuse_unknown(
        "CreateAcls", [(a.resource_type, a.pattern_type, a.operation, a.permission) for a in wanted]
    )

    def everyone(code: ErrorCode, message: str | None) -> CreateAclsResponse:
        return {"results": [{"error_code": code, "error_message": message} for _ in wanted]}

    if not cluster_allowed(broker, request, AclOperation.ALTER):
        return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _needs("CreateAcls", "ALTER"))
    if broker.authorizer is None:
        return everyone(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    try:
        for acl in wanted:
            check_buildable(acl)
    except Unbuildable:
        # Kafka's AclBinding constructor throws: the request fails as a whole, without a message.
        return everyone(ErrorCode.UNKNOWN_SERVER_ERROR, None)
    results: list[AclCreationResult] = []
    valid: list[AclBinding] = []
    for acl in wanted:
        try:
            check_new(acl)
        except AclRefused as e:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
            continue
        results.append({"error_code": ErrorCode.NONE, "error_message": None})
        valid.append(acl)
    if valid:
        try:
            await broker.authorizer.create(valid)
        except OSError as e:
            return everyone(ErrorCode.KAFKA_STORAGE_ERROR, f"Could not write the ACLs: {e}")
        broker.sessions.forget_authorizations()
    return {"results": results}


@handles(ApiKey.DELETE_ACLS, MIN_VERSION, MAX_VERSION)
async def delete_acls(broker: Broker, request: Request[DeleteAclsRequest]) -> DeleteAclsResponse:
    filters = [_filter(f) for f in request.body["filters"]]
    _refuse_unknown("DeleteAcls", [_filter_codes(f) for f in filters])

    def everyone(code: ErrorCode, message: str) -> DeleteAclsResponse:
        return {
            "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters
            ]
        }

    if not cluster_allowed(broker, request, AclOperation.ALTER):
        return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _needs("DeleteAcls", "ALTER"))
    if broker.authorizer is None:
        return everyone(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    try:
        matched = await broker.authorizer.delete(filters)
    except OSError as e:
        return everyone(ErrorCode.KAFKA_STORAGE_ERROR, f"Could not write the ACLs: {e}")
    if any(matched):
        broker.sessions.forget_authorizations()
    return {
        "filter_results": [
            {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": ErrorCode.NONE,
                        "error_message": None,
                        "resource_type": acl.resource_type,
                        "resource_name": acl.name,
                        "pattern_type": acl.pattern_type,
                        "principal": acl.principal,
                        "host": acl.host,
                        "operation": acl.operation,
                        "permission_type": acl.permission,
                    }
                    for acl in acls
                ],
            }
            for acls in matched
        ]
    }
