"""CreateTopics: new topics with their partition counts and config overrides (kafka-topics
--create)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from corral.config.settings import TOPIC_SETTINGS, ConfigSource, render
from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, cluster_allowed, filter_allowed
from corral.topics.registry import Topic, TopicError

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.topics.messages import (
        CreatableTopic,
        CreatableTopicConfigs,
        CreatableTopicResult,
        CreateTopicsRequest,
        CreateTopicsResponse,
    )

log = logging.getLogger("corral.topics")


@handles(ApiKey.CREATE_TOPICS, 2, 7)
async def create_topics(
    broker: Broker, request: Request[CreateTopicsRequest]
) -> CreateTopicsResponse:
    body, version = request.body, request.api_version
    counts = Counter(t["name"] for t in body["topics"])
    # CLUSTER CREATE, else CREATE on each topic; its configs are shown with DESCRIBE_CONFIGS.
    creatable = (
        counts.keys()
        if cluster_allowed(broker, request, AclOperation.CREATE, log_denied=False)
        else filter_allowed(broker, request, AclOperation.CREATE, TOPIC, counts)
    )
    describable = filter_allowed(broker, request, AclOperation.DESCRIBE_CONFIGS, TOPIC, counts)
    results: list[CreatableTopicResult] = []
    # (result, topic creation under way, partitions, configs)
    creating: list[tuple[CreatableTopicResult, Awaitable[Topic], int, dict[str, str]]] = []
    for wanted in body["topics"]:
        name = wanted["name"]
        result: CreatableTopicResult = {"name": name}
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
            asked = {c["name"]: c["value"] for c in wanted["configs"]}
            partitions, configs = broker.topics.check_new(name, partitions, replication, asked)
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
        except TopicError as e:  # cluster mode: another node created it first
            _failed(result, version, e.code, e.message)
            continue
        log.info("created topic %s (%d partitions, configs %s)", topic.name, partitions, configs)
        _created(
            broker, result, version, topic.name in describable, topic.id.bytes, partitions, configs
        )
    return {"topics": results}


def _created(
    broker: Broker,
    result: CreatableTopicResult,
    version: int,
    describable: bool,
    topic_id: bytes,
    partitions: int,
    configs: dict[str, str],
) -> None:
    """v5+ shows the new topic's configs to a principal that may DESCRIBE_CONFIGS it, and
    says TOPIC_AUTHORIZATION_FAILED in topic_config_error_code to the others."""
    result.update({"error_code": ErrorCode.NONE, "error_message": None, "topic_id": topic_id})
    if version < 5:
        return
    if describable:
        result.update(
            {
                "num_partitions": partitions,
                "replication_factor": 1,
                "configs": _effective_configs(broker, configs),
            }
        )
    else:
        result.update(
            {
                "topic_config_error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "num_partitions": -1,
                "replication_factor": -1,
            }
        )


def _failed(
    result: CreatableTopicResult, version: int, code: ErrorCode, message: str | None
) -> None:
    result.update({"error_code": code, "error_message": message})
    if version >= 5:
        result.update({"num_partitions": -1, "replication_factor": -1})


def _check_assignments(broker: Broker, wanted: CreatableTopic) -> tuple[int, int]:
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


def _effective_configs(broker: Broker, overrides: dict[str, str]) -> list[CreatableTopicConfigs]:
    settings = broker.settings
    configs: list[CreatableTopicConfigs] = []
    for name, setting in TOPIC_SETTINGS.items():
        value: str | None
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
