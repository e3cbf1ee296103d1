"""Transactions in `__consumer_offsets`: the records of TxnOffsetCommit and of the markers that end
a transaction, their batches, and what load reads of a batch besides its keys and values.

A TxnOffsetCommit writes normal OffsetCommit records in a *transactional* RecordBatch (attribute
bit 4, the request's producer id and epoch); they are pending offsets of that producer until a
control batch (attributes transactional|control, base sequence -1, one record: key int16 0 +
int16 type ABORT=0/COMMIT=1, value int16 0 + int32 coordinator epoch) commits or aborts them
(Kafka's OffsetMetadataManager.replay and replayEndTransactionMarker). The log store writes the
control batches itself (PartitionLogs.write_marker); this module reads them back.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from corral import _core

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ABORT, COMMIT = 0, 1
NO_PRODUCER = -1

# RecordBatch v2 header positions (rust/log/batch.rs).
_LENGTH_AT, _ATTRIBUTES_AT, _PRODUCER_AT, _HEADER_LEN = 8, 21, 43, 61


@dataclass(slots=True)
class TxnOffsetCommits:
    """One TxnOffsetCommit's offsets of one group, pending for `producer_id` until its marker."""

    group_id: str
    producer_id: int
    producer_epoch: int
    topics: list[tuple[str, list[tuple[int, int, int, str]]]]
    commit_ms: int
    expire_ms: int
    # The log offset of its batch (set once appended, or read at load): a snapshot never
    # covers past the first offset of an open transaction.
    offset: int = -1


@dataclass(slots=True)
class TxnMarker:
    """The end of `producer_id`'s transaction in one `__consumer_offsets` partition (all of its
    groups there)."""

    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    # Markers belong to no group; load and the writer know them by this.
    group_id: str = field(default="", init=False)


# ------------------------------------------------------------------------------ batches


def commit_batch(record: TxnOffsetCommits, base_sequence: int) -> bytes:
    """The transactional batch of `record`: the OffsetCommit records of a plain commit, with the
    producer's id, epoch and `base_sequence`, and the transactional attribute."""
    plain = _core.offset_commit_batch(
        record.group_id, record.topics, record.commit_ms, record.expire_ms
    )
    (attributes,) = struct.unpack_from(">h", plain, _ATTRIBUTES_AT)
    return _core.restamp_batch(
        plain,
        record.producer_id,
        record.producer_epoch,
        base_sequence,
        attributes | ATTR_TRANSACTIONAL,
    )


def marker_batch(marker: TxnMarker, now_ms: int) -> bytes:
    """The control batch of `marker`, as the log store writes it (for logs without a store)."""
    key = struct.pack(">hh", 0, COMMIT if marker.commit else ABORT)
    value = struct.pack(">hi", 0, marker.coordinator_epoch)
    plain = _core.build_batch([(key, value)], now_ms)
    return _core.restamp_batch(
        plain, marker.producer_id, marker.producer_epoch, -1, ATTR_TRANSACTIONAL | ATTR_CONTROL
    )


def read_marker(key: bytes | None, value: bytes | None) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of a control record; None for another control type."""
    if key is None or len(key) < 4 or value is None or len(value) < 6:
        return None
    _, kind = struct.unpack_from(">hh", key)
    if kind not in (ABORT, COMMIT):
        return None
    (coordinator_epoch,) = struct.unpack_from(">i", value, 2)
    return kind == COMMIT, coordinator_epoch


# One record of the log with its batch's facts: (offset, key, value, producer id, producer
# epoch, control). Non-transactional batches give producer id -1.
LogRecord = tuple[int, bytes | None, bytes | None, int, int, bool]
# What load needs of a transactional batch's record besides its key and value: (partition,
# offset, producer id, producer epoch, control).
TxnFacts = tuple[int, int, int, int, bool]


def log_records(data: bytes) -> Iterator[LogRecord]:
    """The records of consecutive uncompressed batches with their batch's transaction facts.
    Chunks without transactional batches (the usual case) are decoded in one call."""
    spans: list[tuple[int, int, int, int, bool]] = []  # (start, end, pid, epoch, control)
    any_txn = False
    pos = 0
    while pos + _HEADER_LEN <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + _LENGTH_AT)
        end = pos + 12 + length
        (attributes,) = struct.unpack_from(">h", data, pos + _ATTRIBUTES_AT)
        if attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL):
            pid, epoch = struct.unpack_from(">qh", data, pos + _PRODUCER_AT)
            spans.append((pos, end, pid, epoch, bool(attributes & ATTR_CONTROL)))
            any_txn = True
        else:
            spans.append((pos, end, NO_PRODUCER, -1, False))
        pos = end
    if not any_txn:
        for offset, _, key, value in _core.decode_batches(data):
            yield offset, key, value, NO_PRODUCER, -1, False
        return
    for start, end, pid, epoch, control in spans:
        for offset, _, key, value in _core.decode_batches(data[start:end]):
            yield offset, key, value, pid, epoch, control
