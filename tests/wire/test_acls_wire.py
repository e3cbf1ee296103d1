"""ACLs on the wire: CreateAcls / DescribeAcls / DeleteAcls through raw frames and through Kafka's
own kafka-acls (org.apache.kafka.tools.AclCommand), kept across a restart. The PLAINTEXT
listener's principal is User:ANONYMOUS, made a super user here."""

from __future__ import annotations

from aclkit import EVERYTHING, creation
from kafka_java import run_tool
from rawwire import RawClient, closed_within

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}


def described(client: RawClient, version: int = 3) -> set[tuple]:
    response = client.call(ApiKey.DESCRIBE_ACLS, version, EVERYTHING)
    assert response["error_code"] == 0
    return {
        (
            r["resource_type"],
            r["resource_name"],
            r["pattern_type"],
            a["principal"],
            a["host"],
            a["operation"],
            a["permission_type"],
        )
        for r in response["resources"]
        for a in r["acls"]
    }


def test_acls_through_raw_frames_survive_a_restart(corral_factory):
    broker = corral_factory(**SECURED)
    with RawClient(broker.port) as c:
        for version in (1, 2, 3):
            created = c.call(
                ApiKey.CREATE_ACLS,
                version,
                {"creations": [creation(f"orders-v{version}"), creation("pay", pattern=4, op=4)]},
            )
            assert [r["error_code"] for r in created["results"]] == [0, 0]
        refused = c.call(
            ApiKey.CREATE_ACLS,
            3,
            {
                "creations": [
                    {**creation("x"), "resource_type": 4},
                    creation("y", principal="nobody"),
                ]
            },
        )
        assert [(r["error_code"], r["error_message"]) for r in refused["results"]] == [
            (
                ErrorCode.INVALID_REQUEST,
                "The only valid name for the CLUSTER resource is kafka-cluster",
            ),
            (
                ErrorCode.INVALID_REQUEST,
                "Could not parse principal from `nobody` (no colon is "
                "present separating the principal type from the principal name)",
            ),
        ]
        assert described(c) == {
            (2, f"orders-v{v}", 3, "User:alice", "*", 3, 3) for v in (1, 2, 3)
        } | {(2, "pay", 4, "User:alice", "*", 4, 3)}
        deleted = c.call(
            ApiKey.DELETE_ACLS,
            2,
            {
                "filters": [
                    {**EVERYTHING, "resource_name_filter": "orders-v1", "pattern_type_filter": 2}
                ]
            },
        )
        assert [a["resource_name"] for a in deleted["filter_results"][0]["matching_acls"]] == [
            "orders-v1"
        ]
    broker.restart()
    with RawClient(broker.port) as c:
        assert {acl[1] for acl in described(c, 1)} == {"orders-v2", "orders-v3", "pay"}
    assert "ACL authorizer on: 3 ACL(s)" in broker.log()


def test_unknown_codes_close_the_connection_and_no_authorizer_means_security_disabled(
    corral_factory,
):
    secured = corral_factory("secured", **SECURED)
    with RawClient(secured.port) as c:
        c.send(ApiKey.DESCRIBE_ACLS, 3, {**EVERYTHING, "resource_type_filter": 0})
        assert closed_within(c.sock, 5)
    plain = corral_factory("plain")
    with RawClient(plain.port) as c:
        assert (
            c.call(ApiKey.DESCRIBE_ACLS, 3, EVERYTHING)["error_code"] == ErrorCode.SECURITY_DISABLED
        )
        created = c.call(ApiKey.CREATE_ACLS, 3, {"creations": [creation("t")]})
        assert created["results"][0]["error_code"] == ErrorCode.SECURITY_DISABLED
        deleted = c.call(ApiKey.DELETE_ACLS, 3, {"filters": [EVERYTHING]})
        assert deleted["filter_results"][0]["error_code"] == ErrorCode.SECURITY_DISABLED


def test_a_principal_without_acls_is_refused(corral_factory):
    broker = corral_factory(**{"authorizer.class.name": STANDARD})
    with RawClient(broker.port) as c:
        refused = c.call(ApiKey.DESCRIBE_ACLS, 3, EVERYTHING)
        assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        joined = c.call(
            ApiKey.JOIN_GROUP,
            5,
            {
                "group_id": "g",
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        assert joined["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        metadata = c.call(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
        assert metadata["topics"] == []


def test_kafka_acls_adds_lists_and_removes(corral_factory):
    broker = corral_factory(**SECURED)
    base = f"--bootstrap-server {broker.bootstrap}"
    commands = [
        f"{base} --add --allow-principal User:alice --operation Read --operation Describe --topic orders",
        f"{base} --add --allow-principal User:bob --consumer --topic pay --group pay- --resource-pattern-type prefixed",
        f"{base} --add --deny-principal User:mallory --deny-host 10.0.0.0/8 --operation All --cluster",
        f"{base} --list",
        f"{base} --list --topic orders",
        f"{base} --remove --force --allow-principal User:alice --operation Read --topic orders",
        f"{base} --list --principal User:alice",
    ]
    out = run_tool("org.apache.kafka.tools.AclCommand", commands)
    for command in commands:
        assert out[command][0] == 0, out[command][1]
    listing = out[commands[3]][1]
    for expected in [
        "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)",
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "ResourcePattern(resourceType=GROUP, name=pay-, patternType=PREFIXED)",
        "ResourcePattern(resourceType=TOPIC, name=pay, patternType=PREFIXED)",
        "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
        "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)",
        "(principal=User:mallory, host=10.0.0.0/8, operation=ALL, permissionType=DENY)",
    ]:
        assert expected in listing, listing
    assert "name=pay" not in out[commands[4]][1]
    remaining = out[commands[6]][1]
    assert "operation=READ" not in remaining and "operation=DESCRIBE" in remaining
    with RawClient(broker.port) as c:
        assert ("User:alice", 8) in {(acl[3], acl[5]) for acl in described(c)}
