"""The coordinator's records: what a handler hands the log, and their `__consumer_offsets` bytes
in Kafka's own formats, so Kafka's tools can read corral's log.

The records that travel between the groups layer and its log (`Record`): one request's
`OffsetCommits` of a group, `OffsetTombstones`, a classic group's `GroupMetadata`, a
`GroupTombstone`, and a consumer group's records (consumer_records.py). `encode_batch` turns them into a RecordBatch, `decode` turns a key/value read back
from the log (or a snapshot) into one of them; `replay` (coordinator.py) applies them, the same
way live and at load.

A record key is `[int16 type][key struct]`, a value `[int16 version][value struct]`; a null value
is a tombstone. Schemas: apache/kafka group-coordinator/src/main/resources/common/message/
OffsetCommitKey/Value, GroupMetadataKey/Value. Written versions: OffsetCommitValue v3 (v1 when
the commit carries an explicit expiry, as Kafka does), GroupMetadataValue v3. All of these are
non-flexible: int16-length strings (-1 for null), int32-length bytes, int32-counted arrays.
Offset records are encoded by the compiled core only (rust/groups/offset_records.rs); this module
decodes them and encodes group metadata.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from corral import _core
from corral.groups.storage import consumer_records
from corral.groups.storage.consumer_records import ConsumerRecord

OFFSET_COMMIT_KEY_V0 = 0
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _string(text: str | None) -> bytes:
    if text is None:
        return _I16.pack(-1)
    data = text.encode()
    return _I16.pack(len(data)) + data


def _bytes(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


class Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.data, self.pos)
        self.pos += 8
        return v

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def bytes(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


# ----------------------------------------------------------------------------------- offsets


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    expire_ms: int


def read_offset_value(data: bytes) -> OffsetValue:
    """OffsetCommitValue v0-v4 (v4, which Kafka 4 writes, is flexible: its tagged topic id is
    not read)."""
    r = Reader(data)
    version = r.i16()
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    if version >= 4:
        flexible = consumer_records.FlexibleReader(data, r.pos)
        metadata = flexible.compact_string() or ""
        r.pos = flexible.pos
    else:
        metadata = r.string() or ""
    commit_ms = r.i64()
    expire_ms = r.i64() if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, commit_ms, expire_ms)


# ------------------------------------------------------------------------------ group metadata


def group_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY) + _string(group)


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
    parts = [
        _I16.pack(3),
        _string(g.protocol_type),
        _I32.pack(g.generation),
        _string(g.protocol),
        _string(g.leader),
        _I64.pack(g.state_timestamp_ms),
        _I32.pack(len(g.members)),
    ]
    for m in g.members:
        parts += [
            _string(m.member_id),
            _string(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(parts)


def read_group_value(data: bytes) -> GroupValue:
    r = Reader(data)
    version = r.i16()
    if version > 3:
        raise ValueError(f"GroupMetadataValue v{version} is not supported")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        members.append(
            MemberValue(
                member_id,
                instance,
                client_id,
                client_host,
                session if rebalance == -1 else rebalance,
                session,
                r.bytes(),
                r.bytes(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)


def read_key(data: bytes) -> tuple[int, tuple]:
    """(record type, key fields): (group, topic, partition) for offsets, (group,) for groups."""
    r = Reader(data)
    kind = r.i16()
    if kind in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY):
        return kind, (r.string(), r.string(), r.i32())
    if kind == GROUP_METADATA_KEY:
        return kind, (r.string(),)
    return kind, ()


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


Record = OffsetCommits | OffsetTombstones | GroupMetadata | GroupTombstone | ConsumerRecord


def _pairs(record: Record) -> list[KeyValue]:
    if isinstance(record, OffsetTombstones):
        return [(key, None) for key in _core.offset_keys(record.group_id, record.partitions)]
    if isinstance(record, GroupMetadata):
        return [(group_key(record.group_id), record.value)]
    if isinstance(record, GroupTombstone):
        return [(group_key(record.group_id), None)]
    return [(consumer_records.key_of(record), consumer_records.value_of(record))]


def encode_batch(records: list[Record], now_ms: int) -> bytes:
    """The one RecordBatch holding `records`. OffsetCommits (the commit path) travel alone and
    are built in one call into the core."""
    if isinstance(records[0], OffsetCommits):
        if len(records) != 1:
            raise ValueError("OffsetCommits are written alone")
        r = records[0]
        return _core.offset_commit_batch(r.group_id, r.topics, r.commit_ms, r.expire_ms)
    pairs: list[KeyValue] = []
    for record in records:
        pairs.extend(_pairs(record))
    return _core.build_batch(pairs, now_ms)


def decode(key: bytes, value: bytes | None) -> Record | None:
    """The record a key/value of the log holds; None for record types corral does not keep."""
    kind, fields = read_key(key)
    if kind in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY):
        group_id, topic, partition = fields
        if value is None:
            return OffsetTombstones(group_id, [(topic, partition)])
        v = read_offset_value(value)
        return OffsetCommits(
            group_id,
            [(topic, [(partition, v.offset, v.leader_epoch, v.metadata)])],
            v.commit_ms,
            v.expire_ms,
        )
    if kind == GROUP_METADATA_KEY:
        (group_id,) = fields
        return GroupTombstone(group_id) if value is None else GroupMetadata(group_id, value)
    if kind in consumer_records.TYPES:
        return consumer_records.decode(key, value)
    return None
