"""The embedded "consumer" protocol of classic groups: subscription and assignment bytes, assignors.

The coordinator relays these bytes between members; the leader decodes every subscription and
encodes every assignment (Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment, v3).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

PROTOCOL_TYPE = "consumer"
VERSION = 3

TopicPartitions = dict[str, list[int]]


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def array(self, item) -> list:
        n = self.take(">i")
        return [] if n < 0 else [item() for _ in range(n)]


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _topic_partitions(tps: TopicPartitions) -> bytes:
    out = [struct.pack(">i", len(tps))]
    for topic, partitions in tps.items():
        out.append(_string(topic))
        out.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    return b"".join(out)


def _read_topic_partitions(r: _Reader) -> TopicPartitions:
    out: TopicPartitions = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        out[topic] = r.array(lambda: r.take(">i"))
    return out


def encode_subscription(topics: Iterable[str], owned: TopicPartitions, generation: int) -> bytes:
    topics = list(topics)
    return b"".join([
        struct.pack(">hi", VERSION, len(topics)), *(_string(t) for t in topics),
        struct.pack(">i", -1),                      # user data: null
        _topic_partitions(owned),                   # v1+: owned partitions
        struct.pack(">i", generation),              # v2+: generation id
        _string(None),                              # v3+: rack id
    ])


def decode_subscription_topics(data: bytes) -> list[str]:
    r = _Reader(data)
    r.take(">h")
    return r.array(r.string)


def encode_assignment(assigned: TopicPartitions) -> bytes:
    return struct.pack(">h", VERSION) + _topic_partitions(assigned) + struct.pack(">i", -1)


def decode_assignment(data: bytes) -> TopicPartitions:
    if not data:
        return {}  # a member that got no assignment (the leader may send empty bytes)
    r = _Reader(data)
    r.take(">h")
    return _read_topic_partitions(r)


def assign(strategy: str, subscriptions: dict[str, list[str]],
           partitions_per_topic: dict[str, int]) -> dict[str, TopicPartitions]:
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
