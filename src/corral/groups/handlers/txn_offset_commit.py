"""The TxnOffsetCommit API on the wire (v0-4: the versions of transaction version 1; v5+ adds the
partition to the transaction implicitly, TV2, which corral does not advertise). Authorized as
KafkaApis.handleTxnOffsetCommitRequest, validated as OffsetMetadataManager
.validateTransactionalOffsetCommit, written as a transactional batch whose offsets stay pending
until the producer's marker (groups/txn_offsets.py); answered once durable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.storage.placement import OFFSETS_TOPIC
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, TRANSACTIONAL_ID, allowed, filter_allowed, group_read

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
        TxnOffsetCommitResponseTopic,
    )
    from corral.groups.storage.records import PartitionCommit
    from corral.later import Later


@handles(ApiKey.TXN_OFFSET_COMMIT, 0, 4)
def txn_offset_commit(
    broker: Broker, request: Request[TxnOffsetCommitRequest]
) -> TxnOffsetCommitResponse | Later:
    body, version = request.body, request.api_version
    group_id = body["group_id"]
    if not allowed(broker, request, AclOperation.WRITE, TRANSACTIONAL_ID, body["transactional_id"]):
        return _every_partition(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not group_read(broker, request, group_id):
        return _every_partition(body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = filter_allowed(
        broker, request, AclOperation.READ, TOPIC, (t["name"] for t in body["topics"])
    )
    # Per partition: its error, or None while it may be written.
    verdicts: list[tuple[str, list[tuple[int, ErrorCode | None]]]] = []
    for t in body["topics"]:
        topic = broker.topics.get(t["name"]) if t["name"] in readable else None
        refused = (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if t["name"] not in readable
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        verdicts.append(
            (
                t["name"],
                [
                    (
                        p["partition_index"],
                        None
                        if topic is not None and 0 <= p["partition_index"] < topic.partitions
                        else refused,
                    )
                    for p in t["partitions"]
                ],
            )
        )
    offsets = broker.groups.offsets
    if not group_id:
        group_error = ErrorCode.INVALID_GROUP_ID
    else:
        group_error = _verify(broker, body) or offsets.txn_commit_error(
            group_id,
            body["member_id"] if version >= 3 else "",
            body["group_instance_id"] if version >= 3 else None,
            body["generation_id"] if version >= 3 else -1,
            version,
            lambda: _topic_ids(broker, verdicts),
        )
    accepted: list[tuple[str, list[PartitionCommit]]] = []
    for t, (name, partitions) in zip(body["topics"], verdicts):
        commits: list[PartitionCommit] = []
        for i, (p, (index, error)) in enumerate(zip(t["partitions"], partitions)):
            if error is not None:
                continue
            if group_error:
                partitions[i] = (index, group_error)
                continue
            metadata = p["committed_metadata"] or ""
            if len(metadata) > offsets.metadata_max_bytes:  # Kafka counts characters
                partitions[i] = (index, ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            epoch = p["committed_leader_epoch"] if version >= 2 else -1
            commits.append((index, p["committed_offset"], epoch, metadata))
        if commits:
            accepted.append((name, commits))

    def answer(write_error: ErrorCode = ErrorCode.NONE) -> TxnOffsetCommitResponse:
        return {"topics": _shape(verdicts, write_error)}

    if not accepted:
        return answer()
    written = offsets.txn_commit(
        group_id, body["producer_id"], body["producer_epoch"], accepted, wall_ms()
    )
    return written.map(answer)


def _verify(broker: Broker, body: TxnOffsetCommitRequest) -> ErrorCode:
    """KIP-890's verification (CoordinatorPartitionWriter.maybeStartTransactionVerification):
    the group's `__consumer_offsets` partition must be in the producer's ongoing transaction
    (AddOffsetsToTxn added it) unless the producer already wrote there in this transaction. As
    Kafka maps the answers for a coordinator's write, before the group is looked at."""
    if (
        broker.transactions is None
        or not broker.settings["transaction.partition.verification.enable"]
    ):
        return ErrorCode.NONE
    pid, epoch = body["producer_id"], body["producer_epoch"]
    writer = broker.groups.writer
    partition = writer.partition_of(body["group_id"])
    if writer.in_transaction(partition, pid, epoch):
        return ErrorCode.NONE
    error = broker.transactions.verify(
        body["transactional_id"], pid, epoch, (OFFSETS_TOPIC, partition)
    )
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE:
        return ErrorCode.INVALID_TXN_STATE  # the versions served here predate it
    if error in _RETRIABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE  # via NOT_ENOUGH_REPLICAS, as Kafka
    return error


# The transaction coordinator's answers a client retries after.
_RETRIABLE = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


def _topic_ids(
    broker: Broker, verdicts: list[tuple[str, list[tuple[int, ErrorCode | None]]]]
) -> list[tuple[bytes, int]]:
    """The (topic id, partition) pairs a consumer group's older-epoch check looks at."""
    out: list[tuple[bytes, int]] = []
    for name, partitions in verdicts:
        topic = broker.topics.get(name)
        if topic is not None:
            out.extend((topic.id.bytes, p) for p, error in partitions if error is None)
    return out


def _shape(
    verdicts: list[tuple[str, list[tuple[int, ErrorCode | None]]]], write_error: ErrorCode
) -> list[TxnOffsetCommitResponseTopic]:
    # A partition still without an error was written: it answers the write's outcome.
    return [
        {
            "name": name,
            "partitions": [
                {"partition_index": p, "error_code": write_error if error is None else error}
                for p, error in partitions
            ],
        }
        for name, partitions in verdicts
    ]


def _every_partition(body: TxnOffsetCommitRequest, code: ErrorCode) -> TxnOffsetCommitResponse:
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code}
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
    }
