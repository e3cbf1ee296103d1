"""The OffsetFetch API on the wire. A group's committed offsets (v8+: several groups), with the
member and epoch checks of v9+."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import GROUP, TOPIC, allowed, filter_allowed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import (
        OffsetFetchRequest,
        OffsetFetchResponse,
        OffsetFetchResponseGroup,
        OffsetFetchResponsePartition,
        OffsetFetchResponseTopic,
        OffsetFetchResponseTopics,
    )
    from corral.groups.storage.records import PartitionCommit

    # OffsetFetch's answer per topic: (partition, offset, leader epoch, metadata[, error]).
    FetchedPartition = PartitionCommit | tuple[int, int, int, str, ErrorCode]
    Fetched = Sequence[tuple[str, Sequence[FetchedPartition]]]


@handles(ApiKey.OFFSET_FETCH, 1, 9)
def offset_fetch(broker: Broker, request: Request[OffsetFetchRequest]) -> OffsetFetchResponse:
    body, version = request.body, request.api_version
    # v7+: partitions with offsets pending in a transaction answer UNSTABLE_OFFSET_COMMIT.
    stable = version >= 7 and body["require_stable"]
    if version >= 8:
        groups: list[OffsetFetchResponseGroup] = []
        for g in body["groups"]:
            topics = (
                None
                if g["topics"] is None
                else [(t["name"], t["partition_indexes"]) for t in g["topics"]]
            )
            member = (g["member_id"], g["member_epoch"]) if version >= 9 else (None, -1)
            error, fetched = _fetch_group(broker, request, g["group_id"], topics, stable, *member)
            groups.append(
                {
                    "group_id": g["group_id"],
                    "error_code": error,
                    "topics": _shape_group_fetched(fetched, version),
                }
            )
        return {"groups": groups}
    topics = (
        None
        if body["topics"] is None
        else [(t["name"], t["partition_indexes"]) for t in body["topics"]]
    )
    error, fetched = _fetch_group(broker, request, body["group_id"], topics, stable)
    if error == ErrorCode.GROUP_AUTHORIZATION_FAILED and version < 2 and topics is not None:
        # v1 has no group error: Kafka's groupError puts it on every partition asked for.
        fetched = [(name, [(p, -1, -1, "", error) for p in ps]) for name, ps in topics]
    response: OffsetFetchResponse = {"topics": _shape_fetched(fetched, version)}
    if version >= 2:
        response["error_code"] = error
    return response


def _fetch_group(
    broker: Broker,
    request: Request[OffsetFetchRequest],
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    require_stable: bool = False,
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
        return ErrorCode.NONE, offsets.fetch(group_id, topics, require_stable)
    if topics is None:
        fetched = offsets.fetch(group_id, None, require_stable)
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
        group_id, [(t, ps) for t, ps in topics if t in visible], require_stable
    ) + refused


def _shape_fetched(fetched: Fetched, version: int) -> list[OffsetFetchResponseTopic]:
    return [{"name": t, "partitions": _shape_partitions(ps, version)} for t, ps in fetched]


def _shape_group_fetched(fetched: Fetched, version: int) -> list[OffsetFetchResponseTopics]:
    """v8+: the same, in the per-group answer's types."""
    return [{"name": t, "partitions": _shape_partitions(ps, version)} for t, ps in fetched]


def _shape_partitions(
    partitions: Sequence[FetchedPartition], version: int
) -> list[OffsetFetchResponsePartition]:
    with_epoch = version >= 5
    return [
        {
            "partition_index": p,
            "committed_offset": offset,
            "committed_leader_epoch": epoch if with_epoch else -1,
            "metadata": metadata,
            "error_code": error[0] if error else ErrorCode.NONE,
        }
        for p, offset, epoch, metadata, *error in partitions
    ]
