"""The transaction APIs on the wire: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions and ListTransactions (InitProducerId is in partitions/producer_ids.py,
FindCoordinator in groups/handlers/find_coordinator.py). Authorization and error versions as
KafkaApis: WRITE on the transactional id, and PRODUCER_FENCED answered as INVALID_PRODUCER_EPOCH
to versions older than KIP-588's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import GROUP, TOPIC, TRANSACTIONAL_ID, allowed, cluster_allowed
from corral.transactions.coordinator import OFFSETS_TOPIC
from corral.transactions.state import STATE_NAMES

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.transactions.messages import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        AddPartitionsToTxnResult,
        AddPartitionsToTxnTopic,
        AddPartitionsToTxnTopicResult,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        DescribeTransactionsResponseTransactionState,
        EndTxnRequest,
        EndTxnResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )

# The first versions that know PRODUCER_FENCED (KIP-588); older ones get INVALID_PRODUCER_EPOCH.
FENCED_FROM = {ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2}


def fenced_for(error: ErrorCode, key: ApiKey, version: int) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < FENCED_FROM[key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _topic_results(
    topics: list[AddPartitionsToTxnTopic], codes: Mapping[tuple[str, int], int]
) -> list[AddPartitionsToTxnTopicResult]:
    return [
        {
            "name": t["name"],
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": codes[(t["name"], p)]}
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]


def _check_partitions(
    broker: Broker,
    request: Request[AddPartitionsToTxnRequest],
    topics: list[AddPartitionsToTxnTopic],
) -> dict[tuple[str, int], int]:
    """Per partition: TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION, or NONE."""
    codes: dict[tuple[str, int], int] = {}
    for t in topics:
        name = t["name"]
        topic = broker.topics.get(name)
        writable = (topic is not None and topic.internal) or allowed(
            broker, request, AclOperation.WRITE, TOPIC, name
        )
        for p in t["partitions"]:
            if not writable:
                codes[(name, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= p < topic.partitions or not broker.leads(topic, p):
                codes[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                codes[(name, p)] = ErrorCode.NONE
    return codes


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def add_partitions_to_txn(
    broker: Broker, request: Request[AddPartitionsToTxnRequest]
) -> AddPartitionsToTxnResponse:
    body, version = request.body, request.api_version
    txns = broker.transactions
    if txns is None:  # cluster mode: no transaction coordinator (FindCoordinator refuses)
        return {"error_code": ErrorCode.NOT_COORDINATOR}
    if version >= 4:
        # The broker-to-coordinator form (KIP-890): verify-only or the implicit add.
        if not cluster_allowed(broker, request, AclOperation.CLUSTER_ACTION):
            return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
        results: list[AddPartitionsToTxnResult] = []
        for txn in body["transactions"]:
            tid = txn["transactional_id"]
            wanted = {(t["name"], p) for t in txn["topics"] for p in t["partitions"]}
            codes: dict[tuple[str, int], int]
            if txn["verify_only"]:
                codes = {
                    tp: txns.verify(tid, txn["producer_id"], txn["producer_epoch"], tp)
                    for tp in wanted
                }
            else:
                error = await txns.add_partitions(
                    tid, txn["producer_id"], txn["producer_epoch"], wanted
                )
                codes = dict.fromkeys(wanted, error)
            results.append(
                {"transactional_id": tid, "topic_results": _topic_results(txn["topics"], codes)}
            )
        return {"error_code": ErrorCode.NONE, "results_by_transaction": results}
    tid = body["v3_and_below_transactional_id"]
    topics = body["v3_and_below_topics"]
    if not allowed(broker, request, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        refused = {
            (t["name"], p): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            for t in topics
            for p in t["partitions"]
        }
        return {"results_by_topic_v3_and_below": _topic_results(topics, refused)}
    codes = _check_partitions(broker, request, topics)
    if any(codes.values()):
        codes = {tp: code or ErrorCode.OPERATION_NOT_ATTEMPTED for tp, code in codes.items()}
        return {"results_by_topic_v3_and_below": _topic_results(topics, codes)}
    error = await txns.add_partitions(
        tid,
        body["v3_and_below_producer_id"],
        body["v3_and_below_producer_epoch"],
        set(codes),
    )
    error = fenced_for(error, ApiKey.ADD_PARTITIONS_TO_TXN, version)
    return {"results_by_topic_v3_and_below": _topic_results(topics, dict.fromkeys(codes, error))}


@handles(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def add_offsets_to_txn(
    broker: Broker, request: Request[AddOffsetsToTxnRequest]
) -> AddOffsetsToTxnResponse:
    body, version = request.body, request.api_version
    tid, group = body["transactional_id"], body["group_id"]
    if not allowed(broker, request, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not allowed(broker, request, AclOperation.READ, GROUP, group):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if broker.transactions is None:
        return {"error_code": ErrorCode.NOT_COORDINATOR}
    partition = broker.groups.writer.partition_of(group)
    error = await broker.transactions.add_partitions(
        tid, body["producer_id"], body["producer_epoch"], {(OFFSETS_TOPIC, partition)}
    )
    return {"error_code": fenced_for(error, ApiKey.ADD_OFFSETS_TO_TXN, version)}


@handles(ApiKey.END_TXN, 0, 4)
async def end_txn(broker: Broker, request: Request[EndTxnRequest]) -> EndTxnResponse:
    body, version = request.body, request.api_version
    tid = body["transactional_id"]
    if not allowed(broker, request, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if broker.transactions is None:
        return {"error_code": ErrorCode.NOT_COORDINATOR}
    error = await broker.transactions.end_transaction(
        tid, body["producer_id"], body["producer_epoch"], body["committed"]
    )
    return {"error_code": fenced_for(error, ApiKey.END_TXN, version)}


@handles(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
def describe_transactions(
    broker: Broker, request: Request[DescribeTransactionsRequest]
) -> DescribeTransactionsResponse:
    states: list[DescribeTransactionsResponseTransactionState] = []
    for tid in request.body["transactional_ids"]:
        entry: DescribeTransactionsResponseTransactionState = {
            "transactional_id": tid,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        states.append(entry)
        if not allowed(broker, request, AclOperation.DESCRIBE, TRANSACTIONAL_ID, tid):
            entry["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            continue
        meta = (
            ErrorCode.NOT_COORDINATOR
            if broker.transactions is None
            else broker.transactions.describe(tid)
        )
        if isinstance(meta, ErrorCode):
            entry["error_code"] = meta
            continue
        by_topic: dict[str, list[int]] = {}
        for name, partition in sorted(meta.partitions):
            if allowed(broker, request, AclOperation.DESCRIBE, TOPIC, name, log_denied=False):
                by_topic.setdefault(name, []).append(partition)
        entry["error_code"] = ErrorCode.NONE
        entry["transaction_state"] = meta.state.kafka_name
        entry["transaction_timeout_ms"] = meta.timeout_ms
        entry["transaction_start_time_ms"] = meta.start_ms
        entry["producer_id"] = meta.producer_id
        entry["producer_epoch"] = meta.producer_epoch
        entry["topics"] = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
    return {"transaction_states": states}


@handles(ApiKey.LIST_TRANSACTIONS, 0, 2)
def list_transactions(
    broker: Broker, request: Request[ListTransactionsRequest]
) -> ListTransactionsResponse:
    body, version = request.body, request.api_version
    txns = broker.transactions
    if txns is None:
        return {"error_code": ErrorCode.NOT_COORDINATOR}
    if not txns.loaded:
        return {"error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    unknown = [s for s in body["state_filters"] if s not in STATE_NAMES]
    states = {STATE_NAMES[s] for s in body["state_filters"] if s in STATE_NAMES}
    pattern = None
    if version >= 2 and body["transactional_id_pattern"]:
        try:
            pattern = re.compile(body["transactional_id_pattern"])
        except re.error:
            return {"error_code": ErrorCode.INVALID_REGULAR_EXPRESSION}
    listed = txns.listed(
        states,
        set(body["producer_id_filters"]),
        body["duration_filter"] if version >= 1 else -1,
        pattern,
    )
    return {
        "error_code": ErrorCode.NONE,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {
                "transactional_id": m.transactional_id,
                "producer_id": m.producer_id,
                "transaction_state": m.state.kafka_name,
            }
            for m in listed
            if allowed(
                broker,
                request,
                AclOperation.DESCRIBE,
                TRANSACTIONAL_ID,
                m.transactional_id,
                log_denied=False,
            )
        ],
    }
