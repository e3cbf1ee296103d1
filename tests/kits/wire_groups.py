"""Classic group requests as raw frames (JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
OffsetFetch) on a `rawwire.RawClient`, at the versions a test asks for."""

from __future__ import annotations

import struct

from rawwire import RawClient

from corral.errors import ErrorCode
from corral.network.apis import ApiKey


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: topics and empty user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join_body(
    group: str,
    member_id: str = "",
    *,
    session_ms: int = 6000,
    protocols=None,
    instance_id: str | None = None,
    rebalance_ms: int = 5000,
) -> dict:
    return {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "protocol_type": "consumer",
        "protocols": protocols or [{"name": "range", "metadata": subscription("t")}],
    }


def join(client: RawClient, group: str, version: int = 9, **kw) -> dict:
    """A full KIP-394 join: the first JoinGroup gets MEMBER_ID_REQUIRED and the id to use."""
    first = client.call(ApiKey.JOIN_GROUP, version, join_body(group, **kw))
    if version >= 4 and first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
        assert first["member_id"]
        return client.call(ApiKey.JOIN_GROUP, version, join_body(group, first["member_id"], **kw))
    return first


def sync(
    client: RawClient, group: str, generation: int, member_id: str, assignments=(), version: int = 5
):
    return client.call(
        ApiKey.SYNC_GROUP,
        version,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member_id,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments],
        },
    )


def heartbeat(client: RawClient, group: str, generation: int, member_id: str, version: int = 4):
    return client.call(
        ApiKey.HEARTBEAT,
        version,
        {"group_id": group, "generation_id": generation, "member_id": member_id},
    )["error_code"]


def commit(
    client: RawClient,
    group: str,
    generation: int,
    member_id: str,
    offsets,
    version: int = 8,
    metadata: str = "",
):
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_metadata": metadata}
                ],
            }
            for t, p, o in offsets
        ],
    }
    response = client.call(ApiKey.OFFSET_COMMIT, version, body)
    return [p["error_code"] for t in response["topics"] for p in t["partitions"]]


def fetch(client: RawClient, group: str, topic: str, partitions, version: int = 7):
    response = client.call(
        ApiKey.OFFSET_FETCH,
        version,
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}]},
    )
    return [
        (p["partition_index"], p["committed_offset"], p["metadata"])
        for t in response["topics"]
        for p in t["partitions"]
    ]
