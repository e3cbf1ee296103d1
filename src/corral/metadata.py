"""Metadata and DescribeCluster: what the cluster (one node) and its topics look like."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import trio

from .apis import ApiKey, handles
from .errors import ErrorCode
from .topics import Topic, TopicError, validate_name

log = logging.getLogger("corral.metadata")

# Schema default of the *_authorized_operations fields: "not requested".
OPERATIONS_NOT_REQUESTED = -(2**31)
# Every ACL operation allowed (corral has no authorizer): READ..IDEMPOTENT_WRITE bits 3..14.
ALL_OPERATIONS = sum(1 << bit for bit in range(3, 15))
NIL_UUID = bytes(16)


def _brokers(broker, listener: str) -> list[dict[str, Any]]:
    host, port = broker.endpoint(listener)
    return [{"node_id": broker.node_id, "host": host, "port": port, "rack": None}]


def _topic_entry(broker, topic: Topic, version: int, with_ops: bool) -> dict[str, Any]:
    node = broker.node_id
    entry = {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.id.bytes,
        "is_internal": topic.internal,
        "partitions": [
            {"error_code": ErrorCode.NONE, "partition_index": p, "leader_id": node,
             "leader_epoch": 0, "replica_nodes": [node], "isr_nodes": [node],
             "offline_replicas": []}
            for p in range(topic.partitions)
        ],
    }
    if with_ops and version >= 8:
        entry["topic_authorized_operations"] = ALL_OPERATIONS
    return entry


def _error_entry(code: ErrorCode, name: str | None, topic_id: bytes = NIL_UUID) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": []}


@handles(ApiKey.METADATA, 0, 12)
async def metadata(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    with_ops = body["include_topic_authorized_operations"]
    requested = body["topics"]
    # v0 uses an empty list for "all topics"; v1+ uses null.
    all_topics = requested is None or (version == 0 and not requested)
    # v0-3 have no flag: auto-creation is allowed.
    may_create = broker.settings["auto.create.topics.enable"] and (
        version < 4 or body["allow_auto_topic_creation"])
    topics = []
    if all_topics:
        topics = [_topic_entry(broker, t, version, with_ops) for t in broker.topics.by_name.values()]
    else:
        topics = [None] * len(requested)

        async def lookup(i: int, wanted: dict[str, Any]) -> None:
            topics[i] = await _lookup(broker, wanted, version, with_ops, may_create)

        slow = []  # unknown, or being created or deleted: may wait
        for i, wanted in enumerate(requested):
            topic = broker.topics.get(wanted["name"]) if not _by_id(wanted) else None
            if topic is not None and broker.topics.changing(topic.name) is None:
                topics[i] = _topic_entry(broker, topic, version, with_ops)
            else:
                slow.append((i, wanted))
        if len(slow) == 1:
            await lookup(*slow[0])
        elif slow:
            # Concurrently, so that the topics one request auto-creates share one fsync.
            async with trio.open_nursery() as nursery:
                for i, wanted in slow:
                    nursery.start_soon(lookup, i, wanted)
    response = {
        "brokers": _brokers(broker, request.listener),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
    }
    if body["include_cluster_authorized_operations"] and 8 <= version <= 10:
        response["cluster_authorized_operations"] = ALL_OPERATIONS
    return response


def _by_id(wanted: dict[str, Any]) -> bool:
    """Whether a requested topic is named by its id (v12+). As in Kafka, a non-zero id wins over
    the name: the Java client asks by id with the name left at its default, "" (not null)."""
    return wanted["name"] is None or wanted.get("topic_id", NIL_UUID) != NIL_UUID


async def _lookup(broker, wanted: dict[str, Any], version: int, with_ops: bool, may_create: bool):
    name, topic_id = wanted["name"], wanted["topic_id"]
    if _by_id(wanted):
        topic = broker.topics.by_id.get(uuid.UUID(bytes=topic_id))
        if topic is None:
            return _error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
        return _topic_entry(broker, topic, version, with_ops)
    changing = broker.topics.changing(name)
    if changing is not None:
        await changing.wait()  # another request is creating or deleting it: its outcome counts
    topic = broker.topics.get(name)
    if topic is not None:
        return _topic_entry(broker, topic, version, with_ops)
    try:
        validate_name(name)
    except TopicError:
        return _error_entry(ErrorCode.INVALID_TOPIC_EXCEPTION, name)
    if not may_create or broker.topics.changing(name) is not None:
        return _error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        topic = await broker.topics.create(name, broker.settings["num.partitions"])
    except OSError as e:
        log.warning("could not auto-create topic %s: %s", name, e)
        return _error_entry(ErrorCode.KAFKA_STORAGE_ERROR, name)
    log.info("auto-created topic %s with %d partitions", name, topic.partitions)
    return _topic_entry(broker, topic, version, with_ops)


@handles(ApiKey.DESCRIBE_CLUSTER, 0, 2)
def describe_cluster(broker, request) -> dict[str, Any]:
    body = request.body
    response: dict[str, Any] = {"cluster_id": broker.cluster_id, "controller_id": broker.node_id}
    if request.api_version >= 1:
        response["endpoint_type"] = body["endpoint_type"]
    # Endpoint type 1 is brokers; asking a broker for controllers (2) is refused, as in Kafka.
    if body["endpoint_type"] != 1:
        response["error_code"] = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response["error_message"] = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
        return response
    host, port = broker.endpoint(request.listener)
    response["brokers"] = [{"broker_id": broker.node_id, "host": host, "port": port, "rack": None}]
    if body["include_cluster_authorized_operations"]:
        response["cluster_authorized_operations"] = ALL_OPERATIONS
    return response
