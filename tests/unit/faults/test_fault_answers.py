"""Error answers (corral/faults/answers.py): every version of every API Python owns gets a response
that encodes, decodes as the client's codec reads it, and carries the injected error where Kafka's
own error response does (top level, per partition, per group, per resource)."""

from __future__ import annotations

from typing import Any

import pytest

from corral import _core
from corral.errors import ErrorCode
from corral.faults.answers import BUILDERS, PARTITION_LEVEL, error_response
from corral.network.apis import HANDLERS, ApiKey, api_table

K = ApiKey
TP = [{"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]
ACL = {
    "resource_type_filter": 2,
    "resource_name_filter": "t",
    "pattern_type_filter": 3,
    "operation": 2,
    "permission_type": 3,
}


def sample(key: int, v: int) -> dict[str, Any]:
    """A request of that API and version naming group "g", topic "t" (partitions 0 and 1), ..."""
    return {
        K.PRODUCE: lambda: {
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": None}, {"index": 1}]}
            ],
        },
        K.FETCH: lambda: {"topics": [{"topic": "t", "partitions": [{"partition": 0}]}]},
        K.LIST_OFFSETS: lambda: {"topics": TP},
        K.METADATA: lambda: {"topics": [{"name": "t"}]},
        K.OFFSET_COMMIT: lambda: {"group_id": "g", "member_id": "m", "topics": TP},
        K.OFFSET_FETCH: lambda: (
            {"groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}]}
            if v >= 8
            else {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
        ),
        K.FIND_COORDINATOR: lambda: {"coordinator_keys": ["g", "h"]} if v >= 4 else {"key": "g"},
        K.JOIN_GROUP: lambda: {
            "group_id": "g",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        K.HEARTBEAT: lambda: {"group_id": "g", "generation_id": 1, "member_id": "m"},
        K.LEAVE_GROUP: lambda: (
            {"group_id": "g", "members": [{"member_id": "m"}]}
            if v >= 3
            else {"group_id": "g", "member_id": "m"}
        ),
        K.SYNC_GROUP: lambda: {"group_id": "g", "generation_id": 1, "member_id": "m"},
        K.DESCRIBE_GROUPS: lambda: {"groups": ["g", "h"]},
        K.LIST_GROUPS: lambda: {},
        K.SASL_HANDSHAKE: lambda: {"mechanism": "PLAIN"},
        K.CREATE_TOPICS: lambda: {
            "topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]
        },
        K.DELETE_TOPICS: lambda: {"topics": [{"name": "t"}]} if v >= 6 else {"topic_names": ["t"]},
        K.DELETE_RECORDS: lambda: {
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 1}]}]
        },
        K.INIT_PRODUCER_ID: lambda: {},
        K.DESCRIBE_ACLS: lambda: dict(ACL),
        K.CREATE_ACLS: lambda: {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "t",
                    "resource_pattern_type": 3,
                    "principal": "User:a",
                    "host": "*",
                    "operation": 2,
                    "permission_type": 3,
                }
            ]
        },
        K.DELETE_ACLS: lambda: {"filters": [dict(ACL), dict(ACL)]},
        K.DESCRIBE_CONFIGS: lambda: {"resources": [{"resource_type": 2, "resource_name": "t"}]},
        K.ALTER_CONFIGS: lambda: {"resources": [{"resource_type": 2, "resource_name": "t"}]},
        K.DESCRIBE_LOG_DIRS: lambda: {"topics": None},
        K.SASL_AUTHENTICATE: lambda: {"auth_bytes": b""},
        K.CREATE_PARTITIONS: lambda: {"topics": [{"name": "t", "count": 2}]},
        K.DELETE_GROUPS: lambda: {"groups_names": ["g", "h"]},
        K.INCREMENTAL_ALTER_CONFIGS: lambda: {
            "resources": [{"resource_type": 2, "resource_name": "t"}]
        },
        K.OFFSET_DELETE: lambda: {"group_id": "g", "topics": TP},
        K.DESCRIBE_CLIENT_QUOTAS: lambda: {"components": []},
        K.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda: {"users": [{"name": "alice"}]},
        K.ALTER_USER_SCRAM_CREDENTIALS: lambda: {
            "deletions": [{"name": "alice", "mechanism": 1}],
            "upsertions": [],
        },
        K.DESCRIBE_CLUSTER: lambda: {},
        K.CONSUMER_GROUP_HEARTBEAT: lambda: {"group_id": "g", "member_id": "m", "member_epoch": 1},
        K.CONSUMER_GROUP_DESCRIBE: lambda: {"group_ids": ["g"]},
        K.ADD_PARTITIONS_TO_TXN: lambda: (
            {"transactions": [{"transactional_id": "x", "topics": []}]}
            if v >= 4
            else {"v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}]}
        ),
        K.ADD_OFFSETS_TO_TXN: lambda: {"transactional_id": "x", "group_id": "g"},
        K.END_TXN: lambda: {"transactional_id": "x"},
        K.WRITE_TXN_MARKERS: lambda: {
            "markers": [{"producer_id": 1, "topics": [{"name": "t", "partition_indexes": [0, 1]}]}]
        },
        K.TXN_OFFSET_COMMIT: lambda: {"transactional_id": "x", "group_id": "g", "topics": TP},
        K.DESCRIBE_PRODUCERS: lambda: {"topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        K.DESCRIBE_TRANSACTIONS: lambda: {"transactional_ids": ["x", "y"]},
        K.LIST_TRANSACTIONS: lambda: {},
        K.SHARE_GROUP_HEARTBEAT: lambda: {"group_id": "g", "member_id": "m"},
        K.SHARE_GROUP_DESCRIBE: lambda: {"group_ids": ["g"]},
        K.SHARE_FETCH: lambda: {"group_id": "g", "member_id": "m"},
        K.SHARE_ACKNOWLEDGE: lambda: {"group_id": "g", "member_id": "m"},
        K.DESCRIBE_SHARE_GROUP_OFFSETS: lambda: {"groups": [{"group_id": "g", "topics": None}]},
        K.ALTER_SHARE_GROUP_OFFSETS: lambda: {"group_id": "g", "topics": []},
        K.DELETE_SHARE_GROUP_OFFSETS: lambda: {"group_id": "g", "topics": []},
    }[K(key)]()


def python_owned() -> list[tuple[ApiKey, int]]:
    cases = []
    for key, lo, hi in api_table().advertised():
        if key == K.API_VERSIONS:
            continue
        codec_lo, _ = _core.codec_versions(key)
        cases += [(K(key), v) for v in range(max(lo, codec_lo), hi + 1)]
    return cases


CASES = python_owned()
IDS = [f"{k.name}-v{v}" for k, v in CASES]
TABLE = _core.ApiTable(api_table().advertised())


def request(key: int, version: int) -> _core.Request:
    connection = _core.Connection(TABLE, 1 << 20)
    connection.feed(_core.encode_request(key, version, 7, sample(key, version), "faults-test"))
    item = connection.next()
    assert isinstance(item, _core.Request)
    return item


def answered(key: int, version: int, code: int) -> dict[str, Any]:
    """The injected error response as the client decodes it."""
    req = request(key, version)
    frame = req.respond(error_response(key, version, req.body, code, "injected by a test"))
    correlation_id, body = _core.decode_response(key, version, frame[4:])
    assert correlation_id == 7
    return body


def codes(body: Any) -> list[int]:
    """Every error_code in a decoded response, depth first."""
    found = []
    if isinstance(body, dict):
        for name, value in body.items():
            if name in ("error_code", "partition_error_code"):  # the latter: AddPartitionsToTxn
                found.append(value)
            else:
                found += codes(value)
    elif isinstance(body, list):
        for item in body:
            found += codes(item)
    return found


def test_every_python_owned_api_has_a_builder():
    assert set(HANDLERS) <= set(BUILDERS)


@pytest.mark.parametrize(
    "code", [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER]
)
@pytest.mark.parametrize("key, version", CASES, ids=IDS)
def test_error_response_encodes_and_carries_the_error(key, version, code):
    found = codes(answered(key, version, code))
    assert set(found) <= {0, code}
    if key == K.DESCRIBE_LOG_DIRS and version < 3:
        assert set(found) == {0}  # no error code in those versions: Kafka answers an empty list
    else:
        assert code in found


# (API, version, error) -> where the error is: a path of keys and list indexes into the decoded
# response, and what it holds.
WHERE = [
    (K.PRODUCE, 9, 6, ["responses", 0, "partition_responses", 1, "error_code"]),
    (K.PRODUCE, 9, 6, ["responses", 0, "partition_responses", 1, "base_offset"], -1),
    (K.FETCH, 12, 6, ["responses", 0, "partitions", 0, "error_code"]),
    (K.FETCH, 12, 6, ["error_code"], 0),
    (K.FETCH, 12, 15, ["error_code"]),
    (K.OFFSET_COMMIT, 8, 14, ["topics", 0, "partitions", 1, "error_code"]),
    (K.OFFSET_FETCH, 7, 14, ["error_code"]),
    (K.OFFSET_FETCH, 7, 14, ["topics"], []),
    (K.OFFSET_FETCH, 1, 14, ["topics", 0, "partitions", 1, "error_code"]),
    (K.OFFSET_FETCH, 8, 14, ["groups", 0, "error_code"]),
    (K.OFFSET_FETCH, 8, 3, ["groups", 0, "topics", 0, "partitions", 0, "error_code"]),
    (K.FIND_COORDINATOR, 3, 15, ["error_code"]),
    (K.FIND_COORDINATOR, 4, 15, ["coordinators", 1, "error_code"]),
    (K.FIND_COORDINATOR, 4, 15, ["coordinators", 1, "key"], "h"),
    (K.HEARTBEAT, 4, 27, ["error_code"]),
    (K.JOIN_GROUP, 9, 25, ["generation_id"], -1),
    (K.DESCRIBE_GROUPS, 5, 16, ["groups", 1, "error_code"]),
    (K.DELETE_GROUPS, 2, 16, ["results", 1, "error_code"]),
    (K.OFFSET_DELETE, 0, 16, ["error_code"]),
    (K.OFFSET_DELETE, 0, 3, ["topics", 0, "partitions", 1, "error_code"]),
    (K.DELETE_RECORDS, 2, 6, ["topics", 0, "partitions", 0, "low_watermark"], -1),
    (K.LIST_OFFSETS, 7, 6, ["topics", 0, "partitions", 1, "offset"], -1),
    (K.CONSUMER_GROUP_HEARTBEAT, 0, 14, ["error_message"], "injected by a test"),
]


@pytest.mark.parametrize("case", WHERE, ids=lambda c: f"{c[0].name}-v{c[1]}-{c[2]}-{c[3][-1]}")
def test_the_error_sits_where_kafka_puts_it(case):
    key, version, code, path, *expected = case
    value: Any = answered(key, version, code)
    for step in path:
        value = value[step]
    assert value == (expected[0] if expected else code)


def test_partition_level_errors_are_kafkas_per_partition_ones():
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER in PARTITION_LEVEL
    assert ErrorCode.COORDINATOR_LOAD_IN_PROGRESS not in PARTITION_LEVEL
