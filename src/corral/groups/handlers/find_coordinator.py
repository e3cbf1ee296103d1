"""The FindCoordinator API on the wire. Every group's coordinator is this broker (its shard
answers NOT_COORDINATOR while unloaded), or in cluster mode the node holding the group's shard.
A transactional id's coordinator is this broker too; cluster mode has no transaction coordinator
yet and refuses transactional ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import (
    GROUP,
    TRANSACTIONAL_ID,
    allowed,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import (
        Coordinator,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
    )

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1
TRANSACTIONS_UNSUPPORTED = "corral's cluster mode does not support transactions yet"


@handles(ApiKey.FIND_COORDINATOR, 0, 5)
def find_coordinator(
    broker: Broker, request: Request[FindCoordinatorRequest]
) -> FindCoordinatorResponse:
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
    response: FindCoordinatorResponse = {
        "error_code": found["error_code"],
        "node_id": found["node_id"],
        "host": found["host"],
        "port": found["port"],
    }
    if version >= 1:
        response["error_message"] = found["error_message"]
    return response


def _coordinator_for(
    broker: Broker, request: Request[FindCoordinatorRequest], key: str, key_type: int
) -> Coordinator:
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
        node_id = broker.node_id
        host, port = broker.endpoint(request.listener)
        if broker.cluster is not None:
            # Cluster mode: the node holding the group's shard (none yet: retried by clients).
            owner = broker.cluster.owner_of(broker.groups.writer.partition_of(key))
            if owner is None:
                return {
                    "key": key,
                    "node_id": -1,
                    "host": "",
                    "port": -1,
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "error_message": "The coordinator is not available.",
                }
            if owner.node_id != node_id:
                node_id, host, port = owner.node_id, owner.host, owner.port
        return {
            "key": key,
            "node_id": node_id,
            "host": host,
            "port": port,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
    if key_type == COORDINATOR_TRANSACTION:
        if not allowed(broker, request, AclOperation.DESCRIBE, TRANSACTIONAL_ID, key):
            code, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        elif broker.transactions is None:
            # Cluster mode. COORDINATOR_NOT_AVAILABLE would be retried for as long as clients
            # are let (Java 60 s, librdkafka forever); an authorization failure is fatal at once.
            code, message = (
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                TRANSACTIONS_UNSUPPORTED,
            )
        else:
            broker.transactions.ensure_topic()  # Kafka creates it here too
            host, port = broker.endpoint(request.listener)
            return {
                "key": key,
                "node_id": broker.node_id,
                "host": host,
                "port": port,
                "error_code": ErrorCode.NONE,
                "error_message": None,
            }
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
