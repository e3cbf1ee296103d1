"""A KIP-848 consumer group's records in `__consumer_offsets`, in Kafka's formats (record types 3,
5, 6, 7, 8 and 16; reference/kip848.md §7), so Kafka's formatters read them and corral replays them.

Each record is the whole value of its key: replaying the latest record of every key rebuilds the
group, which is what `ConsumerGroup.replay` does, live and at load. Keys are non-flexible
(`[int16 type][int16-length strings]`); values are `[int16 version 0][flexible struct]`: compact
strings and arrays (unsigned varint length + 1, 0 for null), uuids as 16 bytes, a tagged-field
section after every struct. Schemas: apache/kafka group-coordinator/src/main/resources/common/
message/ConsumerGroup*.json.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# Record types (the key's leading int16).
GROUP_EPOCH = 3
PARTITION_METADATA = 4  # obsolete since Kafka 4.1: read and dropped
MEMBER_METADATA = 5
TARGET_EPOCH = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGEX = 16
TYPES = frozenset(
    {
        GROUP_EPOCH,
        PARTITION_METADATA,
        MEMBER_METADATA,
        TARGET_EPOCH,
        TARGET_MEMBER,
        CURRENT_ASSIGNMENT,
        REGEX,
    }
)

# topic id (16 bytes) -> partitions, ascending.
Assignment = dict[bytes, tuple[int, ...]]
# topic id -> the assignment epoch of each of its partitions, in the order of the Assignment's
# partitions (KIP-1251's tagged AssignmentEpochs); a topic left out has none (the tag is absent;
# Kafka's default is an empty list, and a null list is read as none too).
AssignmentEpochs = dict[bytes, tuple[int, ...]]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# ------------------------------------------------------------------------------------ records


@dataclass(slots=True)
class GroupEpoch:
    group_id: str
    epoch: int
    metadata_hash: int = 0


@dataclass(slots=True)
class ClassicMetadata:
    """A classic protocol member of a consumer group (KIP-848 §5): its JoinGroup's timeout and
    protocols."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class MemberMetadata:
    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMetadata | None = None


@dataclass(slots=True)
class TargetEpoch:
    group_id: str
    epoch: int
    timestamp_ms: int = 0


@dataclass(slots=True)
class TargetMember:
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(slots=True)
class CurrentAssignment:
    group_id: str
    member_id: str
    epoch: int
    previous_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment = field(default_factory=dict)
    # KIP-1251 (Kafka 4.3+): when each partition was assigned to the member. Kafka writes them
    # for every topic; a record of an older writer has none.
    assigned_epochs: AssignmentEpochs = field(default_factory=dict)
    pending_epochs: AssignmentEpochs = field(default_factory=dict)
    # Its value bytes once encoded (`value_of`): the network thread's view keeps them for a
    # member it may move (rust/groups/consumer_epoch_moves.rs), and the write then reuses them.
    encoded: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class RegexTopics:
    group_id: str
    regex: str
    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


@dataclass(slots=True)
class ConsumerTombstone:
    """The tombstone of one key: `kind` is the record type, `name` the member id (types 5, 7, 8),
    the regex (16) or None (3, 4, 6)."""

    kind: int
    group_id: str
    name: str | None = None


ConsumerRecord = (
    GroupEpoch
    | MemberMetadata
    | TargetEpoch
    | TargetMember
    | CurrentAssignment
    | RegexTopics
    | ConsumerTombstone
)


# ------------------------------------------------------------------------------------- writing


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def _compact_bytes(data: bytes) -> bytes:
    return _uvarint(len(data) + 1) + data


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def _int32s(values) -> bytes:
    return _uvarint(len(values) + 1) + struct.pack(f">{len(values)}i", *values)


def _topic_partitions(assignment: Assignment, epochs: AssignmentEpochs | None = None) -> bytes:
    """[]{TopicId uuid, Partitions []int32, tag 0 AssignmentEpochs []int32 (when `epochs` has
    some for the topic)}, in topic id order (stable bytes)."""
    parts = [_uvarint(len(assignment) + 1)]
    for topic_id in sorted(assignment):
        parts += [topic_id, _int32s(assignment[topic_id])]
        topic_epochs = None if epochs is None else epochs.get(topic_id)
        if not topic_epochs:  # Kafka's default is an empty list, left out (null would be written)
            parts.append(b"\x00")
        else:
            data = _int32s(topic_epochs)
            parts += [b"\x01\x00", _uvarint(len(data)), data]
    return b"".join(parts)


def key_of(record: ConsumerRecord) -> bytes:
    if isinstance(record, ConsumerTombstone):
        kind, name = record.kind, record.name
    else:
        kind, name = _KIND[type(record)], _NAME_OF[type(record)](record)
    key = _I16.pack(kind) + _string(record.group_id)
    return key if name is None else key + _string(name)


def value_of(record: ConsumerRecord) -> bytes | None:
    """The value bytes (version 0), None for a tombstone."""
    head = _I16.pack(0)
    if isinstance(record, ConsumerTombstone):
        return None
    if isinstance(record, GroupEpoch):
        tags = (
            b"\x00"
            if not record.metadata_hash
            else b"\x01\x00\x08" + _I64.pack(record.metadata_hash)
        )
        return head + _I32.pack(record.epoch) + tags
    if isinstance(record, MemberMetadata):
        parts = [
            head,
            _compact_string(record.instance_id),
            _compact_string(record.rack_id),
            _compact_string(record.client_id),
            _compact_string(record.client_host),
            _uvarint(len(record.topic_names) + 1),
            *(_compact_string(t) for t in record.topic_names),
            _compact_string(record.regex),
            _I32.pack(record.rebalance_timeout_ms),
            _compact_string(record.server_assignor),
        ]
        # Tag 0, ClassicMemberMetadata, as Kafka's generated code writes it: its default is an
        # empty struct (timeout 0, no protocols), left out; null is the tag with the marker 0, and
        # a struct follows the marker 1. (Kafka reads a missing tag as that empty struct, that is
        # as a classic member.)
        if record.classic is None:
            parts.append(b"\x01\x00\x01\x00")
        elif not record.classic.session_timeout_ms and not record.classic.protocols:
            parts.append(b"\x00")
        else:
            classic = [
                b"\x01",
                _I32.pack(record.classic.session_timeout_ms),
                _uvarint(len(record.classic.protocols) + 1),
            ]
            for name, metadata in record.classic.protocols:
                classic += [_compact_string(name), _compact_bytes(metadata), b"\x00"]
            classic.append(b"\x00")
            body = b"".join(classic)
            parts += [b"\x01\x00", _uvarint(len(body)), body]
        return b"".join(parts)
    if isinstance(record, TargetEpoch):
        tags = (
            b"\x00" if not record.timestamp_ms else b"\x01\x00\x08" + _I64.pack(record.timestamp_ms)
        )
        return head + _I32.pack(record.epoch) + tags
    if isinstance(record, TargetMember):
        return head + _topic_partitions(record.partitions) + b"\x00"
    if isinstance(record, CurrentAssignment):
        if record.encoded is not None:
            return record.encoded
        record.encoded = b"".join(
            [
                head,
                _I32.pack(record.epoch),
                _I32.pack(record.previous_epoch),
                struct.pack(">b", record.state),
                _topic_partitions(record.assigned, record.assigned_epochs),
                _topic_partitions(record.pending_revocation, record.pending_epochs),
                b"\x00",
            ]
        )
        return record.encoded
    if isinstance(record, RegexTopics):
        return b"".join(
            [
                head,
                _uvarint(len(record.topics) + 1),
                *(_compact_string(t) for t in record.topics),
                _I64.pack(record.version),
                _I64.pack(record.timestamp_ms),
                b"\x00",
            ]
        )
    raise TypeError(f"not a consumer group record: {record!r}")


_KIND = {
    GroupEpoch: GROUP_EPOCH,
    MemberMetadata: MEMBER_METADATA,
    TargetEpoch: TARGET_EPOCH,
    TargetMember: TARGET_MEMBER,
    CurrentAssignment: CURRENT_ASSIGNMENT,
    RegexTopics: REGEX,
}
_NAME_OF = {
    GroupEpoch: lambda r: None,
    TargetEpoch: lambda r: None,
    MemberMetadata: lambda r: r.member_id,
    TargetMember: lambda r: r.member_id,
    CurrentAssignment: lambda r: r.member_id,
    RegexTopics: lambda r: r.regex,
}


# ------------------------------------------------------------------------------------- reading


class FlexibleReader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0):
        self.data, self.pos = data, pos

    def unpack(self, fmt: struct.Struct) -> int:
        (v,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return v

    def uvarint(self) -> int:
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def string(self) -> str:
        return self.raw(self.unpack(_I16)).decode()

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1).decode()

    def compact_bytes(self) -> bytes:
        n = self.uvarint()
        return b"" if n == 0 else self.raw(n - 1)

    def count(self) -> int:
        return max(self.uvarint() - 1, 0)

    def int32s(self) -> tuple[int, ...]:
        n = self.count()
        return struct.unpack_from(f">{n}i", self.raw(4 * n))

    def tags(self) -> dict[int, bytes]:
        return {self.uvarint(): self.raw(self.uvarint()) for _ in range(self.uvarint())}

    def topic_partitions(self, epochs: AssignmentEpochs | None = None) -> Assignment:
        """The assignment; its topics' AssignmentEpochs (tag 0, KIP-1251) go to `epochs` (the
        target assignment's topics have none)."""
        out: Assignment = {}
        for _ in range(self.count()):
            topic_id = self.raw(16)
            out[topic_id] = self.int32s()
            tags = self.tags()
            if epochs is not None and 0 in tags:
                tag = FlexibleReader(tags[0])
                if tag.uvarint() > 1:  # 0 (null) and 1 (empty, Kafka's default): none
                    tag.pos = 0
                    epochs[topic_id] = tag.int32s()
        return out


def decode(key: bytes, value: bytes | None) -> ConsumerRecord | None:
    """The record of a consumer-group key/value; None for the obsolete partition metadata."""
    r = FlexibleReader(key)
    kind = r.unpack(_I16)
    group_id = r.string()
    name = (
        r.string() if kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGEX) else None
    )
    if kind == PARTITION_METADATA:
        return None
    if value is None:
        return ConsumerTombstone(kind, group_id, name)
    v = FlexibleReader(value)
    version = v.unpack(_I16)
    if version != 0:
        raise ValueError(f"record type {kind} value v{version} is not supported")
    if kind == GROUP_EPOCH:
        epoch = v.unpack(_I32)
        tags = v.tags()
        return GroupEpoch(group_id, epoch, _I64.unpack(tags[0])[0] if 0 in tags else 0)
    if kind == MEMBER_METADATA:
        instance_id, rack_id = v.compact_string(), v.compact_string()
        client_id, client_host = v.compact_string() or "", v.compact_string() or ""
        topics = tuple(v.compact_string() or "" for _ in range(v.count()))
        regex = v.compact_string()
        rebalance_timeout_ms = v.unpack(_I32)
        assignor = v.compact_string()
        tags = v.tags()
        classic = None if 0 in tags else ClassicMetadata(0, [])  # see value_of
        c = FlexibleReader(tags.get(0, b"\x00"))
        if c.uvarint() > 0:
            session = c.unpack(_I32)
            protocols = []
            for _ in range(c.count()):
                protocols.append((c.compact_string() or "", c.compact_bytes()))
                c.tags()
            classic = ClassicMetadata(session, protocols)
        return MemberMetadata(
            group_id,
            name or "",
            instance_id,
            rack_id,
            client_id,
            client_host,
            topics,
            regex,
            rebalance_timeout_ms,
            assignor,
            classic,
        )
    if kind == TARGET_EPOCH:
        epoch = v.unpack(_I32)
        tags = v.tags()
        return TargetEpoch(group_id, epoch, _I64.unpack(tags[0])[0] if 0 in tags else 0)
    if kind == TARGET_MEMBER:
        return TargetMember(group_id, name or "", v.topic_partitions())
    if kind == CURRENT_ASSIGNMENT:
        epoch, previous = v.unpack(_I32), v.unpack(_I32)
        state = struct.unpack_from(">b", v.raw(1))[0]
        assigned_epochs: AssignmentEpochs = {}
        pending_epochs: AssignmentEpochs = {}
        assigned = v.topic_partitions(assigned_epochs)
        pending = v.topic_partitions(pending_epochs)
        return CurrentAssignment(
            group_id,
            name or "",
            epoch,
            previous,
            state,
            assigned,
            pending,
            assigned_epochs,
            pending_epochs,
        )
    if kind == REGEX:
        topics = tuple(v.compact_string() or "" for _ in range(v.count()))
        return RegexTopics(group_id, name or "", topics, v.unpack(_I64), v.unpack(_I64))
    raise ValueError(f"record type {kind} is not a consumer group record")
