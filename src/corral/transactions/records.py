"""`__transaction_state` records in Kafka's format (TransactionLogKey / TransactionLogValue, from
transaction-coordinator/src/main/resources/common/message/), so Kafka's tools read corral's log.

Key: int16 version 0, then the transactional id (int16 length + UTF-8). Value: int16 version 0
(the non-flexible one, written while the cluster's transaction.version is 0, as corral's is),
then ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8,
TransactionPartitions (nullable array of {Topic string, PartitionIds [int32]}; null for Empty),
TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64. A null value is a
tombstone (an expired id). Records of other versions are skipped on load, as Kafka skips them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from corral.transactions.state import TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0
_HEAD = struct.Struct(">hqhib")
_TIMES = struct.Struct(">qq")


def partition_for(transactional_id: str, partitions: int) -> int:
    """Utils.abs(transactionalId.hashCode()) % partitions: Java's String hash over UTF-16 code
    units with int32 overflow; abs(Integer.MIN_VALUE) is 0 in Kafka's Utils.abs."""
    h = 0
    data = transactional_id.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return (0 if h == -(2**31) else abs(h)) % partitions


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def value(meta: TxnMetadata) -> bytes:
    out = [
        _HEAD.pack(
            VALUE_VERSION, meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state
        )
    ]
    if meta.state == TxnState.EMPTY:
        out.append(struct.pack(">i", -1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(struct.pack(">i", len(by_topic)))
        for topic, parts in by_topic.items():
            out.append(_string(topic))
            out.append(struct.pack(f">i{len(parts)}i", len(parts), *parts))
    out.append(_TIMES.pack(meta.update_ms, meta.start_ms))
    return b"".join(out)


@dataclass
class Loaded:
    """One record read back: the id, and its metadata (None for a tombstone)."""

    transactional_id: str
    meta: TxnMetadata | None


def decode(key_bytes: bytes, value_bytes: bytes | None) -> Loaded | None:
    """A record of `__transaction_state`; None for versions corral does not read."""
    (version, length) = struct.unpack_from(">hh", key_bytes)
    if version != KEY_VERSION:
        return None
    transactional_id = key_bytes[4 : 4 + length].decode()
    if value_bytes is None:
        return Loaded(transactional_id, None)
    version, producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(value_bytes)
    if version != VALUE_VERSION:
        return None
    pos = _HEAD.size
    (count,) = struct.unpack_from(">i", value_bytes, pos)
    pos += 4
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(count, 0)):
        (length,) = struct.unpack_from(">h", value_bytes, pos)
        topic = value_bytes[pos + 2 : pos + 2 + length].decode()
        pos += 2 + length
        (n,) = struct.unpack_from(">i", value_bytes, pos)
        partitions.update((topic, p) for p in struct.unpack_from(f">{n}i", value_bytes, pos + 4))
        pos += 4 + 4 * n
    update_ms, start_ms = _TIMES.unpack_from(value_bytes, pos)
    meta = TxnMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        timeout_ms=timeout_ms,
        state=TxnState(status),
        partitions=frozenset(partitions),
        start_ms=start_ms,
        update_ms=update_ms,
    )
    return Loaded(transactional_id, meta)
