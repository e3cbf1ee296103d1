"""Raw-frame helpers for share groups (KIP-932): heartbeats, share fetches and acknowledgements,
group configs, and the topic id lookups they need."""

from __future__ import annotations

import time
import uuid

from rawwire import RawClient

from corral.network.apis import ApiKey

ACCEPT, RELEASE, REJECT = 1, 2, 3


def new_member_id() -> str:
    return str(uuid.uuid4())[:22]


def topic_id(c: RawClient, name: str) -> bytes:
    md = c.call(
        ApiKey.METADATA,
        12,
        {
            "topics": [{"name": name, "topic_id": bytes(16)}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    return md["topics"][0]["topic_id"]


def heartbeat(
    c: RawClient, group: str, member: str, epoch: int, topics: list[str] | None = None
) -> dict:
    return c.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rack_id": None,
            "subscribed_topic_names": topics,
        },
    )


def join(c: RawClient, group: str, member: str, topics: list[str], timeout: float = 15) -> dict:
    """Heartbeats from epoch 0 until the member holds an assignment: the last answer."""
    answer = heartbeat(c, group, member, 0, topics)
    assert answer["error_code"] == 0, answer
    deadline = time.monotonic() + timeout
    while not (answer.get("assignment") or {}).get("topic_partitions"):
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
        answer = heartbeat(c, group, member, answer["member_epoch"])
        assert answer["error_code"] == 0, answer
    return answer


def set_group_configs(c: RawClient, group: str, **configs: str) -> None:
    body = {
        "resources": [
            {
                "resource_type": 32,  # GROUP
                "resource_name": group,
                "configs": [
                    {"name": k.replace("_", "."), "config_operation": 0, "value": v}
                    for k, v in configs.items()
                ],
            }
        ],
        "validate_only": False,
    }
    result = c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]
    assert result["error_code"] == 0, result


def share_fetch(
    c: RawClient,
    group: str,
    member: str,
    epoch: int,
    partitions: dict[bytes, list[int]],
    acks: dict[tuple[bytes, int], list[tuple[int, int, list[int]]]] | None = None,
    max_records: int = 500,
    max_wait_ms: int = 500,
    version: int = 1,
    forgotten: dict[bytes, list[int]] | None = None,
) -> dict:
    acks = acks or {}
    keys = {(t, p) for t, ps in partitions.items() for p in ps} | set(acks)
    topics: dict[bytes, list[dict]] = {}
    for t, p in sorted(keys):
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "partition_max_bytes": 0,
                "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                    for f, last, types in acks.get((t, p), [])
                ],
            }
        )
    body = {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": max_records,
        "batch_size": max_records,
        "share_acquire_mode": 0,
        "is_renew_ack": False,
        "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [
            {"topic_id": t, "partitions": ps} for t, ps in (forgotten or {}).items()
        ],
    }
    return c.call(ApiKey.SHARE_FETCH, version, body)


def share_ack(
    c: RawClient,
    group: str,
    member: str,
    epoch: int,
    acks: dict[tuple[bytes, int], list[tuple[int, int, list[int]]]],
    version: int = 1,
) -> dict:
    topics: dict[bytes, list[dict]] = {}
    for (t, p), batches in sorted(acks.items()):
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                    for f, last, types in batches
                ],
            }
        )
    body = {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "is_renew_ack": False,
        "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
    }
    return c.call(ApiKey.SHARE_ACKNOWLEDGE, version, body)


def acquired(answer: dict) -> dict[tuple[bytes, int], list[tuple[int, int, int]]]:
    """(topic id, partition) -> acquired runs (first, last, delivery count) of a ShareFetch."""
    assert answer["error_code"] == 0, answer
    out = {}
    for t in answer["responses"]:
        for p in t["partitions"]:
            assert p["error_code"] == 0, p
            if p["acquired_records"]:
                out[(t["topic_id"], p["partition_index"])] = [
                    (a["first_offset"], a["last_offset"], a["delivery_count"])
                    for a in p["acquired_records"]
                ]
    return out
