"""The embedded "consumer" protocol of classic groups: subscription and assignment bytes, assignors.

The coordinator relays these bytes between members; the leader decodes every subscription and
encodes every assignment (Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment, v3,
with the kafka-protocol crate's schemas in the compiled core).
"""

from __future__ import annotations

from collections.abc import Iterable

from corral import _core

PROTOCOL_TYPE = "consumer"
VERSION = 3

TopicPartitions = dict[str, list[int]]


def encode_subscription(topics: Iterable[str], owned: TopicPartitions, generation: int) -> bytes:
    return _core.encode_consumer_subscription(
        VERSION, list(topics), list(owned.items()), generation
    )


def decode_subscription_topics(data: bytes) -> list[str]:
    return _core.decode_consumer_subscription(data)[1]


def encode_assignment(assigned: TopicPartitions) -> bytes:
    return _core.encode_consumer_assignment(VERSION, list(assigned.items()))


def decode_assignment(data: bytes) -> TopicPartitions:
    if not data:
        return {}  # a member that got no assignment (the leader may send empty bytes)
    return dict(_core.decode_consumer_assignment(data)[0])


def assign(
    strategy: str, subscriptions: dict[str, list[str]], partitions_per_topic: dict[str, int]
) -> dict[str, TopicPartitions]:
    """The leader's assignment: `range` (Kafka's RangeAssignor) or `roundrobin`."""
    members = sorted(subscriptions)
    out: dict[str, TopicPartitions] = {m: {} for m in members}
    topics = sorted({t for ts in subscriptions.values() for t in ts if t in partitions_per_topic})
    if strategy == "range":
        for topic in topics:
            subscribers = [m for m in members if topic in subscriptions[m]]
            count = partitions_per_topic[topic]
            per, extra = divmod(count, len(subscribers))
            start = 0
            for i, member in enumerate(subscribers):
                n = per + (1 if i < extra else 0)
                if n:
                    out[member][topic] = list(range(start, start + n))
                start += n
    elif strategy == "roundrobin":
        i = 0
        for topic in topics:
            for p in range(partitions_per_topic[topic]):
                # Members not subscribed to this topic are skipped, as in RoundRobinAssignor.
                while topic not in subscriptions[members[i % len(members)]]:
                    i += 1
                out[members[i % len(members)]].setdefault(topic, []).append(p)
                i += 1
    else:
        raise ValueError(f"unknown assignor {strategy!r}")
    return out
