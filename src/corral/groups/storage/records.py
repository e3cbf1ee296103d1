"""The coordinator's records: what a handler hands the log, and their `__consumer_offsets` bytes
in Kafka's own formats, so Kafka's tools can read corral's log.

The records that travel between the groups layer and its log (`Record`): one request's
`OffsetCommits` of a group, `OffsetTombstones`, a classic group's `GroupMetadata`, a
`GroupTombstone`, and a consumer group's records (consumer_records.py). `encode_batch` turns
them into a RecordBatch, `decode` turns a key/value read back from the log (or a snapshot) into
one of them; `replay` (coordinator.py) applies them, the same way live and at load.

A record key is `[int16 type][key struct]`, a value `[int16 version][value struct]`; a null value
is a tombstone. Schemas: apache/kafka group-coordinator/src/main/resources/common/message/
OffsetCommitKey/Value, GroupMetadataKey/Value. Written versions: OffsetCommitValue v3 (v1 when
the commit carries an explicit expiry, as Kafka does), GroupMetadataValue v3. The bytes are the
compiled core's (rust/groups/records/, from one schema table; offset commits are built straight
into their batch by rust/groups/offset_records.rs); this module keeps the named records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corral import _core
from corral.groups.storage import consumer_records, share_records, txn_records
from corral.groups.storage.consumer_records import ConsumerRecord
from corral.groups.storage.share_records import ShareRecord
from corral.groups.storage.txn_records import TxnFacts, TxnMarker, TxnOffsetCommits, read_marker

OFFSET_COMMIT_KEY_V0 = 0
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
# The GroupMetadataValue version written.
GROUP_VALUE_VERSION = 3


# ------------------------------------------------------------------------------ group metadata


def group_key(group: str) -> bytes:
    return _core.record_key(GROUP_METADATA_KEY, (group,))


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int
    members: list[MemberValue]


def group_value(g: GroupValue) -> bytes:
    members = [
        (
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.subscription,
            m.assignment,
        )
        for m in g.members
    ]
    fields = (g.protocol_type, g.generation, g.protocol, g.leader, g.state_timestamp_ms, members)
    return _core.record_value(GROUP_METADATA_KEY, GROUP_VALUE_VERSION, fields)


def read_group_value(data: bytes) -> GroupValue:
    """GroupMetadataValue v0-v4; ValueError for malformed bytes or another version."""
    _, fields = _core.decode_record_value(GROUP_METADATA_KEY, data)
    protocol_type, generation, protocol, leader, state_ts, members = fields
    return GroupValue(
        protocol_type,
        generation,
        protocol,
        leader,
        state_ts,
        [
            # Before v1 a member has one timeout: its session timeout.
            MemberValue(m[0], m[1], m[2], m[3], m[5] if m[4] == -1 else m[4], *m[5:])
            for m in members
        ],
    )


def read_key(data: bytes) -> tuple[int, tuple[Any, ...] | None]:
    """(record type, key fields): (group, topic, partition) for offsets, (group,) for groups;
    None for a type corral does not know."""
    return _core.decode_record_key(data)


# ------------------------------------------------------------------------- records as values

# (partition, offset, leader epoch, metadata)
PartitionCommit = tuple[int, int, int, str]
KeyValue = tuple[bytes, bytes | None]


@dataclass(slots=True)
class OffsetCommits:
    """One request's offset commits for one group (one record per partition in the log)."""

    group_id: str
    topics: list[tuple[str, list[PartitionCommit]]]
    commit_ms: int
    expire_ms: int  # -1: the broker's retention applies


@dataclass(slots=True)
class OffsetTombstones:
    group_id: str
    partitions: list[tuple[str, int]]


@dataclass(slots=True)
class GroupMetadata:
    """A classic group's GroupMetadataValue (kept encoded: it is stored as is)."""

    group_id: str
    value: bytes


@dataclass(slots=True)
class GroupTombstone:
    group_id: str


Record = (
    OffsetCommits
    | OffsetTombstones
    | GroupMetadata
    | GroupTombstone
    | ConsumerRecord
    | ShareRecord
    | TxnOffsetCommits
    | TxnMarker
)
# A record as load reads it: (key, value), with its batch's transaction facts when the batch is
# transactional (storage/txn_records.py).
LogEntry = KeyValue | tuple[bytes, bytes | None, TxnFacts]


_SHARE_RECORDS = (
    share_records.ShareMemberMetadata,
    share_records.ShareGroupEpoch,
    share_records.ShareTargetEpoch,
    share_records.ShareTargetMember,
    share_records.ShareCurrentAssignment,
    share_records.ShareStatePartitions,
    share_records.ShareTombstone,
)


def _pairs(record: Record) -> list[KeyValue]:
    if isinstance(record, OffsetTombstones):
        return [(key, None) for key in _core.offset_keys(record.group_id, record.partitions)]
    if isinstance(record, GroupMetadata):
        return [(group_key(record.group_id), record.value)]
    if isinstance(record, GroupTombstone):
        return [(group_key(record.group_id), None)]
    if isinstance(record, (OffsetCommits, TxnOffsetCommits, TxnMarker)):
        raise ValueError(f"{type(record).__name__} are written alone")
    if isinstance(record, _SHARE_RECORDS):
        return [(share_records.key_of(record), share_records.value_of(record))]
    return [(consumer_records.key_of(record), consumer_records.value_of(record))]


def encode_batch(records: list[Record], now_ms: int, base_sequence: int = 0) -> bytes:
    """The one RecordBatch holding `records`. OffsetCommits (the commit path) travel alone and
    are built in one call into the core; so do a TxnOffsetCommit's (a transactional batch from
    `base_sequence`) and a marker (a control batch)."""
    if isinstance(records[0], (TxnOffsetCommits, TxnMarker)):
        if len(records) != 1:
            raise ValueError(f"{type(records[0]).__name__} are written alone")
        if isinstance(records[0], TxnMarker):
            return txn_records.marker_batch(records[0], now_ms)
        return txn_records.commit_batch(records[0], base_sequence)
    if isinstance(records[0], OffsetCommits):
        if len(records) != 1:
            raise ValueError("OffsetCommits are written alone")
        r = records[0]
        return _core.offset_commit_batch(r.group_id, r.topics, r.commit_ms, r.expire_ms)
    pairs: list[KeyValue] = []
    for record in records:
        pairs.extend(_pairs(record))
    return _core.build_batch(pairs, now_ms)


def decode(key: bytes, value: bytes | None, txn: TxnFacts | None = None) -> Record | None:
    """The record a key/value of the log holds; None for record types corral does not keep.
    `txn`: the facts of its transactional batch (its offset commits are then pending offsets
    of the producer, its control record a marker). ValueError for malformed bytes or a value
    version corral does not read."""
    if txn is not None:
        return _decode_transactional(key, value, txn)
    kind, fields = _core.decode_record_key(key)
    if fields is None:
        return None
    if kind in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY):
        group_id, topic, partition = fields
        if value is None:
            return OffsetTombstones(group_id, [(topic, partition)])
        _, (offset, leader_epoch, metadata, commit_ms, expire_ms, _) = _core.decode_record_value(
            kind, value
        )
        return OffsetCommits(
            group_id, [(topic, [(partition, offset, leader_epoch, metadata)])], commit_ms, expire_ms
        )
    if kind == GROUP_METADATA_KEY:
        (group_id,) = fields
        return GroupTombstone(group_id) if value is None else GroupMetadata(group_id, value)
    if kind in share_records.TYPES:
        return share_records.from_fields(kind, fields, value)
    return consumer_records.from_fields(kind, fields, value)


def _decode_transactional(key: bytes, value: bytes | None, txn: TxnFacts) -> Record | None:
    partition, offset, producer_id, producer_epoch, control = txn
    if control:
        marker = read_marker(key, value)
        return (
            None if marker is None else TxnMarker(partition, producer_id, producer_epoch, *marker)
        )
    record = decode(key, value)
    if isinstance(record, OffsetCommits):
        return TxnOffsetCommits(
            record.group_id,
            producer_id,
            producer_epoch,
            record.topics,
            record.commit_ms,
            record.expire_ms,
            offset,
        )
    return record  # Kafka writes nothing else transactionally: kept as a plain record
