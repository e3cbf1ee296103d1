"""The embedded consumer protocol through the compiled core (the kafka-protocol crate's schemas):
byte-exact with Kafka's layout, round trips, forward-compatible versions, malformed input refused."""

from __future__ import annotations

import struct

import pytest

from corral import _core
from corral.groups.subscription import subscribed_topics
from corral.load import consumer_protocol as cp


def s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def partitions(tps: dict[str, list[int]]) -> bytes:
    out = struct.pack(">i", len(tps))
    for topic, ps in tps.items():
        out += s(topic) + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out


# Kafka's ConsumerProtocolSubscription v3 and ConsumerProtocolAssignment v3, laid out by hand.
SUBSCRIPTION_V3 = (
    struct.pack(">hi", 3, 2)
    + s("a")
    + s("b")
    + struct.pack(">i", -1)
    + partitions({"a": [0, 2]})
    + struct.pack(">i", 7)
    + struct.pack(">h", -1)
)
ASSIGNMENT_V3 = struct.pack(">h", 3) + partitions({"a": [1], "b": [0, 3]}) + struct.pack(">i", -1)


def test_bytes_are_kafkas_layout():
    assert cp.encode_subscription(["a", "b"], {"a": [0, 2]}, 7) == SUBSCRIPTION_V3
    assert cp.encode_assignment({"a": [1], "b": [0, 3]}) == ASSIGNMENT_V3


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_round_trips_in_every_version(version):
    data = _core.encode_consumer_subscription(version, ["t1", "t2"], [("t1", [4])], 9, "rack-a")
    _, topics, owned, generation, rack = _core.decode_consumer_subscription(data)
    assert topics == ["t1", "t2"]
    assert owned == ([("t1", [4])] if version >= 1 else [])
    assert generation == (9 if version >= 2 else -1)
    assert rack == ("rack-a" if version >= 3 else None)
    assigned = _core.encode_consumer_assignment(version, [("t1", [0, 1])])
    assert _core.decode_consumer_assignment(assigned) == ([("t1", [0, 1])], None)


def test_a_newer_version_is_read_as_the_newest_known():
    newer = struct.pack(">h", 5) + SUBSCRIPTION_V3[2:] + b"fields of v5"
    assert _core.decode_consumer_subscription(newer)[:2] == (5, ["a", "b"])
    assert cp.decode_assignment(struct.pack(">h", 4) + ASSIGNMENT_V3[2:]) == {"a": [1], "b": [0, 3]}


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        struct.pack(">h", -1) + SUBSCRIPTION_V3[2:],
        struct.pack(">hi", 0, 1000) + s("a"),
        SUBSCRIPTION_V3[:9],
        struct.pack(">hi", 0, 1) + b"\x00\x05ab",
    ],
)
def test_malformed_subscriptions_are_refused(data):
    with pytest.raises(ValueError):
        _core.decode_consumer_subscription(data)
    assert subscribed_topics(data) is None


def test_subscribed_topics():
    assert subscribed_topics(SUBSCRIPTION_V3) == {"a", "b"}
    v0 = struct.pack(">hi", 0, 1) + s("orders") + struct.pack(">i", -1)
    assert subscribed_topics(v0) == {"orders"}


def test_encoding_refuses_unknown_versions():
    with pytest.raises(ValueError):
        _core.encode_consumer_subscription(4, ["a"], [])
    with pytest.raises(ValueError):
        _core.encode_consumer_assignment(-1, [])
