"""Acknowledgements as both ShareFetch (piggy-backed) and ShareAcknowledge carry them: Kafka's
checks of a partition's batches (KafkaApis.validateAcknowledgementBatches), then the share
partition's all-or-nothing acknowledge, its result resolved once durable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.later import Later
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.topics.registry import Topic

RENEW = 4
NOT_HOSTED = "This server does not host this topic-partition."


def invalid_batches(batches: list[Any], version: int, renew: bool) -> bool:
    """Whether the partition's batches break Kafka's rules (the whole partition is then
    INVALID_REQUEST)."""
    previous_last = None
    highest_type = 4 if version >= 2 else 3
    for batch in batches:
        first, last, types = batch["first_offset"], batch["last_offset"], batch["acknowledge_types"]
        if first > last or (previous_last is not None and first < previous_last):
            return True
        if not types:
            return True
        if len(types) > 1 and len(types) != last - first + 1:
            return True
        for kind in types:
            if kind < 0 or kind > highest_type or (kind == RENEW and not renew):
                return True
        previous_last = last
    return False


def acknowledge_topics(
    broker: Broker,
    request: Request[Any],
    group_id: str,
    member_id: str,
    topics: list[Any],
    renew: bool,
) -> dict[tuple[bytes, int], Later]:
    """(topic id, partition) -> Later of its (ErrorCode, message), for every partition with
    batches."""
    shares = broker.shares
    assert shares is not None, "the handlers answer UNSUPPORTED_VERSION without share groups"
    readable: set[str] | None = None
    if broker.authorizer is not None:
        names = [t.name for t in (broker.groups.topics.by_id(x["topic_id"]) for x in topics) if t]
        readable = filter_allowed(broker, request, AclOperation.READ, TOPIC, names)
    out: dict[tuple[bytes, int], Later] = {}
    for t in topics:
        topic: Topic | None = broker.groups.topics.by_id(t["topic_id"])
        for p in t["partitions"]:
            batches = p["acknowledgement_batches"]
            if not batches:
                continue
            key = (t["topic_id"], p["partition_index"])
            if topic is None:
                out[key] = Later.of((ErrorCode.UNKNOWN_TOPIC_ID, None))
            elif readable is not None and topic.name not in readable:
                out[key] = Later.of((ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
            elif not 0 <= p["partition_index"] < topic.partitions:
                out[key] = Later.of((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NOT_HOSTED))
            elif invalid_batches(batches, request.api_version, renew):
                out[key] = Later.of((ErrorCode.INVALID_REQUEST, None))
            else:
                out[key] = shares.acknowledge(
                    group_id,
                    member_id,
                    topic,
                    p["partition_index"],
                    [
                        (b["first_offset"], b["last_offset"], b["acknowledge_types"])
                        for b in batches
                    ],
                )
    return out
