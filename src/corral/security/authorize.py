"""The checks handlers make, as Kafka's AuthHelper: each is one attribute test when no authorizer
is configured (`broker.authorizer` is None: everything is allowed)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from corral.security.acls import ALL_SUPPORTED_BITS, CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker

log = logging.getLogger("corral.security.authorizer")

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
# The *_authorized_operations fields' schema default: not requested (Integer.MIN_VALUE).
OPERATIONS_NOT_REQUESTED = -(2**31)


def client_address(request: Request[object]) -> str:
    """The client's address as ACL hosts name it: Request.client_host without Kafka's "/"."""
    host = request.client_host
    return host[1:] if host.startswith("/") else host


def allowed(
    broker: Broker,
    request: Request[object],
    operation: int,
    resource_type: int,
    name: str,
    *,
    log_denied: bool = True,
) -> bool:
    """`log_denied=False` for a check with a fallback (CLUSTER CREATE before TOPIC CREATE)."""
    authorizer = broker.authorizer
    if authorizer is None or authorizer.authorize(
        request.principal, client_address(request), operation, resource_type, name
    ):
        return True
    if log_denied:
        _log_denied(request, operation, resource_type, name)
    return False


def _log_denied(request: Request[object], operation: int, resource_type: int, name: str) -> None:
    # Kafka's authorizer logger: an explicit check that is denied is one INFO line (filtering,
    # as of Metadata's topic list, is not logged).
    log.info(
        "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s "
        "for request = %s",
        request.principal,
        AclOperation(operation).name,
        client_address(request),
        ResourceType(resource_type).name,
        name,
        request.api_key,
    )


def cluster_allowed(
    broker: Broker, request: Request[object], operation: int, *, log_denied: bool = True
) -> bool:
    return allowed(broker, request, operation, CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def filter_allowed(
    broker: Broker,
    request: Request[object],
    operation: int,
    resource_type: int,
    names: Iterable[str],
) -> set[str]:
    """The names of `names` the request may do `operation` on (each checked once)."""
    authorizer = broker.authorizer
    if authorizer is None:
        return set(names)
    principal, host = request.principal, client_address(request)
    return {
        name
        for name in set(names)
        if authorizer.authorize(principal, host, operation, resource_type, name)
    }


def authorized_operations(
    broker: Broker, request: Request[object], resource_type: int, name: str
) -> int:
    """AuthHelper.authorizedOperations: the bit field of what the request may do on the
    resource, among its type's supported operations (all of them without an authorizer)."""
    authorizer = broker.authorizer
    if authorizer is None:
        return ALL_SUPPORTED_BITS[resource_type]
    return authorizer.authorized_operations(
        request.principal, client_address(request), resource_type, name
    )


def group_read(broker: Broker, request: Request[object], group_id: str) -> bool:
    """GROUP READ, which every group membership and commit API needs. Once allowed, the network
    thread may answer the connection's heartbeats for the group itself (its short paths answer
    only pairs Python authorized while an authorizer is on)."""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    if not authorizer.authorize(
        request.principal, client_address(request), Op.READ, GROUP, group_id
    ):
        _log_denied(request, Op.READ, GROUP, group_id)
        return False
    broker.sessions.authorize_group(request.connection, group_id)
    return True
