"""What each API checks, in process: a real Broker (its coordinator, logs and topics running on a
trio loop) answering requests that carry a principal (`_core.Connection(..., principal=...)`),
with ACLs set through the authorizer. Requests made this way come from host "" (no socket), so
the ACLs here use host "*".

Here the ACL APIs themselves (CreateAcls, DescribeAcls, DeleteAcls), with an authorizer and
without one (then every request is allowed and the ACL APIs answer SECURITY_DISABLED)."""

from __future__ import annotations

import pytest
from aclkit import (
    ADMIN,
    ALICE,
    CLUSTER,
    EVERYTHING,
    TOPIC,
    call,
    codes,
    commit_body,
    secured,
    with_broker,
)

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey
from corral.security.acls import AclOperation as Op


def test_acl_apis(tmp_path):
    binding = {
        "resource_type": TOPIC,
        "resource_name": "orders",
        "resource_pattern_type": 3,
        "principal": ALICE,
        "host": "*",
        "operation": Op.READ,
        "permission_type": 3,
    }
    everything = EVERYTHING

    async def scenario(broker):
        refused = await call(broker, ALICE, ApiKey.CREATE_ACLS, 3, {"creations": [binding]})
        assert refused["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        refused = await call(broker, ALICE, ApiKey.DESCRIBE_ACLS, 3, everything)
        assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        created = await call(
            broker,
            ADMIN,
            ApiKey.CREATE_ACLS,
            3,
            {
                "creations": [
                    binding,
                    {**binding, "resource_type": CLUSTER},
                    {**binding, "principal": "alice"},
                    {**binding, "host": "10.0.0.0/40"},
                    {**binding, "resource_name": ""},
                ]
            },
        )
        assert [r["error_code"] for r in created["results"]] == [0] + [
            ErrorCode.INVALID_REQUEST
        ] * 4
        assert broker.sessions.network.forgotten == 1
        unbuildable = await call(
            broker,
            ADMIN,
            ApiKey.CREATE_ACLS,
            3,
            {"creations": [binding, {**binding, "operation": Op.ANY}]},
        )
        assert [r["error_code"] for r in unbuildable["results"]] == [
            ErrorCode.UNKNOWN_SERVER_ERROR
        ] * 2
        described = await call(broker, ADMIN, ApiKey.DESCRIBE_ACLS, 3, everything)
        assert described["resources"] == [
            {
                "resource_type": TOPIC,
                "resource_name": "orders",
                "pattern_type": 3,
                "acls": [
                    {"principal": ALICE, "host": "*", "operation": Op.READ, "permission_type": 3}
                ],
            }
        ]
        deleted = await call(broker, ADMIN, ApiKey.DELETE_ACLS, 3, {"filters": [everything]})
        assert [a["resource_name"] for a in deleted["filter_results"][0]["matching_acls"]] == [
            "orders"
        ]
        assert broker.authorizer.acls == set() and broker.sessions.network.forgotten == 2
        with pytest.raises(_core.ProtocolError):
            await call(broker, ADMIN, ApiKey.DESCRIBE_ACLS, 3, {**everything, "operation": 0})

    secured(tmp_path, scenario)


def test_without_an_authorizer_everything_is_allowed_and_acls_are_disabled(tmp_path):
    async def scenario(broker):
        assert broker.authorizer is None
        disabled = await call(
            broker,
            ALICE,
            ApiKey.DESCRIBE_ACLS,
            2,
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },
        )
        assert disabled["error_code"] == ErrorCode.SECURITY_DISABLED
        created = await call(
            broker,
            ALICE,
            ApiKey.CREATE_ACLS,
            2,
            {
                "creations": [
                    {
                        "resource_type": TOPIC,
                        "resource_name": "x",
                        "resource_pattern_type": 3,
                        "principal": ALICE,
                        "host": "*",
                        "operation": 3,
                        "permission_type": 3,
                    }
                ]
            },
        )
        assert created["results"][0]["error_code"] == ErrorCode.SECURITY_DISABLED
        response = await call(broker, ALICE, ApiKey.OFFSET_COMMIT, 8, commit_body("g", ["orders"]))
        assert codes(response) == {"orders": [0]}
        assert broker.sessions.network.authorized == []

    with_broker(tmp_path, scenario)
