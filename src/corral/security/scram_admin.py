"""DescribeUserScramCredentials and AlterUserScramCredentials (kafka-configs --entity-type users,
Admin.describe/alterUserScramCredentials): Kafka's validation, codes and messages (ScramImage,
ScramControlManager); a change is durable before it is answered."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security import scram
from corral.security.acls import AclOperation
from corral.security.authorize import cluster_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.security.messages import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        AlterUserScramCredentialsResult,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        DescribeUserScramCredentialsResult,
        ScramCredentialUpsertion,
    )

log = logging.getLogger("corral.security.scram_admin")


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
def describe_user_scram_credentials(
    broker: Broker, request: Request[DescribeUserScramCredentialsRequest]
) -> DescribeUserScramCredentialsResponse:
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE):
        # Kafka: the error at the top and on one result per user asked for.
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {
            "throttle_time_ms": 0,
            "error_code": refused,
            "error_message": None,
            "results": [
                {"user": "", "error_code": refused, "error_message": None, "credential_infos": []}
                for _ in request.body["users"] or ()
            ],
        }
    credentials = broker.credentials
    asked = [user["name"] for user in request.body["users"] or ()]
    results: list[DescribeUserScramCredentialsResult] = []
    # No users named (null or empty): every user that has a credential.
    for user in dict.fromkeys(asked) if asked else sorted(credentials.users):
        result: DescribeUserScramCredentialsResult = {
            "user": user,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "credential_infos": [],
        }
        if asked.count(user) > 1:
            result.update(
                {
                    "error_code": ErrorCode.DUPLICATE_RESOURCE,
                    "error_message": f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}",
                }
            )
        elif user not in credentials.users:
            result.update(
                {
                    "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                    "error_message": f"Attempt to describe a user credential that does not exist: {user}",
                }
            )
        else:
            result["credential_infos"] = [
                {"mechanism": mechanism.type, "iterations": stored.iterations}
                for mechanism in scram.MECHANISMS.values()
                if (stored := credentials.get(user, mechanism)) is not None
            ]
        results.append(result)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "results": results,
    }


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


_TWICE = "A user credential cannot be altered twice in the same request"


def _mechanism(name: str, mechanism_type: int) -> scram.Mechanism:
    if not name:
        raise _Refused(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    mechanism = scram.BY_TYPE.get(mechanism_type)
    if mechanism is None:
        raise _Refused(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return mechanism


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def alter_user_scram_credentials(
    broker: Broker, request: Request[AlterUserScramCredentialsRequest]
) -> AlterUserScramCredentialsResponse:
    body = request.body
    if not cluster_allowed(broker, request, AclOperation.ALTER):
        users = sorted({change["name"] for change in body["deletions"] + body["upsertions"]})
        return {
            "throttle_time_ms": 0,
            "results": [
                {
                    "user": user,
                    "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": "Request AlterUserScramCredentials needs ALTER permission.",
                }
                for user in users
            ],
        }
    credentials = broker.credentials
    errors: dict[str, tuple[ErrorCode, str]] = {}
    deletions: dict[str, scram.Mechanism] = {}
    upsertions: dict[str, tuple[scram.Mechanism, ScramCredentialUpsertion]] = {}
    # As ScramControlManager.alterCredentials: a user named twice (deletions, then upsertions)
    # is refused once, whatever else it asked; the first refusal of a user is the one answered.
    for deletion in body["deletions"]:
        name = deletion["name"]
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            continue
        try:
            mechanism = _mechanism(name, deletion["mechanism"])
            if not credentials.has(name, mechanism):
                raise _Refused(
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            deletions[name] = mechanism
        except _Refused as e:
            errors[name] = (e.code, e.message)
    for upsertion in body["upsertions"]:
        name = upsertion["name"]
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            continue
        try:
            mechanism = _mechanism(name, upsertion["mechanism"])
            iterations = upsertion["iterations"]
            if iterations < mechanism.min_iterations:
                raise _Refused(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            if iterations > mechanism.max_iterations:
                raise _Refused(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            upsertions[name] = (mechanism, upsertion)
        except _Refused as e:
            errors[name] = (e.code, e.message)
    changes = [
        (
            name,
            mechanism,
            scram.credential(mechanism, u["salt"], u["salted_password"], u["iterations"]),
        )
        for name, (mechanism, u) in upsertions.items()
    ]
    done = [*deletions, *upsertions]
    if done:
        try:
            await credentials.alter(list(deletions.items()), changes)
        except OSError as e:
            log.error("SCRAM credentials not changed: %s", e)
            errors.update(
                {
                    name: (
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                        f"cannot write the credentials: {e.strerror or e}",
                    )
                    for name in done
                }
            )
            done = []
    results: list[AlterUserScramCredentialsResult] = [
        {"user": name, "error_code": ErrorCode.NONE, "error_message": None} for name in done
    ]
    results += [
        {"user": name, "error_code": code, "error_message": message}
        for name, (code, message) in errors.items()
    ]
    return {"throttle_time_ms": 0, "results": results}
