"""What each API checks, in process: a real Broker (its coordinator, logs and topics running on a
trio loop) answering requests that carry a principal (`_core.Connection(..., principal=...)`),
with ACLs set through the authorizer. Requests made this way come from host "" (no socket), so
the ACLs here use host "*".

Here the group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat,
OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, ConsumerGroupDescribe,
FindCoordinator, DeleteGroups. Topics, data and configs: test_acl_enforcement_topics.py; the ACL
APIs: test_acl_enforcement_acl_apis.py."""

from __future__ import annotations

from aclkit import (
    ADMIN,
    ALICE,
    BOB,
    CLUSTER,
    GROUP,
    TOPIC,
    acl,
    call,
    codes,
    commit_body,
    secured,
)

from corral.errors import ErrorCode
from corral.network.apis import ApiKey
from corral.security.acls import AclOperation as Op
from corral.security.acls import PatternType


def join_body(group: str, member_id: str = "") -> dict:
    return {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }


def test_group_apis_need_group_read_and_tell_the_network_thread(tmp_path):
    async def scenario(broker):
        joined = await call(broker, BOB, ApiKey.JOIN_GROUP, 9, join_body("g"))
        assert joined["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        for key, version, body in [
            (
                ApiKey.SYNC_GROUP,
                5,
                {
                    "group_id": "g",
                    "generation_id": 1,
                    "member_id": "m",
                    "protocol_type": "consumer",
                    "protocol_name": "range",
                    "assignments": [],
                },
            ),
            (ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
            (ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "m"}]}),
            (
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                1,
                {
                    "group_id": "g",
                    "member_id": "m",
                    "member_epoch": 0,
                    "rebalance_timeout_ms": 1000,
                    "subscribed_topic_names": ["orders"],
                    "topic_partitions": [],
                },
            ),
        ]:
            assert (await call(broker, BOB, key, version, body))[
                "error_code"
            ] == ErrorCode.GROUP_AUTHORIZATION_FAILED, key
        assert broker.sessions.network.authorized == []
        # alice may READ g: her JoinGroup goes to the coordinator, and the thread is told.
        joined = await call(broker, ALICE, ApiKey.JOIN_GROUP, 9, join_body("g"))
        assert joined["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
        assert broker.sessions.network.authorized == [(0, "g")]
        # A subscription by name needs DESCRIBE on every topic.
        refused = await call(
            broker,
            ALICE,
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            {
                "group_id": "g2",
                "member_id": "m",
                "member_epoch": 0,
                "rebalance_timeout_ms": 1000,
                "subscribed_topic_names": ["orders", "payments"],
                "topic_partitions": [],
            },
        )
        assert refused["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    secured(
        tmp_path,
        scenario,
        [acl(GROUP, "g", Op.READ), acl(GROUP, "g2", Op.READ), acl(TOPIC, "orders", Op.DESCRIBE)],
    )


def test_offset_commit_fetch_and_delete(tmp_path):
    async def scenario(broker):
        response = await call(broker, BOB, ApiKey.OFFSET_COMMIT, 8, commit_body("g", ["orders"]))
        assert codes(response) == {"orders": [ErrorCode.GROUP_AUTHORIZATION_FAILED]}
        response = await call(
            broker, ALICE, ApiKey.OFFSET_COMMIT, 8, commit_body("g", ["orders", "payments", "nope"])
        )
        # Authorization comes before existence: no word about whether "nope" exists.
        assert codes(response) == {
            "orders": [0],
            "payments": [ErrorCode.TOPIC_AUTHORIZATION_FAILED],
            "nope": [ErrorCode.TOPIC_AUTHORIZATION_FAILED],
        }
        # What the network thread may write for the connection from now on (commit_path.rs).
        assert broker.sessions.network.authorized_topics == [(0, ["orders"])]
        await call(broker, ADMIN, ApiKey.OFFSET_COMMIT, 8, commit_body("g", ["payments"]))
        # OffsetFetch needs GROUP DESCRIBE (READ implies it); undescribable topics are left out
        # of "everything", refused when named.
        fetched = await call(
            broker,
            ALICE,
            ApiKey.OFFSET_FETCH,
            8,
            {
                "groups": [
                    {"group_id": "g", "topics": None},
                    {
                        "group_id": "g",
                        "topics": [
                            {"name": "orders", "partition_indexes": [0]},
                            {"name": "payments", "partition_indexes": [0]},
                        ],
                    },
                ]
            },
        )
        everything, named = fetched["groups"]
        assert [
            (t["name"], [p["committed_offset"] for p in t["partitions"]])
            for t in everything["topics"]
        ] == [("orders", [5])]
        assert codes(named) == {"orders": [0], "payments": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
        fetched = await call(
            broker,
            "User:carol",
            ApiKey.OFFSET_FETCH,
            8,
            {"groups": [{"group_id": "g", "topics": None}]},
        )
        assert fetched["groups"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        fetched = await call(
            broker,
            "User:carol",
            ApiKey.OFFSET_FETCH,
            1,
            {"group_id": "g", "topics": [{"name": "orders", "partition_indexes": [0, 1]}]},
        )
        assert codes(fetched) == {"orders": [ErrorCode.GROUP_AUTHORIZATION_FAILED] * 2}
        # OffsetDelete needs GROUP DELETE, and READ on each topic.
        body = {
            "group_id": "g",
            "topics": [
                {"name": t, "partitions": [{"partition_index": 0}]} for t in ("orders", "payments")
            ],
        }
        deleted = await call(broker, ALICE, ApiKey.OFFSET_DELETE, 0, body)
        assert deleted["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        deleted = await call(broker, BOB, ApiKey.OFFSET_DELETE, 0, body)
        assert deleted["error_code"] == 0
        assert codes(deleted) == {"orders": [0], "payments": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}

    secured(
        tmp_path,
        scenario,
        [
            acl(GROUP, "g", Op.READ),
            acl(TOPIC, "orders", Op.READ),
            acl(GROUP, "g", Op.DELETE, BOB),
            acl(TOPIC, "orders", Op.READ, BOB),
        ],
    )


def test_list_describe_delete_and_find_groups(tmp_path):
    async def scenario(broker):
        for group in ("mine", "theirs"):
            await call(broker, ADMIN, ApiKey.OFFSET_COMMIT, 8, commit_body(group, ["orders"]))
        listed = await call(broker, ALICE, ApiKey.LIST_GROUPS, 5, {})
        assert [g["group_id"] for g in listed["groups"]] == ["mine"]
        listed = await call(broker, BOB, ApiKey.LIST_GROUPS, 5, {})
        assert sorted(g["group_id"] for g in listed["groups"]) == ["mine", "theirs"]
        described = await call(
            broker,
            ALICE,
            ApiKey.DESCRIBE_GROUPS,
            5,
            {"groups": ["theirs", "mine"], "include_authorized_operations": True},
        )
        assert [
            (g["group_id"], g["error_code"], g["authorized_operations"])
            for g in described["groups"]
        ] == [
            ("mine", 0, (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.DELETE)),
            ("theirs", ErrorCode.GROUP_AUTHORIZATION_FAILED, -(2**31)),
        ]
        described = await call(
            broker,
            ALICE,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            1,
            {"group_ids": ["theirs"], "include_authorized_operations": True},
        )
        assert described["groups"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        found = await call(
            broker,
            ALICE,
            ApiKey.FIND_COORDINATOR,
            4,
            {"key_type": 0, "coordinator_keys": ["mine", "theirs"]},
        )
        assert [(c["key"], c["error_code"], c["node_id"]) for c in found["coordinators"]] == [
            ("mine", 0, 1),
            ("theirs", ErrorCode.GROUP_AUTHORIZATION_FAILED, -1),
        ]
        deleted = await call(
            broker, ALICE, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["theirs", "mine"]}
        )
        assert [(r["group_id"], r["error_code"]) for r in deleted["results"]] == [
            ("mine", 0),
            ("theirs", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ]

    secured(
        tmp_path,
        scenario,
        [
            acl(GROUP, "mine", Op.READ),
            acl(GROUP, "mi", Op.DELETE, pattern=PatternType.PREFIXED),
            acl(CLUSTER, "kafka-cluster", Op.DESCRIBE, BOB),
        ],
    )
