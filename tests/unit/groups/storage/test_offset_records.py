"""The compiled core is the one encoder of offset records: its bytes are Kafka's OffsetCommitKey v1
and OffsetCommitValue v3 (v1 with an explicit expiry), and records.py decodes them back."""

import struct

import pytest

from corral import _core
from corral.groups.storage import records

COMMITS = [("orders", [(0, 5, 3, "meta"), (7, 0, -1, "")]), ("påyments", [(2, 9, 1, "ünïcode")])]


def kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def kafka_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey v1, written out from Kafka's schema."""
    return (
        struct.pack(">h", 1)
        + kafka_string(group)
        + kafka_string(topic)
        + struct.pack(">i", partition)
    )


def kafka_value(offset: int, epoch: int, metadata: str, commit_ms: int, expire_ms: int) -> bytes:
    if expire_ms >= 0:  # v1: no leader epoch, an expire timestamp
        return (
            struct.pack(">hq", 1, offset)
            + kafka_string(metadata)
            + struct.pack(">qq", commit_ms, expire_ms)
        )
    return (
        struct.pack(">hqi", 3, offset, epoch)
        + kafka_string(metadata)
        + struct.pack(">q", commit_ms)
    )


@pytest.mark.parametrize("expire_ms", [-1, 99_000])
def test_offset_commit_batch_writes_kafka_records(expire_ms):
    batch = _core.offset_commit_batch("group-é", COMMITS, 1234, expire_ms)
    decoded = [(ts, key, value) for _, ts, key, value in _core.decode_batches(batch)]
    assert decoded == [
        (
            1234,
            kafka_key("group-é", topic, p),
            kafka_value(offset, epoch, metadata, 1234, expire_ms),
        )
        for topic, partitions in COMMITS
        for p, offset, epoch, metadata in partitions
    ]
    record = records.decode(decoded[2][1], decoded[2][2])
    assert record == records.OffsetCommits(
        "group-é", [("påyments", [(2, 9, 1 if expire_ms < 0 else -1, "ünïcode")])], 1234, expire_ms
    )


def test_offset_map_records_and_tombstone_keys_are_kafka_records():
    offsets = _core.OffsetMap()
    offsets.commit("g", "b", [(1, 10, 2, "x")], 500)
    offsets.commit("g", "a", [(0, 7, -1, "")], 600, 9000)
    assert offsets.records("g") == [
        (kafka_key("g", "a", 0), kafka_value(7, -1, "", 600, 9000)),
        (kafka_key("g", "b", 1), kafka_value(10, 2, "x", 500, -1)),
    ]
    assert offsets.records("nobody") == []
    assert _core.offset_keys("g", [("a", 0), ("b", 1)]) == [
        kafka_key("g", "a", 0),
        kafka_key("g", "b", 1),
    ]
    assert records.decode(kafka_key("g", "a", 0), None) == records.OffsetTombstones("g", [("a", 0)])


def test_offset_commit_batch_refuses_oversized_strings_and_empty_commits():
    with pytest.raises(ValueError):
        _core.offset_commit_batch("g", [("t", [(0, 1, -1, "x" * 40000)])], 1, -1)
    with pytest.raises(ValueError):
        _core.offset_commit_batch("g", [], 1, -1)
