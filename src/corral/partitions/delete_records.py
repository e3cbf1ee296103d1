"""DeleteRecords (kafka-delete-records): the log start offset moves up, durably, and whole segments
below it are deleted. With one replica, the low watermark answered is the new log start offset,
reached before the answer (no replica to wait for)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.store import PartitionLogs, StorageError, storage_warning
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed
from corral.topics.registry import Topic

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.partitions.messages import DeleteRecordsRequest, DeleteRecordsResponse

# DeleteRecordsResponse.INVALID_LOW_WATERMARK. (An offset of -1 in a request, Kafka's
# HIGH_WATERMARK, is the log store's to resolve.)
INVALID_LOW_WATERMARK = -1


@handles(ApiKey.DELETE_RECORDS, 0, 2)
async def delete_records(
    broker: Broker, request: Request[DeleteRecordsRequest]
) -> DeleteRecordsResponse:
    # Kafka keys the request by partition: a partition named twice is deleted once, up to the
    # offset named last, and answered once.
    wanted: dict[str, dict[int, int]] = {}
    for topic_req in request.body["topics"]:
        partitions = wanted.setdefault(topic_req["name"], {})
        for part in topic_req["partitions"]:
            partitions[part["partition_index"]] = part["offset"]
    answers: dict[str, dict[int, tuple[int, int]]] = {}
    todo: list[tuple[Topic, int, int]] = []
    deletable = filter_allowed(broker, request, AclOperation.DELETE, TOPIC, wanted)
    for name, partitions in wanted.items():
        topic = broker.topics.get(name)
        answers[name] = {}
        for index, offset in partitions.items():
            if name not in deletable:
                answers[name][index] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, INVALID_LOW_WATERMARK)
            elif topic is None or not 0 <= index < topic.partitions:
                answers[name][index] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, INVALID_LOW_WATERMARK)
            elif not broker.leads(topic, index):
                answers[name][index] = (ErrorCode.NOT_LEADER_OR_FOLLOWER, INVALID_LOW_WATERMARK)
            elif topic.internal:
                # ReplicaManager.deleteRecordsOnLocalLog: "Cannot delete records of internal topic".
                answers[name][index] = (ErrorCode.INVALID_TOPIC_EXCEPTION, INVALID_LOW_WATERMARK)
            else:
                try:
                    broker.logs.open(topic, index)
                except StorageError as e:
                    answers[name][index] = _storage_error(topic, index, e)
                    continue
                todo.append((topic, index, offset))
    # Each partition's deletion fsyncs: in a worker thread, off the event loop.
    done = await trio.to_thread.run_sync(_delete, broker.logs, todo)
    for (topic, index, _), outcome in zip(todo, done):
        if isinstance(outcome, StorageError):
            answer = _storage_error(topic, index, outcome)
        elif isinstance(outcome, KeyError):  # the topic was deleted meanwhile
            answer = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, INVALID_LOW_WATERMARK)
        elif outcome is None:
            answer = (ErrorCode.OFFSET_OUT_OF_RANGE, INVALID_LOW_WATERMARK)
        else:
            answer = (ErrorCode.NONE, outcome)
        answers[topic.name][index] = answer
    return {
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": index, "error_code": error, "low_watermark": low}
                    for index, (error, low) in partitions.items()
                ],
            }
            for name, partitions in answers.items()
        ]
    }


def _storage_error(topic: Topic, index: int, error: StorageError) -> tuple[int, int]:
    storage_warning(
        "delete_records",
        "DeleteRecords on %s-%d answered KAFKA_STORAGE_ERROR: %s",
        topic.name,
        index,
        error,
    )
    return ErrorCode.KAFKA_STORAGE_ERROR, INVALID_LOW_WATERMARK


def _delete(
    logs: PartitionLogs, todo: list[tuple[Topic, int, int]]
) -> list[int | None | Exception]:
    """Per (topic, partition, offset), each opened before: the new log start offset, None when
    the offset is out of range, or the StorageError or KeyError (topic gone) it raised."""
    out: list[int | None | Exception] = []
    for topic, index, offset in todo:
        try:
            out.append(logs.delete_records(topic, index, offset))
        except (StorageError, KeyError) as e:
            out.append(e)
    return out
