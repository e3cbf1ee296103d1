"""The offset APIs on the wire: OffsetCommit, OffsetFetch, OffsetDelete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.later import Later
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import GROUP, TOPIC, allowed, filter_allowed, group_read

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.storage.records import PartitionCommit

    # OffsetFetch's answer per topic: (partition, offset, leader epoch, metadata[, error]).
    FetchedPartition = PartitionCommit | tuple[int, int, int, str, ErrorCode]
    Fetched = Sequence[tuple[str, Sequence[FetchedPartition]]]

# --------------------------------------------------------------------------------- OffsetCommit


@handles(ApiKey.OFFSET_COMMIT, 2, 9)
def offset_commit(broker: Broker, request: Request) -> bytes | Later | dict[str, Any]:
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


def _every_partition(request: Request, code: ErrorCode) -> dict[str, Any]:
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
    request: Request, answer: _core.OffsetCommitAnswer, unauthorized: set[str]
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


# ---------------------------------------------------------------------------------- OffsetFetch


@handles(ApiKey.OFFSET_FETCH, 1, 9)
def offset_fetch(broker: Broker, request: Request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 8:
        groups = []
        for g in body["groups"]:
            topics = (
                None
                if g["topics"] is None
                else [(t["name"], t["partition_indexes"]) for t in g["topics"]]
            )
            member = (g["member_id"], g["member_epoch"]) if version >= 9 else (None, -1)
            error, fetched = _fetch_group(broker, request, g["group_id"], topics, *member)
            groups.append(
                {
                    "group_id": g["group_id"],
                    "error_code": error,
                    "topics": _shape_fetched(fetched, version),
                }
            )
        return {"groups": groups}
    topics = (
        None
        if body["topics"] is None
        else [(t["name"], t["partition_indexes"]) for t in body["topics"]]
    )
    error, fetched = _fetch_group(broker, request, body["group_id"], topics)
    if error == ErrorCode.GROUP_AUTHORIZATION_FAILED and version < 2 and topics is not None:
        # v1 has no group error: Kafka's groupError puts it on every partition asked for.
        fetched = [(name, [(p, -1, -1, "", error) for p in ps]) for name, ps in topics]
    response: dict[str, Any] = {"topics": _shape_fetched(fetched, version)}
    if version >= 2:
        response["error_code"] = error
    return response


def _fetch_group(
    broker: Broker,
    request: Request,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> tuple[ErrorCode, Fetched]:
    """(group error, [(topic, [(partition, offset, epoch, metadata[, error])])]). As Kafka, the
    group needs DESCRIBE, and topics the principal may not DESCRIBE are left out of a fetch of
    everything, or answered TOPIC_AUTHORIZATION_FAILED (after the others) when asked for."""
    if not allowed(broker, request, AclOperation.DESCRIBE, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, []
    offsets = broker.groups.offsets
    error = offsets.fetch_error(group_id, member_id, member_epoch)
    if error:
        return error, []
    if broker.authorizer is None:
        return ErrorCode.NONE, offsets.fetch(group_id, topics)
    if topics is None:
        fetched = offsets.fetch(group_id, None)
        visible = filter_allowed(
            broker, request, AclOperation.DESCRIBE, TOPIC, (t for t, _ in fetched)
        )
        return ErrorCode.NONE, [(t, ps) for t, ps in fetched if t in visible]
    visible = filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, (t for t, _ in topics))
    refused = [
        (t, [(p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in ps])
        for t, ps in topics
        if t not in visible
    ]
    return ErrorCode.NONE, offsets.fetch(
        group_id, [(t, ps) for t, ps in topics if t in visible]
    ) + refused


def _shape_fetched(fetched: Fetched, version: int) -> list[dict[str, Any]]:
    with_epoch = version >= 5
    return [
        {
            "name": topic,
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": offset,
                    "committed_leader_epoch": epoch if with_epoch else -1,
                    "metadata": metadata,
                    "error_code": error[0] if error else ErrorCode.NONE,
                }
                for p, offset, epoch, metadata, *error in partitions
            ],
        }
        for topic, partitions in fetched
    ]


# --------------------------------------------------------------------------------- OffsetDelete


@handles(ApiKey.OFFSET_DELETE, 0, 0)
def offset_delete(broker: Broker, request: Request) -> dict[str, Any] | Later:
    body = request.body
    offsets = broker.groups.offsets
    if not allowed(broker, request, AclOperation.DELETE, GROUP, body["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []}
    if not body["group_id"]:
        return {"error_code": ErrorCode.INVALID_GROUP_ID, "topics": []}
    readable = filter_allowed(
        broker, request, AclOperation.READ, TOPIC, (t["name"] for t in body["topics"])
    )
    known_topics, unknown, refused = [], [], []
    for t in body["topics"]:
        partitions = [p["partition_index"] for p in t["partitions"]]
        if t["name"] not in readable:
            refused.append((t["name"], partitions))
            continue
        topic = broker.topics.get(t["name"])
        if topic is None:
            unknown.append((t["name"], partitions))
            continue
        valid = [p for p in partitions if 0 <= p < topic.partitions]
        if len(valid) != len(partitions):
            unknown.append((t["name"], [p for p in partitions if p not in valid]))
        known_topics.append((t["name"], valid))
    error, deleted, written = offsets.delete(body["group_id"], known_topics)
    if error:
        return {"error_code": error, "topics": []}
    return written.map(
        lambda error: (
            {"error_code": error, "topics": []}
            if error
            else _shape_offset_delete(deleted, unknown, refused)
        )
    )


def _shape_offset_delete(
    deleted: list[tuple[str, list[tuple[int, ErrorCode]]]],
    unknown: list[tuple[str, list[int]]],
    refused: list[tuple[str, list[int]]],
) -> dict[str, Any]:
    out: dict[str, list[dict[str, Any]]] = {}
    for topic, parts in deleted:
        out.setdefault(topic, []).extend(
            {"partition_index": p, "error_code": code} for p, code in parts
        )
    for topics, code in (
        (unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ):
        for topic, missing in topics:
            out.setdefault(topic, []).extend(
                {"partition_index": p, "error_code": code} for p in missing
            )
    return {
        "error_code": ErrorCode.NONE,
        "topics": [{"name": t, "partitions": parts} for t, parts in out.items()],
    }
