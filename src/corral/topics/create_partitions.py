"""CreatePartitions: more partitions for existing topics (kafka-topics --alter --partitions)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed
from corral.topics.registry import MAX_PARTITIONS, Topic, TopicError

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.topics.messages import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreatePartitionsTopic,
        CreatePartitionsTopicResult,
    )

log = logging.getLogger("corral.topics")


@handles(ApiKey.CREATE_PARTITIONS, 0, 3)
async def create_partitions(
    broker: Broker, request: Request[CreatePartitionsRequest]
) -> CreatePartitionsResponse:
    """Grows topics (kafka-topics --alter --partitions). Consumer groups subscribed to a grown
    topic bump their epoch at their next heartbeat (metadata hash); classic consumers notice the
    new partitions in Metadata and rejoin, as with Kafka."""
    body = request.body
    counts = Counter(t["name"] for t in body["topics"])
    alterable = filter_allowed(broker, request, AclOperation.ALTER, TOPIC, counts)
    results: list[CreatePartitionsTopicResult] = []
    growing: list[tuple[CreatePartitionsTopicResult, Topic, Awaitable[None]]] = []
    for wanted in body["topics"]:
        name, count = wanted["name"], wanted["count"]
        result: CreatePartitionsTopicResult = {
            "name": name,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        results.append(result)
        try:
            topic = _check_growth(broker, wanted, counts[name], name in alterable)
        except TopicError as e:
            result.update({"error_code": e.code, "error_message": e.message})
            continue
        if not body["validate_only"]:
            growing.append((result, topic, broker.topics.add_partitions(topic, count)))
    for result, topic, growth in growing:
        try:
            await growth
            log.info("topic %s now has %d partitions", topic.name, topic.partitions)
        except OSError as e:
            result.update(
                {
                    "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
                    "error_message": f"Could not write the change: {e}",
                }
            )
    return {"results": results}


def _check_growth(
    broker: Broker, wanted: CreatePartitionsTopic, times_named: int, alterable: bool
) -> Topic:
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
