"""What each API checks, in process: a real Broker (its coordinator, logs and topics running on a
trio loop) answering requests that carry a principal (`_core.Connection(..., principal=...)`),
with ACLs set through the authorizer. Requests made this way come from host "" (no socket), so
the ACLs here use host "*".

Here the topic, data and cluster APIs: Metadata, DescribeCluster, ListOffsets, CreateTopics,
CreatePartitions, DescribeLogDirs, InitProducerId, DescribeConfigs, IncrementalAlterConfigs,
DeleteTopics, DeleteRecords, Produce, Fetch. The group APIs: test_acl_enforcement_groups.py."""

from __future__ import annotations

from aclkit import (
    ADMIN,
    ALICE,
    BOB,
    TOPIC,
    acl,
    call,
    codes,
    secured,
)

from corral.errors import ErrorCode
from corral.network.apis import ApiKey
from corral.security.acls import AclOperation as Op
from corral.security.acls import AclPermission, PatternType


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
