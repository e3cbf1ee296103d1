"""What TxnOffsetCommit and WriteTxnMarkers check, in process (aclkit: a real Broker answering
requests that carry a principal). TxnOffsetCommit: WRITE on the transactional id, then READ on
the group, then READ on each topic (KafkaApis.handleTxnOffsetCommitRequest). WriteTxnMarkers:
CLUSTER_ACTION or ALTER on the cluster."""

from __future__ import annotations

from aclkit import ADMIN, ALICE, CLUSTER, GROUP, TOPIC, acl, call, codes, secured

from corral.errors import ErrorCode
from corral.groups.storage.placement import OFFSETS_TOPIC, partition_for
from corral.network.apis import ApiKey
from corral.security.acls import AclOperation as Op
from corral.security.acls import ResourceType

E = ErrorCode


def txn_commit_body(group: str, topics: list[str]) -> dict:
    return {
        "transactional_id": "tx",
        "group_id": group,
        "producer_id": 77,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
            for t in topics
        ],
    }


def test_txn_offset_commit_needs_the_transactional_id_then_the_group_then_each_topic(tmp_path):
    async def scenario(broker):
        body = txn_commit_body("g", ["orders", "payments"])
        for principal, expected in [
            ("User:nobody", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            ("User:txonly", E.GROUP_AUTHORIZATION_FAILED),
        ]:
            answer = await call(broker, principal, ApiKey.TXN_OFFSET_COMMIT, 3, body)
            assert codes(answer) == {"orders": [expected], "payments": [expected]}
        answer = await call(broker, ALICE, ApiKey.TXN_OFFSET_COMMIT, 3, body)
        assert codes(answer) == {"orders": [E.NONE], "payments": [E.TOPIC_AUTHORIZATION_FAILED]}
        # Pending: visible once the marker (from a principal allowed to send it) commits them.
        [(_, [pending])] = broker.groups.offsets.fetch("g", [("orders", [0])], True)
        assert pending[4] == E.UNSTABLE_OFFSET_COMMIT
        marker = markers_body(77, partition_for("g", broker.groups.writer.partitions))
        answer = await call(broker, ADMIN, ApiKey.WRITE_TXN_MARKERS, 1, marker)
        assert marker_codes(answer) == [E.NONE]
        [(_, [committed])] = broker.groups.offsets.fetch("g", [("orders", [0])], True)
        assert committed == (0, 5, -1, "")

    secured(
        tmp_path,
        scenario,
        [
            acl(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE, "User:txonly"),
            acl(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE),
            acl(GROUP, "g", Op.READ),
            acl(TOPIC, "orders", Op.READ),
            acl(TOPIC, "payments", Op.DESCRIBE),
        ],
        # The test plays the transaction coordinator (WriteTxnMarkers): KIP-890's check is off.
        **{"transaction.partition.verification.enable": False},
    )


def markers_body(pid: int, partition: int) -> dict:
    return {
        "markers": [
            {
                "producer_id": pid,
                "producer_epoch": 0,
                "transaction_result": True,
                "coordinator_epoch": 0,
                "topics": [{"name": OFFSETS_TOPIC, "partition_indexes": [partition]}],
            }
        ]
    }


def marker_codes(answer: dict) -> list[int]:
    return [
        p["error_code"] for m in answer["markers"] for t in m["topics"] for p in t["partitions"]
    ]


def test_write_txn_markers_needs_cluster_action_or_alter(tmp_path):
    async def scenario(broker):
        body = markers_body(78, 0)
        for principal, expected in [
            (ALICE, E.CLUSTER_AUTHORIZATION_FAILED),
            ("User:action", E.NONE),
            ("User:alter", E.NONE),
        ]:
            answer = await call(broker, principal, ApiKey.WRITE_TXN_MARKERS, 1, body)
            assert marker_codes(answer) == [expected], principal

    secured(
        tmp_path,
        scenario,
        [
            acl(CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, "User:action"),
            acl(CLUSTER, "kafka-cluster", Op.ALTER, "User:alter"),
            acl(CLUSTER, "kafka-cluster", Op.DESCRIBE, ALICE),
        ],
    )
