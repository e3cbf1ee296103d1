"""DescribeClientQuotas: corral enforces no client quotas, so every well-formed filter matches
nothing. It is answered (with Kafka's filter checks) because Kafka's tools ask it: `kafka-configs
--describe --entity-type users` asks for the users' quotas and their SCRAM credentials."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import cluster_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.config.messages import (
        ComponentData,
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    )

ENTITY_TYPES = ("user", "client-id", "ip")
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class InvalidFilter(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


def check_filter(components: list[ComponentData]) -> None:
    """Kafka's ClientQuotasImage.describe checks, with its messages."""
    seen: set[str] = set()
    for component in components:
        kind, match, match_type = (
            component["entity_type"],
            component["match"],
            component["match_type"],
        )
        if not kind:
            raise InvalidFilter(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in seen:
            raise InvalidFilter(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {kind} cannot appear more than once in the filter.",
            )
        seen.add(kind)
        if kind not in ENTITY_TYPES:
            raise InvalidFilter(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if match_type == MATCH_EXACT and match is None:
            raise InvalidFilter(
                ErrorCode.INVALID_REQUEST,
                "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            )
        if match_type in (MATCH_DEFAULT, MATCH_SPECIFIED) and match is not None:
            name = "MATCH_TYPE_DEFAULT" if match_type == MATCH_DEFAULT else "MATCH_TYPE_SPECIFIED"
            raise InvalidFilter(
                ErrorCode.INVALID_REQUEST,
                f"Request specified {name}, but also specified a match string.",
            )
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise InvalidFilter(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    if "ip" in seen and seen & {"user", "client-id"}:
        raise InvalidFilter(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component "
            "should not be used with user or clientId filter component.",
        )


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
def describe_client_quotas(
    broker: Broker, request: Request[DescribeClientQuotasRequest]
) -> DescribeClientQuotasResponse:
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE_CONFIGS):
        return {
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": None,
            "entries": None,
        }
    try:
        check_filter(request.body["components"])
    except InvalidFilter as e:
        return {"error_code": e.code, "error_message": str(e), "entries": None}
    return {"error_code": ErrorCode.NONE, "error_message": None, "entries": []}
