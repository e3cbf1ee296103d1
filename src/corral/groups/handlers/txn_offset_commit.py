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
from corral.transactions.verification import verify_write

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
        # KIP-890 first (Kafka's runtime verifies before its write operation validates): the
        # transaction must have added the group's offsets partition (AddOffsetsToTxn).
        offsets_topic = broker.topics.get(OFFSETS_TOPIC)
        assert offsets_topic is not None
        group_error = _verified(
            verify_write(
                broker,
                body["transactional_id"],
                body["producer_id"],
                body["producer_epoch"],
                offsets_topic,
                broker.groups.writer.partition_of(group_id),
                abortable_error=version >= 4,
            )
        ) or offsets.txn_commit_error(
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


def _verified(error: ErrorCode) -> ErrorCode:
    """A Produce's verification answer as a coordinator write's (CoordinatorOperationExceptionHelper:
    NOT_ENOUGH_REPLICAS becomes COORDINATOR_NOT_AVAILABLE)."""
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if error == ErrorCode.NOT_ENOUGH_REPLICAS else error


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
