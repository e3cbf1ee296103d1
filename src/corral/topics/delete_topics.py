"""DeleteTopics: by name or by topic id (kafka-topics --delete)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, cluster_allowed, filter_allowed
from corral.topics.registry import Topic

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.topics.messages import (
        DeletableTopicResult,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
    )

# A topic to delete: (name, or None when named by id; topic id, zero when named by name).
Wanted = tuple[str | None, bytes]

log = logging.getLogger("corral.topics")


@handles(ApiKey.DELETE_TOPICS, 1, 6)
async def delete_topics(
    broker: Broker, request: Request[DeleteTopicsRequest]
) -> DeleteTopicsResponse:
    body, version = request.body, request.api_version
    wanted: list[Wanted]
    if version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
    else:
        wanted = [(name, bytes(16)) for name in body["topic_names"]]
    responses: list[DeletableTopicResult] = []
    deleting: list[tuple[DeletableTopicResult, Awaitable[None]]] = []  # (entry, its deletion)
    may = _deletion_rights(broker, request, wanted)
    for name, topic_id in wanted:
        if name is not None:
            topic = broker.topics.get(name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            topic = broker.topics.by_id.get(uuid.UUID(bytes=topic_id))
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        entry: DeletableTopicResult = {"name": name, "topic_id": topic_id}
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
            entry.update(
                {"name": topic.name, "topic_id": topic.id.bytes, "error_code": ErrorCode.NONE}
            )
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


def _deletion_rights(
    broker: Broker, request: Request[DeleteTopicsRequest], wanted: list[Wanted]
) -> tuple[set[str], set[str]] | None:
    """(the topics the principal may DESCRIBE, those it may DELETE) among those named, directly
    or by id; None when it may delete them all (no authorizer, or CLUSTER DELETE)."""
    if broker.authorizer is None or cluster_allowed(
        broker, request, AclOperation.DELETE, log_denied=False
    ):
        return None
    names: set[str] = set()
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
    entry: DeletableTopicResult,
    name: str | None,
    topic: Topic | None,
    may: tuple[set[str], set[str]],
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
