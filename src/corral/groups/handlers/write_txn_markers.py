"""The WriteTxnMarkers API on the wire (v1; the broker-to-broker request a transaction coordinator
sends when a transaction ends), as KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION (or
ALTER) on the cluster; per partition one COMMIT or ABORT control batch. A `__consumer_offsets`
partition goes to the group coordinator (`complete_transaction`: the producer's pending offsets
there are committed or dropped), any other to the log store. Answered once every marker is
durable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.storage.placement import OFFSETS_TOPIC
from corral.later import Later, first_error
from corral.network.apis import ApiKey, handles
from corral.partitions.store import StorageError
from corral.security.acls import AclOperation
from corral.security.authorize import cluster_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.transactions.messages import (
        WritableTxnMarker,
        WritableTxnMarkerPartitionResult,
        WritableTxnMarkerResult,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )

# Kafka answers a group coordinator that cannot take the marker as a partition that moved.
_MOVED = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}


@handles(ApiKey.WRITE_TXN_MARKERS, 1, 1)
def write_txn_markers(
    broker: Broker, request: Request[WriteTxnMarkersRequest]
) -> WriteTxnMarkersResponse | Later:
    markers = request.body["markers"]
    if not (
        cluster_allowed(broker, request, AclOperation.CLUSTER_ACTION, log_denied=False)
        or cluster_allowed(broker, request, AclOperation.ALTER)
    ):
        return {
            "markers": [
                _every_partition(m, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for m in markers
            ]
        }
    results: list[WritableTxnMarkerResult] = []
    writes: list[Later] = []
    for marker in markers:
        result = _every_partition(marker, ErrorCode.NONE)
        results.append(result)
        for topic in result["topics"]:
            for partition in topic["partitions"]:
                written = _write(broker, marker, topic["name"], partition["partition_index"])

                def record(
                    error: ErrorCode, p: WritableTxnMarkerPartitionResult = partition
                ) -> None:
                    p["error_code"] = error

                writes.append(written.map(record))
    return first_error(writes).map(lambda _: {"markers": results})


def _write(broker: Broker, marker: WritableTxnMarker, name: str, partition: int) -> Later:
    """The marker in one partition: resolves to its error once durable."""
    pid, epoch = marker["producer_id"], marker["producer_epoch"]
    commit, coordinator_epoch = marker["transaction_result"], marker["coordinator_epoch"]
    topic = broker.topics.get(name)
    if topic is None or not 0 <= partition < topic.partitions:
        return Later.of(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if name == OFFSETS_TOPIC:
        done = broker.groups.complete_transaction(partition, pid, epoch, commit, coordinator_epoch)
        return done.map(lambda e: ErrorCode.NOT_LEADER_OR_FOLLOWER if e in _MOVED else e)
    try:
        result, needs_flush = broker.logs.write_marker(
            topic, partition, pid, epoch, commit, coordinator_epoch
        )
    except StorageError:
        return Later.of(ErrorCode.KAFKA_STORAGE_ERROR)
    if result.error_code or not needs_flush:
        return Later.of(ErrorCode(result.error_code))
    done = Later()
    broker.logs.after_flush(
        lambda error: done.resolve(ErrorCode.KAFKA_STORAGE_ERROR if error else ErrorCode.NONE)
    )
    return done


def _every_partition(marker: WritableTxnMarker, code: ErrorCode) -> WritableTxnMarkerResult:
    return {
        "producer_id": marker["producer_id"],
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p, "error_code": code} for p in t["partition_indexes"]
                ],
            }
            for t in marker["topics"]
        ],
    }
