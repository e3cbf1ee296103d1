"""What each API checks, in process: a real Broker (its coordinator, logs and topics running on a
trio loop) answering requests that carry a principal (`_core.Connection(..., principal=...)`),
with ACLs set through the authorizer. Requests made this way come from host "" (no socket), so
the ACLs here use host "*"."""

from __future__ import annotations

import pytest
from aclkit import ADMIN, ALICE, BOB, CLUSTER, GROUP, TOPIC, acl, call, secured, with_broker

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey
from corral.security.acls import AclOperation as Op
from corral.security.acls import AclPermission, PatternType


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


def commit_body(group: str, topics: list[str]) -> dict:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": t,
                "partitions": [
                    {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                ],
            }
            for t in topics
        ],
    }


def codes(response: dict) -> dict[str, list[int]]:
    return {t["name"]: [p["error_code"] for p in t["partitions"]] for t in response["topics"]}


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


def test_metadata_shows_what_the_principal_may_describe(tmp_path):
    async def scenario(broker):
        every = await call(
            broker,
            ALICE,
            ApiKey.METADATA,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": True,
            },
        )
        assert [(t["name"], t["topic_authorized_operations"]) for t in every["topics"]] == [
            ("orders", (1 << Op.READ) | (1 << Op.DESCRIBE))
        ]
        named = await call(
            broker,
            ALICE,
            ApiKey.METADATA,
            12,
            {
                "topics": [{"name": n} for n in ("payments", "orders", "ghost", "new-one")],
                "allow_auto_topic_creation": True,
            },
        )
        assert [(t["name"], t["error_code"]) for t in named["topics"]] == [
            # new-one may be described, not created; the undescribable ones come last.
            ("orders", 0),
            ("new-one", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("payments", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("ghost", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ]
        created = await call(
            broker,
            ALICE,
            ApiKey.METADATA,
            12,
            {"topics": [{"name": "new-two"}], "allow_auto_topic_creation": True},
        )
        assert created["topics"][0]["error_code"] == 0 and broker.topics.get("new-two")
        cluster = await call(
            broker,
            ALICE,
            ApiKey.METADATA,
            10,
            {
                "topics": [],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": True,
            },
        )
        assert cluster["cluster_authorized_operations"] == 0
        cluster = await call(
            broker,
            ADMIN,
            ApiKey.DESCRIBE_CLUSTER,
            1,
            {"include_cluster_authorized_operations": True, "endpoint_type": 1},
        )
        assert cluster["cluster_authorized_operations"] == sum(
            1 << op
            for op in (
                Op.CREATE,
                Op.CLUSTER_ACTION,
                Op.DESCRIBE_CONFIGS,
                Op.ALTER_CONFIGS,
                Op.IDEMPOTENT_WRITE,
                Op.ALTER,
                Op.DESCRIBE,
            )
        )

    secured(
        tmp_path,
        scenario,
        [
            acl(TOPIC, "orders", Op.READ),
            acl(TOPIC, "new-", Op.ALL, pattern=PatternType.PREFIXED),
            acl(TOPIC, "new-one", Op.CREATE, perm=AclPermission.DENY),
        ],
    )


def test_data_and_admin_apis(tmp_path):
    async def scenario(broker):
        listed = await call(
            broker,
            ALICE,
            ApiKey.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                    for t in ("orders", "payments")
                ],
            },
        )
        assert codes(listed) == {"orders": [0], "payments": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
        created = await call(
            broker,
            ALICE,
            ApiKey.CREATE_TOPICS,
            7,
            {
                "timeout_ms": 5000,
                "topics": [
                    {
                        "name": n,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                    for n in ("new-a", "other")
                ],
            },
        )
        assert [
            (t["name"], t["error_code"], t["topic_config_error_code"]) for t in created["topics"]
        ] == [
            ("new-a", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("other", ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0),
        ]
        grown = await call(
            broker,
            ALICE,
            ApiKey.CREATE_PARTITIONS,
            3,
            {
                "topics": [{"name": "orders", "count": 3, "assignments": None}],
                "timeout_ms": 5000,
                "validate_only": True,
            },
        )
        assert grown["results"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        dirs = await call(broker, ALICE, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
        assert (
            dirs["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and dirs["results"] == []
        )
        producer = await call(
            broker,
            ALICE,
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": None,
                "transaction_timeout_ms": 1000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        assert producer["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        producer = await call(
            broker,
            BOB,
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": None,
                "transaction_timeout_ms": 1000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        assert producer["error_code"] == 0
        configs = await call(
            broker,
            ALICE,
            ApiKey.DESCRIBE_CONFIGS,
            4,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": "payments", "configuration_keys": None},
                    {
                        "resource_type": 4,
                        "resource_name": "1",
                        "configuration_keys": ["num.partitions"],
                    },
                    {
                        "resource_type": 2,
                        "resource_name": "orders",
                        "configuration_keys": ["retention.ms"],
                    },
                ]
            },
        )
        assert [(r["resource_name"], r["error_code"]) for r in configs["results"]] == [
            ("orders", 0),
            ("payments", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        ]
        altered = await call(
            broker,
            ALICE,
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": "orders",
                        "configs": [
                            {"name": "retention.ms", "config_operation": 0, "value": "1000"}
                        ],
                    },
                    {"resource_type": 32, "resource_name": "g", "configs": []},
                ]
            },
        )
        assert [r["error_code"] for r in altered["responses"]] == [
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ]
        deleted = await call(
            broker,
            ALICE,
            ApiKey.DELETE_TOPICS,
            6,
            {
                "timeout_ms": 5000,
                "topics": [
                    {"name": n, "topic_id": bytes(16)} for n in ("orders", "payments", "ghost")
                ],
            },
        )
        assert [(t["name"], t["error_code"]) for t in deleted["responses"]] == [
            ("orders", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("payments", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("ghost", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ]
        records = await call(
            broker,
            ALICE,
            ApiKey.DELETE_RECORDS,
            2,
            {
                "timeout_ms": 5000,
                "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": 0}]}],
            },
        )
        assert codes(records) == {"orders": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
        produced = await call(
            broker,
            ALICE,
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 1000,
                "topic_data": [
                    {"name": "orders", "partition_data": [{"index": 0, "records": None}]}
                ],
            },
        )
        assert [
            p["error_code"] for t in produced["responses"] for p in t["partition_responses"]
        ] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        fetched = await call(
            broker,
            ALICE,
            ApiKey.FETCH,
            12,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 1000,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "rack_id": "",
                "forgotten_topics_data": [],
                "topics": [
                    {
                        "topic": name,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1000,
                            }
                        ],
                    }
                    for name in ("orders", "payments")
                ],
            },
        )
        assert [
            (t["topic"], p["error_code"]) for t in fetched["responses"] for p in t["partitions"]
        ] == [("orders", 0), ("payments", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]

    secured(
        tmp_path,
        scenario,
        [
            acl(TOPIC, "orders", Op.READ),
            acl(TOPIC, "orders", Op.DESCRIBE_CONFIGS),
            acl(TOPIC, "new-", Op.CREATE, pattern=PatternType.PREFIXED),
            acl(TOPIC, "orders2", Op.WRITE, BOB),
        ],
    )


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
    everything = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }

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
