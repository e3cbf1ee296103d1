"""Metadata and DescribeCluster: what the cluster (one node) and its topics look like."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import trio

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.store import storage_warning
from corral.security.acls import CLUSTER_NAME, AclOperation
from corral.security.authorize import (
    CLUSTER,
    TOPIC,
    allowed,
    authorized_operations,
    cluster_allowed,
    filter_allowed,
)
from corral.topics.registry import Topic, TopicError, validate_name

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.topics.messages import (
        DescribeClusterRequest,
        DescribeClusterResponse,
        MetadataRequest,
        MetadataRequestTopic,
        MetadataResponse,
        MetadataResponseBroker,
        MetadataResponsePartition,
        MetadataResponseTopic,
    )

log = logging.getLogger("corral.metadata")

NIL_UUID = bytes(16)
# What a topic's authorized operations are computed with (None: not asked for).
Operations = Callable[[str], int] | None


def _brokers(broker: Broker, listener: str) -> list[MetadataResponseBroker]:
    host, port = broker.endpoint(listener)
    me: MetadataResponseBroker = {
        "node_id": broker.node_id,
        "host": host,
        "port": port,
        "rack": None,
    }
    if broker.cluster is None:
        return [me]
    # Cluster mode: every live node, at the address it registered (its first listener's).
    return [
        me
        if node.node_id == broker.node_id
        else {"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack}
        for node in broker.cluster.live_nodes()
    ]


def _topic_entry(broker: Broker, topic: Topic, ops: Operations) -> MetadataResponseTopic:
    node = broker.node_id
    entry: MetadataResponseTopic = {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.id.bytes,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": ErrorCode.NONE,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": 0,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            if broker.cluster is None
            else _cluster_partition(broker, topic, p)
            for p in range(topic.partitions)
        ],
    }
    if ops is not None:
        entry["topic_authorized_operations"] = ops(topic.name)
    return entry


def _cluster_partition(broker: Broker, topic: Topic, p: int) -> MetadataResponsePartition:
    """A partition in cluster mode: led by its node (replication factor 1); offline, as Kafka
    answers for a partition whose only replica is down, while that node is not live."""
    assert broker.cluster is not None
    leader = broker.cluster.leader_of(topic, p)
    if leader is not None and leader in broker.cluster.nodes:
        error, replicas, offline = ErrorCode.NONE, [leader], []
    else:
        error, replicas = ErrorCode.LEADER_NOT_AVAILABLE, [] if leader is None else [leader]
        offline, leader = replicas, -1
    return {
        "error_code": error,
        "partition_index": p,
        "leader_id": leader,
        "leader_epoch": 0,
        "replica_nodes": replicas,
        "isr_nodes": [] if offline else replicas,
        "offline_replicas": offline,
    }


def _error_entry(
    code: ErrorCode, name: str | None, topic_id: bytes = NIL_UUID
) -> MetadataResponseTopic:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
    }


@handles(ApiKey.METADATA, 0, 12)
async def metadata(broker: Broker, request: Request[MetadataRequest]) -> MetadataResponse:
    body, version = request.body, request.api_version
    ops: Operations = None
    if body["include_topic_authorized_operations"] and version >= 8:
        ops = partial(authorized_operations, broker, request, TOPIC)
    requested = body["topics"]
    # v0-3 have no flag: auto-creation is allowed.
    may_create = broker.settings["auto.create.topics.enable"] and (
        version < 4 or body["allow_auto_topic_creation"]
    )
    topics: list[MetadataResponseTopic] = []
    # v0 uses an empty list for "all topics"; v1+ uses null.
    if requested is None or (version == 0 and not requested):
        # Only the topics the principal may DESCRIBE, without a word about the others.
        visible = filter_allowed(
            broker, request, AclOperation.DESCRIBE, TOPIC, broker.topics.by_name
        )
        topics = [
            _topic_entry(broker, t, ops)
            for t in broker.topics.by_name.values()
            if t.name in visible
        ]
    else:
        refused: list[MetadataResponseTopic] = []
        if broker.authorizer is not None:
            # Named topics the principal may not DESCRIBE: refused whether they exist or not.
            visible = filter_allowed(
                broker,
                request,
                AclOperation.DESCRIBE,
                TOPIC,
                (name for w in requested if (name := _name(w)) is not None),
            )
            refused = [
                _error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
                for w in requested
                if (name := _name(w)) is not None and name not in visible
            ]
            requested = [w for w in requested if _by_id(w) or w["name"] in visible]
        # Request order: each requested topic's entry by its index.
        found: dict[int, MetadataResponseTopic] = {}

        async def lookup(i: int, wanted: MetadataRequestTopic) -> None:
            found[i] = await _lookup(broker, request, wanted, ops, may_create)

        # Unknown, or being created or deleted: may wait.
        slow: list[tuple[int, MetadataRequestTopic]] = []
        for i, wanted in enumerate(requested):
            name = _name(wanted)
            topic = broker.topics.get(name) if name is not None else None
            if topic is not None and broker.topics.changing(topic.name) is None:
                found[i] = _topic_entry(broker, topic, ops)
            else:
                slow.append((i, wanted))
        if len(slow) == 1:
            await lookup(*slow[0])
        elif slow:
            # Concurrently, so that the topics one request auto-creates share one fsync.
            async with trio.open_nursery() as nursery:
                for i, wanted in slow:
                    nursery.start_soon(lookup, i, wanted)
        topics = [found[i] for i in range(len(requested))] + refused
    response: MetadataResponse = {
        "brokers": _brokers(broker, request.listener),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
    }
    if body["include_cluster_authorized_operations"] and 8 <= version <= 10:
        response["cluster_authorized_operations"] = _cluster_operations(broker, request)
    return response


def _cluster_operations(broker: Broker, request: Request[object]) -> int:
    """The cluster's authorized operations: none without CLUSTER DESCRIBE, as Kafka answers."""
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE, log_denied=False):
        return 0
    return authorized_operations(broker, request, CLUSTER, CLUSTER_NAME)


def _by_id(wanted: MetadataRequestTopic) -> bool:
    """Whether a requested topic is named by its id (v12+). As in Kafka, a non-zero id wins over
    the name: the Java client asks by id with the name left at its default, "" (not null)."""
    return wanted["name"] is None or wanted.get("topic_id", NIL_UUID) != NIL_UUID


def _name(wanted: MetadataRequestTopic) -> str | None:
    """A requested topic's name, None when it is asked for by id."""
    return None if _by_id(wanted) else wanted["name"]


async def _lookup(
    broker: Broker,
    request: Request[MetadataRequest],
    wanted: MetadataRequestTopic,
    ops: Operations,
    may_create: bool,
) -> MetadataResponseTopic:
    name, topic_id = _name(wanted), wanted["topic_id"]
    if name is None:
        topic = broker.topics.by_id.get(uuid.UUID(bytes=topic_id))
        if topic is None:
            return _error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
        if not allowed(broker, request, AclOperation.DESCRIBE, TOPIC, topic.name):
            # Topic ids are not secret, Kafka says: refused with the id, without the name.
            return _error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, topic_id)
        return _topic_entry(broker, topic, ops)
    changing = broker.topics.changing(name)
    if changing is not None:
        await changing.wait()  # another request is creating or deleting it: its outcome counts
    topic = broker.topics.get(name)
    if topic is not None:
        return _topic_entry(broker, topic, ops)
    try:
        validate_name(name)
    except TopicError:
        return _error_entry(ErrorCode.INVALID_TOPIC_EXCEPTION, name)
    if not may_create or broker.topics.changing(name) is not None:
        return _error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    if not (
        cluster_allowed(broker, request, AclOperation.CREATE, log_denied=False)
        or allowed(broker, request, AclOperation.CREATE, TOPIC, name)
    ):
        return _error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    try:
        topic = await broker.topics.create(name, broker.settings["num.partitions"])
    except OSError as e:
        storage_warning("auto_create", "could not auto-create topic %s: %s", name, e)
        return _error_entry(ErrorCode.KAFKA_STORAGE_ERROR, name)
    except TopicError:
        # Cluster mode: another node created it meanwhile; known here within a second.
        return _error_entry(ErrorCode.LEADER_NOT_AVAILABLE, name)
    log.info("auto-created topic %s with %d partitions", name, topic.partitions)
    return _topic_entry(broker, topic, ops)


@handles(ApiKey.DESCRIBE_CLUSTER, 0, 2)
def describe_cluster(
    broker: Broker, request: Request[DescribeClusterRequest]
) -> DescribeClusterResponse:
    body = request.body
    response: DescribeClusterResponse = {
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
    }
    if request.api_version >= 1:
        response["endpoint_type"] = body["endpoint_type"]
    # Endpoint type 1 is brokers; asking a broker for controllers (2) is refused, as in Kafka.
    if body["endpoint_type"] != 1:
        response["error_code"] = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response["error_message"] = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
        )
        return response
    response["brokers"] = [
        {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
        for b in _brokers(broker, request.listener)
    ]
    if body["include_cluster_authorized_operations"]:
        response["cluster_authorized_operations"] = _cluster_operations(broker, request)
    return response
