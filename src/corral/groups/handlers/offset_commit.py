"""The OffsetCommit API on the wire. What the network thread's commit path did not take
(rust/short_paths/commit_path.rs): authorized, checked per partition in the core, written by the
coordinator and answered once durable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed, group_read

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import OffsetCommitRequest, OffsetCommitResponse
    from corral.groups.storage.records import PartitionCommit

    # OffsetFetch's answer per topic: (partition, offset, leader epoch, metadata[, error]).
    FetchedPartition = PartitionCommit | tuple[int, int, int, str, ErrorCode]
    Fetched = Sequence[tuple[str, Sequence[FetchedPartition]]]


@handles(ApiKey.OFFSET_COMMIT, 2, 9)
def offset_commit(
    broker: Broker, request: Request[OffsetCommitRequest]
) -> bytes | Later | OffsetCommitResponse:
    # The steady-state write of every consumer: a short path (rust/short_paths/mod.rs), kept as the
    # Rust struct (an OffsetCommitRequest) and checked per partition in the core
    # (rust/short_paths/offset_commit.rs); the group-level rules are the coordinator's.
    # (OffsetCommit's short path gives this type: no check on the hot path.)
    commit: _core.OffsetCommitRequest = request.typed  # type: ignore[assignment]
    group_id, retention = commit.group_id, commit.retention_time_ms
    unauthorized: set[str] = set()
    if broker.authorizer is not None:
        if not group_read(broker, request, group_id):
            return _every_partition(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = commit.topic_names
        allowed = filter_allowed(broker, request, AclOperation.READ, TOPIC, names)
        unauthorized = set(names) - allowed
        # The connection's next commits to these may be the network thread's (commit_path.rs).
        broker.sessions.authorize_topics(request.connection, sorted(allowed))
    offsets = broker.groups.offsets
    commit_ms = wall_ms()
    # v2-4 may set a retention; -1 (and every later version) means offsets.retention.minutes.
    expire_ms = commit_ms + retention if retention >= 0 else -1
    partition_counts, topic_ids = {}, {}
    for name in commit.topic_names:
        topic = broker.topics.get(name) if name not in unauthorized else None
        partition_counts[name] = topic.partitions if topic is not None else 0
        if topic is not None:
            topic_ids[name] = topic.id.bytes

    def committed() -> list[tuple[bytes, int]]:
        # What reaches Kafka's per-partition validator: the partitions of known topics the
        # principal may READ, metadata within the limit (asked for only on an older epoch).
        candidates, _ = commit.split(partition_counts, ErrorCode.NONE, offsets.metadata_max_bytes)
        return [(topic_ids[name], p) for name, ps in candidates for p, *_ in ps]

    if not group_id:
        group_error = ErrorCode.INVALID_GROUP_ID
    else:
        group_error = offsets.commit_error(
            group_id,
            commit.member_id,
            commit.group_instance_id,
            commit.generation_id_or_member_epoch,
            request.api_version,
            committed,
        )
    if group_error and group_id:
        group = offsets.groups.get(group_id)
        broker.groups.events.commit_rejected(group_id, group and group.type, group_error)
    accepted, answer = commit.split(partition_counts, group_error, offsets.metadata_max_bytes)
    frame = _with_topic_errors(request, answer, unauthorized) if unauthorized else answer.frame
    if not accepted:
        return frame()
    # Durable first (one batch, group-committed fsync), then visible and acknowledged.
    return offsets.commit(group_id, accepted, commit_ms, expire_ms).map(frame)


def _every_partition(
    request: Request[OffsetCommitRequest], code: ErrorCode
) -> OffsetCommitResponse:
    """OffsetCommitRequest.getErrorResponse: `code` on every partition."""
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code}
                    for p in t["partitions"]
                ],
            }
            for t in request.body["topics"]
        ]
    }


def _with_topic_errors(
    request: Request[OffsetCommitRequest],
    answer: _core.OffsetCommitAnswer,
    unauthorized: set[str],
) -> Callable[..., bytes]:
    """The answer's frame with TOPIC_AUTHORIZATION_FAILED on the partitions of the topics the
    principal may not READ (which `split` saw as unknown, so that none of them was accepted)."""

    def frame(write_error: int = 0) -> bytes:
        _, body = _core.decode_response(
            ApiKey.OFFSET_COMMIT, request.api_version, answer.frame(write_error)[4:]
        )
        for topic in body["topics"]:
            if topic["name"] in unauthorized:
                for partition in topic["partitions"]:
                    partition["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return request.respond(body)

    return frame
