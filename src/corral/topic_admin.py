"""CreateTopics, CreatePartitions and DeleteTopics."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import Any

from .apis import ApiKey, handles
from .config import TOPIC_SETTINGS, ConfigSource, render
from .errors import ErrorCode
from .security.acls import AclOperation
from .security.authorize import TOPIC, cluster_allowed, filter_allowed
from .topics import MAX_PARTITIONS, TopicError

log = logging.getLogger("corral.topics")


@handles(ApiKey.CREATE_TOPICS, 2, 7)
async def create_topics(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    counts = Counter(t["name"] for t in body["topics"])
    # CLUSTER CREATE, else CREATE on each topic; its configs are shown with DESCRIBE_CONFIGS.
    creatable = (
        counts.keys()
        if cluster_allowed(broker, request, AclOperation.CREATE, log_denied=False)
        else filter_allowed(broker, request, AclOperation.CREATE, TOPIC, counts)
    )
    describable = filter_allowed(broker, request, AclOperation.DESCRIBE_CONFIGS, TOPIC, counts)
    results = []
    creating = []  # (result, topic creation under way, partitions, configs)
    for wanted in body["topics"]:
        name = wanted["name"]
        result: dict[str, Any] = {"name": name}
        results.append(result)
        try:
            if counts[name] > 1:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST,
                    "Create topics request from client contains a duplicate topic name",
                )
            if name not in creatable:
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            partitions, replication = wanted["num_partitions"], wanted["replication_factor"]
            if wanted["assignments"]:
                partitions, replication = _check_assignments(broker, wanted)
            configs = {c["name"]: c["value"] for c in wanted["configs"]}
            partitions, configs = broker.topics.check_new(name, partitions, replication, configs)
        except TopicError as e:
            _failed(result, version, e.code, e.message)
            continue
        if body["validate_only"]:
            _created(broker, result, version, name in describable, bytes(16), partitions, configs)
        else:
            creating.append(
                (result, broker.topics.create(name, partitions, configs), partitions, configs)
            )
    # Every creation of the request was queued above: one fsync covers them all.
    for result, creation, partitions, configs in creating:
        try:
            topic = await creation
        except OSError as e:
            _failed(
                result, version, ErrorCode.KAFKA_STORAGE_ERROR, f"Could not write the topic: {e}"
            )
            continue
        log.info("created topic %s (%d partitions, configs %s)", topic.name, partitions, configs)
        _created(
            broker, result, version, topic.name in describable, topic.id.bytes, partitions, configs
        )
    return {"topics": results}


def _created(
    broker,
    result: dict[str, Any],
    version: int,
    describable: bool,
    topic_id: bytes,
    partitions: int,
    configs: dict[str, str],
) -> None:
    """v5+ shows the new topic's configs to a principal that may DESCRIBE_CONFIGS it, and
    says TOPIC_AUTHORIZATION_FAILED in topic_config_error_code to the others."""
    result.update(error_code=ErrorCode.NONE, error_message=None, topic_id=topic_id)
    if version < 5:
        return
    if describable:
        result.update(
            num_partitions=partitions,
            replication_factor=1,
            configs=_effective_configs(broker, configs),
        )
    else:
        result.update(
            topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            num_partitions=-1,
            replication_factor=-1,
        )


def _failed(result: dict[str, Any], version: int, code: ErrorCode, message: str) -> None:
    result.update(error_code=code, error_message=message)
    if version >= 5:
        result.update(num_partitions=-1, replication_factor=-1)


def _check_assignments(broker, wanted: dict[str, Any]) -> tuple[int, int]:
    if wanted["num_partitions"] != -1 or wanted["replication_factor"] != -1:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
        )
    indexes = sorted(a["partition_index"] for a in wanted["assignments"])
    if indexes != list(range(len(indexes))):
        raise TopicError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Partitions should be a consecutive 0-based integer sequence",
        )
    for a in wanted["assignments"]:
        if a["broker_ids"] != [broker.node_id]:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Broker(s) {a['broker_ids']} not available; this cluster has only broker {broker.node_id}",
            )
    return len(indexes), 1


def _effective_configs(broker, overrides: dict[str, str]) -> list[dict[str, Any]]:
    settings = broker.settings
    configs = []
    for name, setting in TOPIC_SETTINGS.items():
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value = render(settings.topic_default(name))
            source = (
                settings.layers(setting.broker_synonym)[0][1]
                if setting.broker_synonym
                else ConfigSource.DEFAULT_CONFIG
            )
        configs.append(
            {
                "name": name,
                "value": value,
                "read_only": False,
                "config_source": source,
                "is_sensitive": False,
            }
        )
    return configs


@handles(ApiKey.CREATE_PARTITIONS, 0, 3)
async def create_partitions(broker, request) -> dict[str, Any]:
    """Grows topics (kafka-topics --alter --partitions). Consumer groups subscribed to a grown
    topic bump their epoch at their next heartbeat (metadata hash); classic consumers notice the
    new partitions in Metadata and rejoin, as with Kafka."""
    body = request.body
    counts = Counter(t["name"] for t in body["topics"])
    alterable = filter_allowed(broker, request, AclOperation.ALTER, TOPIC, counts)
    results, growing = [], []
    for wanted in body["topics"]:
        name, count = wanted["name"], wanted["count"]
        result: dict[str, Any] = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
        results.append(result)
        try:
            topic = _check_growth(broker, wanted, counts[name], name in alterable)
        except TopicError as e:
            result.update(error_code=e.code, error_message=e.message)
            continue
        if not body["validate_only"]:
            growing.append((result, topic, broker.topics.add_partitions(topic, count)))
    for result, topic, growth in growing:
        try:
            await growth
            log.info("topic %s now has %d partitions", topic.name, topic.partitions)
        except OSError as e:
            result.update(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                error_message=f"Could not write the change: {e}",
            )
    return {"results": results}


def _check_growth(broker, wanted: dict[str, Any], times_named: int, alterable: bool):
    """The topic to grow, or TopicError with Kafka's code and message."""
    name, count = wanted["name"], wanted["count"]
    if times_named > 1:
        raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
    if not alterable:
        raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    topic = broker.topics.get(name)
    if topic is None or broker.topics.changing(name) is not None:
        raise TopicError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        )
    if topic.internal:
        # Growing __consumer_offsets would move groups to other partitions.
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot increase the number of partitions of the internal topic {name}.",
        )
    if count == topic.partitions:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partitions.")
    if count < topic.partitions:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {name} currently has {topic.partitions} partition(s); "
            f"{count} would not be an increase.",
        )
    if count > MAX_PARTITIONS:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions {count} is above corral's limit of {MAX_PARTITIONS}.",
        )
    assignments = wanted["assignments"]
    if assignments is not None:
        added = count - topic.partitions
        if len(assignments) != added:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {added} additional partition(s), but only "
                f"{len(assignments)} assignment(s) were specified.",
            )
        for a in assignments:
            if a["broker_ids"] != [broker.node_id]:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Broker(s) {a['broker_ids']} not available; this cluster has "
                    f"only broker {broker.node_id}",
                )
    return topic


@handles(ApiKey.DELETE_TOPICS, 1, 6)
async def delete_topics(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
    else:
        wanted = [(name, bytes(16)) for name in body["topic_names"]]
    responses = []
    deleting = []  # (entry, deletion under way)
    may = _deletion_rights(broker, request, wanted)
    for name, topic_id in wanted:
        if name is not None:
            topic = broker.topics.get(name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            topic = broker.topics.by_id.get(uuid.UUID(bytes=topic_id))
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id}
        refused = may is not None and _refused(entry, name, topic, may)
        if refused:
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if version >= 5:
                entry["error_message"] = "Topic authorization failed."
        elif topic is None:
            entry["error_code"] = missing
            if version >= 5:
                entry["error_message"] = "This server does not host this topic."
        elif topic.internal:
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if version >= 5:
                entry["error_message"] = f"Internal topic {topic.name} cannot be deleted."
        else:
            entry.update(name=topic.name, topic_id=topic.id.bytes, error_code=ErrorCode.NONE)
            deleting.append((entry, broker.topics.delete(topic)))
        responses.append(entry)
    for entry, deletion in deleting:
        try:
            await deletion
            log.info("deleted topic %s", entry["name"])
        except OSError as e:
            entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
            if version >= 5:
                entry["error_message"] = f"Could not write the deletion: {e}"
    return {"responses": responses}


def _deletion_rights(broker, request, wanted) -> tuple[set[str], set[str]] | None:
    """(the topics the principal may DESCRIBE, those it may DELETE) among those named, directly
    or by id; None when it may delete them all (no authorizer, or CLUSTER DELETE)."""
    if broker.authorizer is None or cluster_allowed(
        broker, request, AclOperation.DELETE, log_denied=False
    ):
        return None
    names = set()
    for name, topic_id in wanted:
        if name is None:
            topic = broker.topics.by_id.get(uuid.UUID(bytes=topic_id))
            name = topic.name if topic is not None else None
        if name is not None:
            names.add(name)
    return (
        filter_allowed(broker, request, AclOperation.DESCRIBE, TOPIC, names),
        filter_allowed(broker, request, AclOperation.DELETE, TOPIC, names),
    )


def _refused(
    entry: dict[str, Any], name: str | None, topic, may: tuple[set[str], set[str]]
) -> bool:
    """Kafka's order: a name the principal may not DESCRIBE is refused whether it exists or not;
    an existing topic it may not DELETE is refused, named only when it may DESCRIBE it."""
    describable, deletable = may
    if name is not None and name not in describable:
        return True
    if topic is None or topic.name in deletable:
        return False
    entry["name"] = topic.name if topic.name in describable else None
    return True
