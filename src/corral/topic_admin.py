"""CreateTopics and DeleteTopics."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import Any

from .apis import ApiKey, handles
from .config import TOPIC_SETTINGS, ConfigSource, render
from .errors import ErrorCode
from .topics import TopicError

log = logging.getLogger("corral.topics")


@handles(ApiKey.CREATE_TOPICS, 2, 7)
def create_topics(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    counts = Counter(t["name"] for t in body["topics"])
    results = []
    for wanted in body["topics"]:
        name = wanted["name"]
        result: dict[str, Any] = {"name": name}
        try:
            if counts[name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Create topics request from client contains a duplicate topic name")
            partitions, replication = wanted["num_partitions"], wanted["replication_factor"]
            if wanted["assignments"]:
                partitions, replication = _check_assignments(broker, wanted)
            configs = {c["name"]: c["value"] for c in wanted["configs"]}
            partitions, configs = broker.topics.check_new(name, partitions, replication, configs)
            if body["validate_only"]:
                topic_id = bytes(16)
            else:
                topic = broker.topics.create(name, partitions, configs)
                log.info("created topic %s (%d partitions, configs %s)", name, partitions, configs)
                topic_id = topic.id.bytes
            result.update(error_code=ErrorCode.NONE, error_message=None, topic_id=topic_id)
            if version >= 5:
                result.update(num_partitions=partitions, replication_factor=1,
                              configs=_effective_configs(broker, configs))
        except TopicError as e:
            result.update(error_code=e.code, error_message=e.message)
            if version >= 5:
                result.update(num_partitions=-1, replication_factor=-1)
        results.append(result)
    return {"topics": results}


def _check_assignments(broker, wanted: dict[str, Any]) -> tuple[int, int]:
    if wanted["num_partitions"] != -1 or wanted["replication_factor"] != -1:
        raise TopicError(ErrorCode.INVALID_REQUEST,
                         "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
    indexes = sorted(a["partition_index"] for a in wanted["assignments"])
    if indexes != list(range(len(indexes))):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Partitions should be a consecutive 0-based integer sequence")
    for a in wanted["assignments"]:
        if a["broker_ids"] != [broker.node_id]:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Broker(s) {a['broker_ids']} not available; this cluster has only broker {broker.node_id}")
    return len(indexes), 1


def _effective_configs(broker, overrides: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"name": name,
         "value": overrides.get(name, render(broker.settings.topic_default(name))),
         "read_only": False,
         "config_source": ConfigSource.DYNAMIC_TOPIC_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG,
         "is_sensitive": False}
        for name in TOPIC_SETTINGS
    ]


@handles(ApiKey.DELETE_TOPICS, 1, 6)
def delete_topics(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
    else:
        wanted = [(name, bytes(16)) for name in body["topic_names"]]
    responses = []
    for name, topic_id in wanted:
        if name is not None:
            topic = broker.topics.get(name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            topic = broker.topics.by_id.get(uuid.UUID(bytes=topic_id))
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id}
        if topic is None:
            entry["error_code"] = missing
            if version >= 5:
                entry["error_message"] = "This server does not host this topic."
        elif topic.internal:
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if version >= 5:
                entry["error_message"] = f"Internal topic {topic.name} cannot be deleted."
        else:
            broker.topics.delete(topic)
            log.info("deleted topic %s", topic.name)
            entry.update(name=topic.name, topic_id=topic.id.bytes, error_code=ErrorCode.NONE)
        responses.append(entry)
    return {"responses": responses}
