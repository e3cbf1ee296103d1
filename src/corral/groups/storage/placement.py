"""Where a group lives: its `__consumer_offsets` partition, placed as Kafka places it."""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode()) % partitions (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
