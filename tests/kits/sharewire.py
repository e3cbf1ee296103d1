"""Share-group requests (KIP-932) over raw frames (tests/kits/rawwire.py), for the wire tests of
share groups and the scenario run side by side against Apache Kafka 4.4
(tests/wire/test_share_groups_against_kafka.py): ShareGroupHeartbeat and ShareGroupDescribe v1,
ShareFetch and ShareAcknowledge v2 (franz-go's; the Java client's too when the broker offers it),
Describe/Alter/DeleteShareGroupOffsets, and the group settings they depend on.

Every helper returns the answer's observable part as plain values, with what must differ between
two brokers taken out or named: topic ids become topic names (`names`), node ids, hosts and ports
are dropped, a member id is the one the caller chose (share-group members name themselves)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rawwire import RawClient

from corral import _core
from corral.network.apis import ApiKey

# Acknowledge types (ShareFetch/ShareAcknowledge AcknowledgeTypes).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

HEARTBEAT_V, DESCRIBE_V, FETCH_V, ACK_V = 1, 1, 2, 2


def until(probe: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """The first truthy answer of `probe`, polled; AssertionError with the last one after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        answer = probe()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"no answer after {timeout}s; last: {answer!r}")
        time.sleep(every)


# Coordinator answers that clients retry (the coordinator not there or still loading).
RETRIED = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def find_coordinator(c: RawClient, group: str) -> int:
    """FindCoordinator v4 for a group, retried while the coordinator is not ready (Kafka makes
    __consumer_offsets on the first one): its error code."""

    def ask() -> int | None:
        body = {"key": "", "key_type": 0, "coordinator_keys": [group]}
        [found] = c.call(ApiKey.FIND_COORDINATOR, 4, body)["coordinators"]
        return None if found["error_code"] in RETRIED else found["error_code"] + 1

    return until(ask) - 1


# ------------------------------------------------------------------------------ topics ---


def create_topic(c: RawClient, name: str, partitions: int) -> bytes:
    """A topic's id, made with CreateTopics v7."""
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 10000,
        "validate_only": False,
    }
    result = c.call(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]
    assert result["error_code"] == 0, result
    return result["topic_id"]


def topic_ids(c: RawClient, names: list[str]) -> dict[str, bytes]:
    body = {
        "topics": [{"topic_id": bytes(16), "name": n} for n in names],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    answer = c.call(ApiKey.METADATA, 12, body)
    return {t["name"]: t["topic_id"] for t in answer["topics"] if t["error_code"] == 0}


def produce(c: RawClient, topic: str, partition: int, values: list[bytes]) -> int:
    """Appends one batch of keyless records; returns its base offset (retried while a new
    topic's leader is not known yet: Kafka answers NOT_LEADER_OR_FOLLOWER for a moment)."""
    records = _core.build_batch([(None, v) for v in values], int(time.time() * 1000))
    body = {
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }

    def ask() -> dict | None:
        answer = c.call(ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"][0]
        return None if answer["error_code"] in (3, 6) else answer

    answer = until(ask)
    assert answer["error_code"] == 0, answer
    return answer["base_offset"]


# ------------------------------------------------------------------------ group config ---


def alter_group_configs(
    c: RawClient, group: str, configs: dict[str, str | None], validate_only: bool = False
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 on a GROUP resource: SET each value (DELETE for None)."""
    body = {
        "validate_only": validate_only,
        "resources": [
            {
                "resource_type": 32,
                "resource_name": group,
                "configs": [
                    {"name": n, "config_operation": 0 if v is not None else 1, "value": v}
                    for n, v in configs.items()
                ],
            }
        ],
    }
    [r] = c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    return r["error_code"], r["error_message"]


def describe_group_configs(c: RawClient, group: str) -> dict[str, tuple]:
    """{name: (value, source, read only, type, synonyms)} of a GROUP resource (DescribeConfigs
    v4 with synonyms)."""
    body = {
        "resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    [r] = c.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert r["error_code"] == 0, r
    return {
        e["name"]: (
            e["value"],
            e["config_source"],
            e["read_only"],
            e["config_type"],
            [(s["name"], s["value"], s["source"]) for s in e["synonyms"]],
        )
        for e in r["configs"]
    }


# ---------------------------------------------------------------------------- heartbeat ---


def heartbeat(
    c: RawClient,
    group: str,
    member: str,
    epoch: int,
    topics: list[str] | None = None,
    rack: str | None = None,
) -> dict:
    """ShareGroupHeartbeat v1, retried while the coordinator is not ready."""
    body = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rack_id": rack,
        "subscribed_topic_names": topics,
    }

    def ask() -> dict | None:
        answer = c.call(ApiKey.SHARE_GROUP_HEARTBEAT, HEARTBEAT_V, body)
        return None if answer["error_code"] in RETRIED else answer

    return until(ask)


def heartbeat_seen(answer: dict, names: dict[bytes, str]) -> tuple:
    """(error, message, epoch, assignment as {topic: [partitions]} or None)."""
    assignment = answer.get("assignment")
    return (
        answer["error_code"],
        answer.get("error_message"),
        answer["member_epoch"],
        None if assignment is None else topic_partitions(assignment["topic_partitions"], names),
    )


def topic_partitions(items: list[dict], names: dict[bytes, str]) -> dict[str, list[int]]:
    return {names.get(t["topic_id"], "?"): sorted(t["partitions"]) for t in items}


def describe(c: RawClient, groups: list[str], names: dict[bytes, str]) -> list[tuple]:
    """ShareGroupDescribe v1: per group, by group id (Kafka answers them in an order of its
    own): (error, message, state, epoch, assignment epoch,
    assignor, members as (id, epoch, client id, client host, rack, subscribed, assignment))."""
    answer = c.call(
        ApiKey.SHARE_GROUP_DESCRIBE,
        DESCRIBE_V,
        {"group_ids": groups, "include_authorized_operations": False},
    )
    out = []
    for g in sorted(answer["groups"], key=lambda g: g["group_id"]):
        members = []
        for m in sorted(g.get("members", []), key=lambda m: m["member_id"]):
            members.append(
                (
                    m["member_id"],
                    m["member_epoch"],
                    m["client_id"],
                    m["client_host"],
                    m["rack_id"],
                    sorted(m["subscribed_topic_names"]),
                    {
                        names.get(t["topic_id"], "?"): (t["topic_name"], sorted(t["partitions"]))
                        for t in m["assignment"]["topic_partitions"]
                    },
                )
            )
        out.append(
            (
                g["group_id"],
                g["error_code"],
                g.get("error_message"),
                g["group_state"],
                g["group_epoch"],
                g["assignment_epoch"],
                g["assignor_name"],
                members,
            )
        )
    return out


# ------------------------------------------------------------------- fetch, acknowledge ---

Acks = dict[tuple[bytes, int], list[tuple[int, int, list[int]]]]


def share_fetch(
    c: RawClient,
    group: str | None,
    member: str | None,
    epoch: int,
    partitions: list[tuple[bytes, int]],
    acks: Acks | None = None,
    max_records: int = 500,
    max_wait_ms: int = 500,
    min_bytes: int = 1,
    forgotten: list[tuple[bytes, int]] | None = None,
    version: int = FETCH_V,
) -> dict:
    """ShareFetch: `partitions` fetched, `acks` {(topic id, partition): [(first, last, types)]}
    acknowledged (a partition with acks alone is listed too, as the Java client lists it)."""
    acks = acks or {}
    wanted: dict[bytes, dict[int, list]] = {}
    for tid, p in [*partitions, *acks]:
        wanted.setdefault(tid, {})[p] = [
            {"first_offset": f, "last_offset": last, "acknowledge_types": types}
            for f, last, types in acks.get((tid, p), [])
        ]
    gone: dict[bytes, list[int]] = {}
    for tid, p in forgotten or []:
        gone.setdefault(tid, []).append(p)
    body = {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "max_records": max_records,
        "batch_size": max_records,
        "share_acquire_mode": 0,
        "is_renew_ack": False,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {"partition_index": p, "partition_max_bytes": 0, "acknowledgement_batches": b}
                    for p, b in sorted(parts.items())
                ],
            }
            for tid, parts in wanted.items()
        ],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": ps} for tid, ps in gone.items()],
    }
    return c.call(ApiKey.SHARE_FETCH, version, body)


def share_acknowledge(
    c: RawClient, group: str | None, member: str | None, epoch: int, acks: Acks
) -> dict:
    topics: dict[bytes, list] = {}
    for (tid, p), batches in acks.items():
        topics.setdefault(tid, []).append(
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
        "topics": [{"topic_id": tid, "partitions": ps} for tid, ps in topics.items()],
    }
    return c.call(ApiKey.SHARE_ACKNOWLEDGE, ACK_V, body)


def fetch_seen(answer: dict, names: dict[bytes, str]) -> tuple:
    """A ShareFetch answer without leaders and endpoints: (error, message, lock timeout,
    {(topic, partition): (error, message, ack error, ack message, acquired as (first, last,
    delivery count), offsets of the records sent)})."""
    parts = {}
    for t in answer.get("responses", []):
        for p in t["partitions"]:
            records = p.get("records") or b""
            parts[names.get(t["topic_id"], "?"), p["partition_index"]] = (
                p["error_code"],
                p.get("error_message"),
                p["acknowledge_error_code"],
                p.get("acknowledge_error_message"),
                [
                    (a["first_offset"], a["last_offset"], a["delivery_count"])
                    for a in p["acquired_records"]
                ],
                [r[0] for r in _core.decode_batches(records)] if records else [],
            )
    return (
        answer["error_code"],
        answer.get("error_message"),
        answer.get("acquisition_lock_timeout_ms"),
        parts,
    )


def acknowledge_seen(answer: dict, names: dict[bytes, str]) -> tuple:
    """(error, message, lock timeout, {(topic, partition): (error, message)})."""
    return (
        answer["error_code"],
        answer.get("error_message"),
        answer.get("acquisition_lock_timeout_ms"),
        {
            (names.get(t["topic_id"], "?"), p["partition_index"]): (
                p["error_code"],
                p.get("error_message"),
            )
            for t in answer.get("responses", [])
            for p in t["partitions"]
        },
    )


# ------------------------------------------------------------------------ admin APIs ---


def describe_offsets(
    c: RawClient, group: str, topics: dict[str, list[int]] | None, version: int = 1
) -> tuple:
    """DescribeShareGroupOffsets: (group error, message, {(topic, partition): (start offset,
    lag, error, message)})."""
    body = {
        "groups": [
            {
                "group_id": group,
                "topics": None
                if topics is None
                else [{"topic_name": t, "partitions": ps} for t, ps in topics.items()],
            }
        ]
    }
    [g] = c.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, body)["groups"]
    return (
        g["error_code"],
        g.get("error_message"),
        {
            (t["topic_name"], p["partition_index"]): (
                p["start_offset"],
                p.get("lag", -1),
                p["error_code"],
                p.get("error_message"),
            )
            for t in g.get("topics", [])
            for p in t["partitions"]
        },
    )


def alter_offsets(c: RawClient, group: str, offsets: dict[str, dict[int, int]]) -> tuple:
    """AlterShareGroupOffsets v0: (error, message, {(topic, partition): (error, message)})."""
    body = {
        "group_id": group,
        "topics": [
            {
                "topic_name": t,
                "partitions": [{"partition_index": p, "start_offset": o} for p, o in ps.items()],
            }
            for t, ps in offsets.items()
        ],
    }
    r = c.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body)
    return (
        r["error_code"],
        r.get("error_message"),
        {
            (t["topic_name"], p["partition_index"]): (p["error_code"], p.get("error_message"))
            for t in r.get("responses", [])
            for p in t["partitions"]
        },
    )


def delete_offsets(c: RawClient, group: str, topics: list[str]) -> tuple:
    """DeleteShareGroupOffsets v0: (error, message, {topic: (error, message)})."""
    body = {"group_id": group, "topics": [{"topic_name": t} for t in topics]}
    r = c.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body)
    return (
        r["error_code"],
        r.get("error_message"),
        {
            t["topic_name"]: (t["error_code"], t.get("error_message"))
            for t in r.get("responses", [])
        },
    )


def list_groups(c: RawClient, types: list[str], states: list[str] | None = None) -> list[tuple]:
    """ListGroups v5: sorted (group, state, type, protocol type)."""
    body = {"states_filter": states or [], "types_filter": types}
    r = c.call(ApiKey.LIST_GROUPS, 5, body)
    assert r["error_code"] == 0, r
    return sorted(
        (g["group_id"], g["group_state"], g["group_type"], g["protocol_type"]) for g in r["groups"]
    )


def describe_classic(c: RawClient, group: str, version: int) -> tuple:
    """DescribeGroups on a group: (error, message, state, protocol type, members)."""
    body = {"groups": [group], "include_authorized_operations": False}
    [g] = c.call(ApiKey.DESCRIBE_GROUPS, version, body)["groups"]
    return (
        g["error_code"],
        g.get("error_message"),
        g["group_state"],
        g["protocol_type"],
        len(g["members"]),
    )


def delete_groups(c: RawClient, groups: list[str]) -> dict[str, int]:
    r = c.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": groups})
    return {g["group_id"]: g["error_code"] for g in r["results"]}


def offset_fetch(c: RawClient, group: str) -> tuple:
    """OffsetFetch v9 for a whole group: (group error, partitions)."""
    body = {
        "group_id": "",
        "topics": [],
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}],
        "require_stable": False,
    }
    [g] = c.call(ApiKey.OFFSET_FETCH, 9, body)["groups"]
    return g["error_code"], [(t["name"], len(t["partitions"])) for t in g["topics"]]


def consumer_heartbeat(c: RawClient, group: str, member: str, topics: list[str]) -> tuple:
    """ConsumerGroupHeartbeat v1 join: (error, message)."""
    body = {
        "group_id": group,
        "member_id": member,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": topics,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    r = c.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
    return r["error_code"], r.get("error_message")


def offset_fetch_topics(c: RawClient, group: str, topic: str, partitions: list[int]) -> tuple:
    """OffsetFetch v9 for named partitions: (group error, [(partition, offset, error)])."""
    body = {
        "group_id": "",
        "topics": [],
        "groups": [
            {
                "group_id": group,
                "member_id": None,
                "member_epoch": -1,
                "topics": [{"name": topic, "topic_id": bytes(16), "partition_indexes": partitions}],
            }
        ],
        "require_stable": False,
    }
    [g] = c.call(ApiKey.OFFSET_FETCH, 9, body)["groups"]
    return g["error_code"], [
        (p["partition_index"], p["committed_offset"], p["error_code"])
        for t in g["topics"]
        for p in t["partitions"]
    ]


def offset_commit(c: RawClient, group: str, topic: str, partition: int, offset: int) -> list[int]:
    """OffsetCommit v9 as an admin client commits (no member): the partitions' error codes."""
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": topic,
                "topic_id": bytes(16),
                "partitions": [
                    {
                        "partition_index": partition,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    }
    r = c.call(ApiKey.OFFSET_COMMIT, 9, body)
    return [p["error_code"] for t in r["topics"] for p in t["partitions"]]


def join_classic(c: RawClient, group: str) -> tuple:
    """JoinGroup v9 of a new consumer: (error, message)."""
    body = {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
        "reason": None,
    }
    r = c.call(ApiKey.JOIN_GROUP, 9, body)
    return r["error_code"], r.get("error_message")


def offset_delete(c: RawClient, group: str, topic: str, partition: int) -> tuple:
    """OffsetDelete v0: (error, [partition errors])."""
    body = {
        "group_id": group,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition}]}],
    }
    r = c.call(ApiKey.OFFSET_DELETE, 0, body)
    return r["error_code"], [p["error_code"] for t in r["topics"] for p in t["partitions"]]
