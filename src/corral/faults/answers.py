"""The response Kafka gives a request it refuses with one error: what an `error` fault answers.

Modelled on each Kafka request's `getErrorResponse` (org.apache.kafka.common.requests): the
error goes where the API carries it, the top-level `error_code`, or every partition, group,
topic or resource the request named, with the placeholder values Kafka puts beside it (offsets
-1, empty strings, no members). APIs with both a top-level code and per-partition codes (Fetch
v7+, OffsetFetch v2+, OffsetDelete) carry a partition-level error (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION...) on the partitions, as a broker does, and any other at the top.
tests/unit/faults/test_fault_answers.py encodes an answer for every version of every API Python owns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.errors import ErrorCode as E
from corral.network.apis import ApiKey

Body = dict[str, Any]
# (request body, version, error code, error message) -> response body
Builder = Callable[[Body, int, int, str | None], Body]

# Errors a broker answers for one partition rather than for the whole request.
PARTITION_LEVEL = frozenset(
    {
        E.OFFSET_OUT_OF_RANGE,
        E.CORRUPT_MESSAGE,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.LEADER_NOT_AVAILABLE,
        E.NOT_LEADER_OR_FOLLOWER,
        E.REPLICA_NOT_AVAILABLE,
        E.MESSAGE_TOO_LARGE,
        E.OFFSET_METADATA_TOO_LARGE,
        E.RECORD_LIST_TOO_LARGE,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.TOPIC_AUTHORIZATION_FAILED,
        E.KAFKA_STORAGE_ERROR,
        E.FENCED_LEADER_EPOCH,
        E.UNKNOWN_LEADER_EPOCH,
        E.OFFSET_NOT_AVAILABLE,
        E.GROUP_SUBSCRIBED_TO_TOPIC,
        E.UNSTABLE_OFFSET_COMMIT,
        E.UNKNOWN_TOPIC_ID,
    }
)
NIL_UUID = bytes(16)
# DescribeGroups' and ConsumerGroupDescribe's "not requested" authorized operations.
OPERATIONS_OMITTED = -(2**31)


def _partition_level(code: int) -> bool:
    return code in PARTITION_LEVEL


def _produce(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "responses": [
            {
                "name": topic.get("name", ""),
                "topic_id": topic.get("topic_id", NIL_UUID),
                "partition_responses": [
                    {
                        "index": p["index"],
                        "error_code": code,
                        "base_offset": -1,
                        "log_append_time_ms": -1,
                        "log_start_offset": -1,
                        "error_message": message if version >= 8 else None,
                    }
                    for p in topic["partition_data"]
                ],
            }
            for topic in body["topic_data"]
        ]
    }


def _fetch(body: Body, version: int, code: int, message: str | None) -> Body:
    out: Body = {
        "responses": [
            {
                "topic": topic.get("topic", ""),
                "topic_id": topic.get("topic_id", NIL_UUID),
                "partitions": [
                    {
                        "partition_index": p["partition"],
                        "error_code": code,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "records": b"",
                    }
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ]
    }
    if version >= 7 and not _partition_level(code):
        out["error_code"] = code
    return out


def _list_offsets(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": code,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ]
    }


def _metadata(body: Body, version: int, code: int, message: str | None) -> Body:
    out: Body = {
        "topics": [
            {
                "error_code": code,
                "name": topic.get("name"),
                "topic_id": topic.get("topic_id", NIL_UUID),
                "partitions": [],
            }
            for topic in body.get("topics") or ()
        ]
    }
    if version >= 13:
        out["error_code"] = code
    return out


def _offset_commit(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code}
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ]
    }


def _fetched_topics(topics: list[Body] | None, code: int) -> list[Body]:
    return [
        {
            "name": topic["name"],
            "partitions": [
                {
                    "partition_index": index,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": code,
                }
                for index in topic["partition_indexes"]
            ],
        }
        for topic in topics or ()
    ]


def _offset_fetch(body: Body, version: int, code: int, message: str | None) -> Body:
    on_partitions = version < 2 or _partition_level(code)
    if version >= 8:
        return {
            "groups": [
                {
                    "group_id": group["group_id"],
                    "topics": _fetched_topics(group.get("topics"), code) if on_partitions else [],
                    "error_code": 0 if on_partitions else code,
                }
                for group in body["groups"]
            ]
        }
    out: Body = {"topics": _fetched_topics(body.get("topics"), code) if on_partitions else []}
    if version >= 2 and not on_partitions:
        out["error_code"] = code
    return out


def _find_coordinator(body: Body, version: int, code: int, message: str | None) -> Body:
    if version >= 4:
        return {
            "coordinators": [
                {
                    "key": key,
                    "node_id": -1,
                    "host": "",
                    "port": -1,
                    "error_code": code,
                    "error_message": message,
                }
                for key in body["coordinator_keys"]
            ]
        }
    return {
        "error_code": code,
        "error_message": message if version >= 1 else None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }


def _join_group(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_name": None if version >= 7 else "",
        "leader": "",
        "member_id": "",
        "members": [],
    }


def _top(**extra: Any) -> Builder:
    """Only a top-level error code (and `extra` placeholders)."""

    def build(body: Body, version: int, code: int, message: str | None) -> Body:
        return {"error_code": code, **extra}

    return build


def _top_with_message(**extra: Any) -> Builder:
    def build(body: Body, version: int, code: int, message: str | None) -> Body:
        return {"error_code": code, "error_message": message, **extra}

    return build


def _describe_groups(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "groups": [
            {
                "error_code": code,
                "error_message": message if version >= 6 else None,
                "group_id": group_id,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": OPERATIONS_OMITTED,
            }
            for group_id in body["groups"]
        ]
    }


def _create_topics(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "topics": [
            {
                "name": topic["name"],
                "error_code": code,
                "error_message": message if version >= 1 else None,
                "num_partitions": -1,
                "replication_factor": -1,
            }
            for topic in body["topics"]
        ]
    }


def _delete_topics(body: Body, version: int, code: int, message: str | None) -> Body:
    if version >= 6:
        named = [(t.get("name"), t.get("topic_id")) for t in body["topics"]]
    else:
        named = [(name, NIL_UUID) for name in body["topic_names"]]
    return {
        "responses": [
            {
                "name": name,
                "topic_id": topic_id,
                "error_code": code,
                "error_message": message if version >= 5 else None,
            }
            for name, topic_id in named
        ]
    }


def _delete_records(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "low_watermark": -1,
                        "error_code": code,
                    }
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ]
    }


def _per_item(list_field: str, out_field: str, copy: tuple[str, ...] = ()) -> Builder:
    """One result per item of the request's `list_field`, each with the error (and message),
    copying the item's `copy` fields."""

    def build(body: Body, version: int, code: int, message: str | None) -> Body:
        return {
            out_field: [
                {
                    **{name: item[name] for name in copy},
                    "error_code": code,
                    "error_message": message,
                }
                for item in body[list_field]
            ]
        }

    return build


def _delete_acls(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []}
            for _ in body["filters"]
        ]
    }


def _describe_log_dirs(body: Body, version: int, code: int, message: str | None) -> Body:
    # Before v3 the response has no error code (Kafka's answer is then an empty list).
    return {"error_code": code, "results": []} if version >= 3 else {"results": []}


def _create_partitions(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "results": [
            {"name": topic["name"], "error_code": code, "error_message": message}
            for topic in body["topics"]
        ]
    }


def _delete_groups(body: Body, version: int, code: int, message: str | None) -> Body:
    return {"results": [{"group_id": g, "error_code": code} for g in body["groups_names"]]}


def _offset_delete(body: Body, version: int, code: int, message: str | None) -> Body:
    if not _partition_level(code):
        return {"error_code": code, "topics": []}
    return {
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code}
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ]
    }


def _describe_scram(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "error_code": code,
        "error_message": message,
        "results": [
            {"user": user["name"], "error_code": code, "error_message": message}
            for user in body.get("users") or ()
        ],
    }


def _alter_scram(body: Body, version: int, code: int, message: str | None) -> Body:
    users = dict.fromkeys(item["name"] for item in [*body["deletions"], *body["upsertions"]])
    return {
        "results": [{"user": user, "error_code": code, "error_message": message} for user in users]
    }


def _consumer_group_describe(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "groups": [
            {
                "error_code": code,
                "error_message": message,
                "group_id": group_id,
                "authorized_operations": OPERATIONS_OMITTED,
            }
            for group_id in body["group_ids"]
        ]
    }


def _describe_share_group_offsets(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "groups": [
            {"group_id": g["group_id"], "topics": [], "error_code": code, "error_message": message}
            for g in body["groups"]
        ]
    }


def _add_partitions_to_txn(body: Body, version: int, code: int, message: str | None) -> Body:
    if version >= 4:
        return {"error_code": code, "results_by_transaction": []}
    return {
        "results_by_topic_v3_and_below": [
            {
                "name": t["name"],
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": code} for p in t["partitions"]
                ],
            }
            for t in body["v3_and_below_topics"]
        ]
    }


def _write_txn_markers(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "markers": [
            {
                "producer_id": m["producer_id"],
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {"partition_index": p, "error_code": code}
                            for p in t["partition_indexes"]
                        ],
                    }
                    for t in m["topics"]
                ],
            }
            for m in body["markers"]
        ]
    }


def _describe_transactions(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "transaction_states": [
            {"error_code": code, "transactional_id": tid, "transaction_state": ""}
            for tid in body["transactional_ids"]
        ]
    }


def _describe_producers(body: Body, version: int, code: int, message: str | None) -> Body:
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": code,
                        "error_message": message,
                        "active_producers": [],
                    }
                    for p in t["partition_indexes"]
                ],
            }
            for t in body["topics"]
        ]
    }


BUILDERS: dict[int, Builder] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.HEARTBEAT: _top(),
    ApiKey.LEAVE_GROUP: _top(),
    ApiKey.SYNC_GROUP: _top(assignment=b""),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _top(groups=[]),
    ApiKey.SASL_HANDSHAKE: _top(mechanisms=[]),
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: _top(producer_id=-1, producer_epoch=-1),
    ApiKey.DESCRIBE_ACLS: _top_with_message(resources=[]),
    ApiKey.CREATE_ACLS: _per_item("creations", "results"),
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.DESCRIBE_CONFIGS: _per_item("resources", "results", ("resource_type", "resource_name")),
    ApiKey.ALTER_CONFIGS: _per_item("resources", "responses", ("resource_type", "resource_name")),
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.SASL_AUTHENTICATE: _top_with_message(auth_bytes=b""),
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _per_item(
        "resources", "responses", ("resource_type", "resource_name")
    ),
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _top_with_message(entries=None),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_scram,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_scram,
    ApiKey.DESCRIBE_CLUSTER: _top_with_message(cluster_id="", controller_id=-1, brokers=[]),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _top_with_message(),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _top(),
    ApiKey.END_TXN: _top(producer_id=-1, producer_epoch=-1),
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: _offset_commit,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _top(unknown_state_filters=[], transaction_states=[]),
    # Kafka's getErrorResponse of the share APIs: the code alone, no message.
    ApiKey.SHARE_GROUP_HEARTBEAT: _top(),
    ApiKey.SHARE_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.SHARE_FETCH: _top(responses=[], node_endpoints=[]),
    ApiKey.SHARE_ACKNOWLEDGE: _top(responses=[], node_endpoints=[]),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _top_with_message(responses=[]),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _top_with_message(responses=[]),
}


def error_response(
    api_key: int, version: int, body: Body, code: int, message: str | None = None
) -> Body:
    """The response body refusing the request `body` with `code`. A request of an API without a
    builder gets a top-level `error_code`."""
    builder = BUILDERS.get(api_key)
    if builder is None:
        return {"error_code": code}
    return builder(body, version, code, message)
