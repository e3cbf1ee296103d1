"""DescribeProducers: the active producers of partitions (UnifiedLog.activeProducers), what
`kafka-transactions describe-producers` shows and what finds a hanging transaction: each
producer's id, epoch, last sequence and timestamp, coordinator epoch, and the first offset of its
open transaction (-1 when none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.store import StorageError
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.partitions.messages import (
        DescribeProducersRequest,
        DescribeProducersResponse,
        PartitionResponse,
        TopicResponse,
    )


@handles(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
def describe_producers(
    broker: Broker, request: Request[DescribeProducersRequest]
) -> DescribeProducersResponse:
    topics = request.body["topics"]
    readable = filter_allowed(
        broker, request, AclOperation.READ, TOPIC, (t["name"] for t in topics)
    )
    answers: list[TopicResponse] = []
    for t in topics:
        name = t["name"]
        topic = broker.topics.get(name)
        partitions: list[PartitionResponse] = []
        for index in t["partition_indexes"]:
            entry: PartitionResponse = {"partition_index": index, "active_producers": []}
            partitions.append(entry)
            if name not in readable:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= index < topic.partitions:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not broker.leads(topic, index):
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                try:
                    producers = broker.logs.producers(topic, index)
                except StorageError as e:
                    entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                    entry["error_message"] = str(e)
                    continue
                entry["active_producers"] = [
                    {
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "last_sequence": seq,
                        "last_timestamp": ts,
                        "coordinator_epoch": coordinator_epoch,
                        "current_txn_start_offset": txn_start,
                    }
                    for pid, epoch, seq, ts, coordinator_epoch, txn_start in producers
                ]
        answers.append({"name": name, "partitions": partitions})
    return {"topics": answers}
